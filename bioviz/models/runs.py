"""Reading trained runs: directories with a ``run.json`` under ``BIOVIZ_HOME/runs``.

The trainer writes runs; the library only reads them, so a run directory can be used as
a MODEL everywhere (embed, neighbours, eval, views). A run directory is complete only when
``run.json`` exists: the trainer writes into a temporary directory and renames at the end.
The Train page's run list (one line per run, with what is stored with it) is
:mod:`bioviz.evaluation.run_list`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from bioviz.errors import SplitError
from bioviz.ontology import LevelSpec
from bioviz.ontology.splits import SPLIT_PARTS, UNUSED
from bioviz.paths import subdir

RUN_FILE = "run.json"
SPLIT_FILE = "split.json"  # the names of each split part, written by trainer.runs
# LevelView.stats() fields that identify the level a run was trained on
LEVEL_KEYS = ("source", "root", "depth", "mode", "classes", "names")


def runs_dir() -> Path:
    """``BIOVIZ_HOME/runs`` (created if missing)."""
    return subdir("runs")


def is_run_dir(path: str | Path) -> bool:
    """True when ``path`` is a complete trained run (has ``run.json``)."""
    return (Path(path) / RUN_FILE).is_file()


@dataclass(frozen=True)
class RunInfo:
    """What the views need to know about a run without loading it."""

    path: Path
    run_id: str
    config: dict
    metrics: dict
    created: str | None = None  # ISO time written by the trainer (absent in older runs)

    @property
    def label(self) -> str:
        """``run-id (encoder on source depth k)`` for pickers and titles."""
        c = self.config
        what = f"{c.get('encoder', '?')} on {c.get('source', '?')}"
        if c.get("depth"):
            what += f" d{c['depth']}"
        return f"{self.run_id} ({what})"


def read_run(path: str | Path) -> RunInfo:
    """Read ``run.json`` of a run directory."""
    path = Path(path)
    data = json.loads((path / RUN_FILE).read_text(encoding="utf-8"))
    return RunInfo(path, data.get("run_id", path.name), data.get("config", {}), data.get("metrics", {}),
                   data.get("created"))


def list_runs(base: str | Path | None = None) -> list[RunInfo]:
    """Complete runs under ``base`` (default ``BIOVIZ_HOME/runs``), newest first."""
    base = Path(base) if base else runs_dir()
    runs = []
    for child in base.iterdir() if base.is_dir() else []:
        if child.is_dir() and is_run_dir(child):
            try:
                runs.append(read_run(child))
            except (OSError, ValueError):
                continue  # a damaged run.json: skip rather than break every picker
    return sorted(runs, key=lambda r: r.path.stat().st_mtime, reverse=True)


# ---------------------------------------------------------------------------- labels


def shots_text(shots) -> str:
    """``15 shots``, or ``all names`` when a split took every name (``shots`` None).

    >>> shots_text(15), shots_text(None)
    ('15 shots', 'all names')
    """
    return "all names" if shots is None else f"{shots} shots"


def level_label(config: dict) -> str:
    """The level a run's (or a job's) config trains on, as :attr:`LevelSpec.label` words it.

    >>> level_label({"source": "/data/hp.obo", "root": "HP:0000118", "depth": 2})
    'hp.obo under HP:0000118 d2'
    """
    return LevelSpec.from_config(config).label


def read_split_names(path: str | Path) -> dict[str, list[str]] | None:
    """``part -> names`` from a run's ``split.json`` (keys as in :data:`SPLIT_PARTS`); None if absent or unreadable."""
    try:
        data = json.loads((Path(path) / SPLIT_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict):
        return None
    return {part: [str(n) for n in data.get(part) or []] for part in SPLIT_PARTS}


@dataclass(frozen=True)
class RunSplit:
    """The split a run was trained with, as a part label per row of a level view."""

    run_id: str
    parts: np.ndarray
    shots: int | None
    seed: int | None
    zero_shot_classes: int

    def describe(self) -> str:
        """``<run>'s own split (15 shots, seed 0, 2 zero-shot classes)`` for captions."""
        seed = "" if self.seed is None else f", seed {self.seed}"
        return f"{self.run_id}'s own split ({shots_text(self.shots)}{seed}, {self.zero_shot_classes} zero-shot classes)"


def run_split(path: str | Path, view) -> RunSplit:
    """The split run ``path`` was trained with, mapped onto the rows of ``view``.

    Parts are matched by name (``split.json`` stores names, not rows, so the result does
    not depend on how the view's rows are ordered).

    Parameters
    ----------
    path : path-like
        A run directory.
    view : LevelView
        The level shown; it must be the level the run was trained on.

    Returns
    -------
    RunSplit

    Raises
    ------
    SplitError
        With the reason when the run's split cannot mark this view: not a run, no
        ``split.json``, trained on another level, or names of its split missing here.
    """
    if not is_run_dir(path):
        raise SplitError(f"{path} is not a trained run")
    try:
        run = read_run(path)
    except (OSError, ValueError):  # a damaged run.json, as list_runs tolerates it
        raise SplitError(f"{path}: unreadable {RUN_FILE}") from None
    names = read_split_names(path)
    if names is None:
        raise SplitError(f"{run.run_id} has no {SPLIT_FILE}")
    trained_on = run.config.get("view") or {}
    here = view.stats()
    if any(trained_on.get(key) != here[key] for key in LEVEL_KEYS):
        raise SplitError(f"{run.run_id} was trained on another level")
    rows_of: dict[str, list[int]] = {}
    for row, name in enumerate(view.names):
        rows_of.setdefault(name, []).append(row)
    parts = np.full(len(view.names), UNUSED, dtype=object)
    for key, label in SPLIT_PARTS.items():
        for name in names[key]:
            if name not in rows_of:
                raise SplitError(f"{run.run_id}'s split has names this level lacks (e.g. {name!r})")
            parts[rows_of[name]] = label
    split = run.config.get("split") or {}
    return RunSplit(run.run_id, parts, split.get("shots", run.config.get("shots")), split.get("seed"),
                    len(split.get("zero_shot_classes") or []))
