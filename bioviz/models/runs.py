"""Reading trained runs: directories with a ``run.json`` under ``BIOVIZ_HOME/runs``.

The trainer writes runs; the library only reads them, so a run directory can be used as
a MODEL everywhere (embed, neighbours, eval, views). A run directory is complete only when
``run.json`` exists: the trainer writes into a temporary directory and renames at the end.
The Train page's run list (one line per run, with what is stored with it) is
:mod:`bioviz.evaluation.run_list`.
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from bioviz.errors import ModelError, SplitError
from bioviz.models.run_record import (  # noqa: F401 - re-exported: the names runs.py has always offered
    LEVEL_KEYS, NAME_FILE, NAME_MAX, PRETRAIN_KIND, RUN_FILE, SOURCE_NAMES, RunRecord, check_run_name,
    default_run_name, is_run_dir, pairs_text, pretrained_run_name, read_run_name, run_mtime, short_run_id,
)
from bioviz.models.blob_store import sweep_blobs
from bioviz.models.run_partials import sweep_partials
from bioviz.ontology import LevelSpec
from bioviz.ontology.splits import SPLIT_PARTS, UNUSED
from bioviz.paths import subdir, write_text_atomic

logger = logging.getLogger(__name__)

SPLIT_FILE = "split.json"  # the names of each split part, written by trainer.runs
# A run as listed and read: the one typed record of its run.json (the name RunInfo is kept for importers)
RunInfo = RunRecord


def runs_dir() -> Path:
    """``BIOVIZ_HOME/runs`` (created if missing)."""
    return subdir("runs")


def read_run(path: str | Path) -> RunRecord:
    """Read ``run.json`` of a run directory (:meth:`RunRecord.read`).

    Raises
    ------
    ModelError
        One line naming the run and what is wrong: no ``run.json`` (not a run, or deleted),
        or a damaged one (not UTF-8, not JSON, not an object, a config that is not an object).
    """
    return RunRecord.read(path)


def list_runs(base: str | Path | None = None, include_damaged: bool = False) -> list[RunRecord]:
    """Complete runs under ``base`` (default ``BIOVIZ_HOME/runs``), newest first.

    Never fails over one run: a run deleted while the folder is read is left out, and a
    damaged one (see :class:`RunRecord`) is left out with a logged warning, or listed with its
    ``damaged`` reason when ``include_damaged`` (for the run list, which shows it). The
    temporary export folders that killed trainers left here are removed on the way
    (:func:`~bioviz.models.run_partials.sweep_partials`: never one whose writer still runs).

    Parameters
    ----------
    base : path-like, optional
        Folder of run directories.
    include_damaged : bool
        Also return damaged runs (``RunRecord.damaged`` set). Pickers of models leave it off.
    """
    from_home = not base
    base = Path(base) if base else runs_dir()
    # Every page lists the runs: the place a killed direct `trainer train --out` is noticed (no job tidies it).
    sweep_partials(base)
    if from_home:
        sweep_blobs()  # the stored weights only deleted runs linked (a run removed with rm -r, a deleted job's)
    try:
        children = list(base.iterdir()) if base.is_dir() else []
    except OSError as error:
        logger.warning("cannot list runs in %s: %s", base, error.strerror or error)
        children = []
    runs = []
    inside = os.path.realpath(base)
    for child in children:
        if child.name.startswith("."):
            continue  # never a run: an export not yet renamed into place (it may hold run.json), a discarded run
        if os.path.dirname(os.path.realpath(child)) != inside:
            # A link to a folder elsewhere: the server's path policy refuses it as a model (docs/security.md),
            # so a picker must not offer it first.
            logger.warning("skipping %s: it links to a folder outside %s", child, base)
            continue
        run = RunRecord.listed(child)
        if run is None:
            continue
        if run.damaged and not include_damaged:
            logger.warning("skipping damaged run %s: %s", child, run.damaged)
            continue
        runs.append(run)
    return sorted(runs, key=lambda r: r.modified or 0.0, reverse=True)


# ---------------------------------------------------------------------------- labels


def shots_text(shots) -> str:
    """``15 shots`` (``1 shot``), or ``all names`` when a split took every name (``shots`` None).

    >>> shots_text(15), shots_text(1), shots_text(None)
    ('15 shots', '1 shot', 'all names')
    """
    return "all names" if shots is None else f"{shots} shot{'' if shots == 1 else 's'}"


def level_label(config: dict) -> str:
    """The level a run's (or a job's) config trains on, as :attr:`LevelSpec.label` words it.

    >>> level_label({"source": "/data/hp.obo", "root": "HP:0000118", "depth": 2})
    'hp.obo under HP:0000118 d2'
    >>> level_label({"source": "hpo", "depth": "deep"})  # a config that names no readable level
    '?'
    """
    try:
        return LevelSpec.from_config(config).label
    except (TypeError, ValueError, OverflowError):  # OverflowError: a depth of Infinity
        return "?"


# ---------------------------------------------------------------------------- names


def distinct_labels(runs) -> dict[Path, str]:
    """``path -> label`` for a list of runs, with the whole run id where two labels would be equal.

    Two runs of the same name whose short ids happen to be equal (the random part of a job
    id has four hex digits) would share a label, and a picker keyed by label would lose one.

    Parameters
    ----------
    runs : iterable of RunRecord
    """
    runs = list(runs)
    seen: dict[str, int] = {}
    for run in runs:
        seen[run.label] = seen.get(run.label, 0) + 1
    return {run.path: run.label if seen[run.label] == 1 or run.damaged else f"{run.name} ({run.run_id})"
            for run in runs}


def set_run_name(path: str | Path, name: str | None) -> RunRecord:
    """Give run ``path`` a readable name, or go back to its default name (``None`` or blank).

    The name goes into its own small file (:data:`NAME_FILE`), written atomically: ``run.json``
    is never rewritten, and the run's fingerprint (cached vectors, stored results) is unchanged.

    Parameters
    ----------
    path : path-like
        A run directory.
    name : str or None
        One line (see :func:`check_run_name`); ``None`` or blank clears the name.

    Returns
    -------
    RunRecord
        The run as read again, with its new name.

    Raises
    ------
    BiovizError
        An invalid name; ModelError for a path that is not a sound run, or a name that
        cannot be written (the old name, if any, is kept).
    """
    path = Path(path)
    run = read_run(path)
    file = path / NAME_FILE
    try:
        if name is None or (isinstance(name, str) and not name.strip()):
            file.unlink(missing_ok=True)
        else:
            write_text_atomic(file, check_run_name(name) + "\n")
    except OSError as error:
        raise ModelError(f"cannot name run {run.run_id}: {error.strerror or error}") from None
    return read_run(path)


def read_split_names(path: str | Path) -> dict[str, list[str]] | None:
    """``part -> names`` from a run's ``split.json`` (keys as in :data:`SPLIT_PARTS`); None if absent or unreadable."""
    try:
        data = json.loads((Path(path) / SPLIT_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict):
        return None
    return {part: [str(n) for n in data[part]] if isinstance(data.get(part), list) else [] for part in SPLIT_PARTS}


@dataclass(frozen=True)
class RunSplit:
    """The split a run was trained with, as a part label per row of a level view."""

    run_id: str
    parts: np.ndarray
    shots: int | None
    seed: int | None
    zero_shot_classes: int
    label: str | None = None  # the run's readable label (RunRecord.label); the id when None

    def describe(self) -> str:
        """``<run label>'s own split (15 shots, seed 0, 2 zero-shot classes)`` for captions."""
        seed = "" if self.seed is None else f", seed {self.seed}"
        return (f"{self.label or self.run_id}'s own split ({shots_text(self.shots)}{seed}, "
                f"{self.zero_shot_classes} zero-shot classes)")


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
    except ModelError as error:  # a damaged run.json, or a run deleted meanwhile
        raise SplitError(str(error)) from None
    names = read_split_names(path)
    if names is None:
        raise SplitError(f"{run.run_id} has no {SPLIT_FILE}")
    if not run.settings.trained_on(view.stats()):
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
    split = run.split
    return RunSplit(run.run_id, parts, split.shots, split.seed, split.zero_shot_count, run.label)


def model_labels(models) -> list[str]:
    """Readable labels of MODEL strings, for table headers, legends and CSV columns.

    A run is named by its label (:attr:`RunRecord.label`: its readable name and short id, the
    whole id where two runs' labels would be equal, :func:`distinct_labels`), never by its
    path; a model directory by its folder's name (no server path is shown); anything else
    (``minilm``, a hub id) as given. The same label twice (a model compared with itself)
    becomes ``label (A)`` and ``label (B)``.

    Parameters
    ----------
    models : sequence of str or ModelSpec
        MODEL texts, or :class:`~bioviz.models.model_spec.ModelSpec` values (read by their text).

    Examples
    --------
    >>> model_labels(["minilm", "minilm"])
    ['minilm (A)', 'minilm (B)']
    """
    models = [getattr(model, "spec", model) for model in models]  # a ModelSpec: model_spec imports this module
    runs: dict[int, RunRecord] = {}
    for i, model in enumerate(models):
        if is_run_dir(model):
            try:
                runs[i] = read_run(model)
            except ModelError:  # a damaged run: its folder's name, as any directory
                pass
    by_path = distinct_labels(runs.values())
    labels = []
    for i, model in enumerate(models):
        if i in runs:
            labels.append(by_path[runs[i].path])
        else:
            path = Path(str(model)).expanduser()
            labels.append(path.resolve().name if path.is_dir() else str(model))
    if len(set(labels)) < len(labels):
        labels = [f"{label} ({chr(ord('A') + i)})" for i, label in enumerate(labels)]
    return labels
