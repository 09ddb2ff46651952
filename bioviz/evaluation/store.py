"""Evaluation results on disk: the result cache and the results stored with a trained run.

Results are cached per (model fingerprint, task, data) under ``BIOVIZ_HOME/eval`` and, for a
trained run, also stored with the run in ``<run>/.eval.json`` (atomic writes; a file lock
serialises writers) so the Train page and the run list can show them.
"""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path

import numpy as np
from filelock import FileLock

from bioviz.ontology import Split
from bioviz.ontology.levels import LevelView
from bioviz.paths import subdir, write_text_atomic

# Bump when a metric's definition or a protocol changes: old cached results stop matching.
EVAL_VERSION = 1
# Results stored with a run. A dot-file, because the embedding cache keys a run's vectors by a
# hash of its files minus dot-files (bioviz.models.embeddings): storing results must not change it.
RUN_EVAL_FILE = ".eval.json"


def digest(*parts) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(part if isinstance(part, bytes) else str(part).encode())
        h.update(b"\0")
    return h.hexdigest()[:16]


def view_key(view: LevelView) -> dict:
    """What identifies a level view's content (names and their classes)."""
    return {
        "source": view.source, "root": view.root, "depth": view.depth, "mode": view.mode,
        "names": len(view.names), "classes": len(view.classes),
        "digest": digest("\n".join(view.names), view.labels.tobytes(), "\n".join(view.classes)),
    }


def split_key(split: Split) -> dict:
    """What identifies a split (settings and the rows drawn)."""
    return {
        "seed": split.seed, "shots": split.shots, "test_per_class": split.test_per_class,
        "zero_shot_classes": len(split.zero_shot_classes), **split.sizes(),
        "digest": digest(split.train.tobytes(), split.validation.tobytes(), split.test.tobytes(),
                          split.zero_shot.tobytes()),
    }


def cache_key(fingerprint: str, task: str, data: dict) -> str:
    return digest(EVAL_VERSION, fingerprint, task, json.dumps(data, sort_keys=True, default=str))


def _cache_path(key: str) -> Path:
    return subdir("eval") / f"{key}.json"


def read_cached(key: str) -> dict | None:
    path = _cache_path(key)
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def json_safe(value):
    """NaN -> None and numpy scalars -> Python, so files are strict JSON."""
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    if isinstance(value, (np.floating, float)):
        value = float(value)
        return None if math.isnan(value) else value
    if isinstance(value, np.integer):
        return int(value)
    return value


def store_result(key: str, result: dict, run_dir: Path | None) -> None:
    write_text_atomic(_cache_path(key), json.dumps(result))
    if run_dir is not None:
        store_with_run(run_dir, key, result)


def store_with_run(run_dir: str | Path, key: str, result: dict) -> None:
    """Add one result to ``<run>/.eval.json`` (``{"results": {key: result}}``), atomically.

    A file lock serialises writers (the page and the command line may evaluate the same
    run at once), and the rename keeps readers from ever seeing half a file.
    """
    path = Path(run_dir) / RUN_EVAL_FILE
    with FileLock(str(Path(run_dir) / f"{RUN_EVAL_FILE}.lock"), timeout=30):
        stored = read_run_evaluations(run_dir, keyed=True)
        stored[key] = result
        write_text_atomic(path, json.dumps({"version": EVAL_VERSION, "results": stored}, indent=1))


def read_run_evaluations(run_dir: str | Path, keyed: bool = False):
    """Results stored with a run (for the Train page and the run list).

    Returns
    -------
    list of dict, or dict ``key -> result`` with ``keyed``
        Empty when the run has not been evaluated (or the file is damaged).
    """
    path = Path(run_dir) / RUN_EVAL_FILE
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        results = dict(data.get("results", {}))
    except (OSError, ValueError, AttributeError):
        results = {}
    return results if keyed else list(results.values())
