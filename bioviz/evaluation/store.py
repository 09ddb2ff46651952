"""Evaluation results on disk: the result cache and the results stored with a trained run.

Results are cached per (model fingerprint, task, data) under ``BIOVIZ_HOME/eval`` and, for a
trained run, also stored with the run in ``<run>/.eval.json`` (atomic writes; a file lock
serialises writers) so the Train page and the run list can show them. Both can be computed
again: a damaged file is set aside and a write the disk refuses is skipped, with a warning
(:mod:`bioviz.cache_files`).
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
from pathlib import Path

import numpy as np
from filelock import FileLock

from bioviz.cache_files import read_cache, write_cache
from bioviz.ontology import Split
from bioviz.ontology.levels import LevelView
from bioviz.paths import home

logger = logging.getLogger(__name__)

# Bump when a metric's definition or a protocol changes: old cached results stop matching.
EVAL_VERSION = 1
# Results stored with a run. A dot-file, because the embedding cache keys a run's vectors by a
# hash of its files minus dot-files (bioviz.models.model_files): storing results must not change it.
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
    # the folder is created by the first write (bioviz.cache_files), which a full disk may refuse
    return home() / "eval" / f"{key}.json"


def is_result(value) -> bool:
    """True for a result dict that the tables can show: ``model`` and ``task`` names, ``metrics``
    (and ``ci``, ``sizes`` when present) objects."""
    return (isinstance(value, dict) and isinstance(value.get("model"), str) and isinstance(value.get("task"), str)
            and isinstance(value.get("metrics"), dict)
            and all(isinstance(value.get(part, {}), dict) for part in ("ci", "sizes", "data")))


def _read_result(path: Path) -> dict:
    result = json.loads(path.read_text(encoding="utf-8"))
    if not is_result(result):
        raise ValueError("not a result object")
    return result


def read_cached(key: str) -> dict | None:
    """The cached result of ``key``, or None (never computed, or damaged: then set aside)."""
    return read_cache(_cache_path(key), _read_result)


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
    """Cache a result, and store it with its run; a disk that refuses either is logged, not raised."""
    text = json.dumps(result).encode("utf-8")
    write_cache(_cache_path(key), lambda handle: handle.write(text))
    if run_dir is not None:
        store_with_run(run_dir, key, result)


def store_with_run(run_dir: str | Path, key: str, result: dict) -> bool:
    """Add one result to ``<run>/.eval.json`` (``{"results": {key: result}}``), atomically.

    A file lock serialises writers (the page and the command line may evaluate the same
    run at once), and the rename keeps readers from ever seeing half a file. Results can
    always be computed again, so a disk that refuses the write (or a run deleted meanwhile)
    only skips storing it, with a warning.

    Returns
    -------
    bool
        True when the result was stored.
    """
    path = Path(run_dir) / RUN_EVAL_FILE
    try:
        with FileLock(str(Path(run_dir) / f"{RUN_EVAL_FILE}.lock"), timeout=30):
            stored = read_run_evaluations(run_dir, keyed=True)
            stored[key] = result
            text = json.dumps({"version": EVAL_VERSION, "results": stored}, indent=1).encode("utf-8")
            return write_cache(path, lambda handle: handle.write(text))
    except OSError as error:  # the lock file itself: a full disk, a read-only or deleted run
        logger.warning("evaluation not stored with run %s: %s", run_dir, error.strerror or error)
        return False


def _read_run_file(path: Path) -> dict:
    data = json.loads(path.read_text(encoding="utf-8"))
    results = data.get("results", {}) if isinstance(data, dict) else None
    if not isinstance(results, dict):
        raise ValueError(f"{RUN_EVAL_FILE} holds no results object")
    # single results of another form are skipped, not the whole file
    return {str(k): v for k, v in results.items() if isinstance(v, dict)}


def read_run_evaluations(run_dir: str | Path, keyed: bool = False):
    """Results stored with a run (for the Train page and the run list).

    A damaged ``.eval.json`` is set aside (``.eval.json.corrupt-<time>``) with a warning, so
    the next stored result starts a sound file without losing the damaged one.

    Returns
    -------
    list of dict, or dict ``key -> result`` with ``keyed``
        Empty when the run has not been evaluated (or the file is damaged).
    """
    results = read_cache(Path(run_dir) / RUN_EVAL_FILE, _read_run_file) or {}
    return results if keyed else list(results.values())
