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
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from bioviz.errors import BiovizError, ModelError, SplitError
from bioviz.ontology import LevelSpec
from bioviz.ontology.splits import SPLIT_PARTS, UNUSED
from bioviz.paths import subdir, write_text_atomic
from bioviz.text_clean import is_invisible

logger = logging.getLogger(__name__)

RUN_FILE = "run.json"
SPLIT_FILE = "split.json"  # the names of each split part, written by trainer.runs
# The name the user gave the run: one line of UTF-8 text in a file of its own, so that naming
# a run never rewrites run.json (the trainer's record) and never changes the run's weights'
# fingerprint (bioviz.models.model_files leaves it out of the hash).
NAME_FILE = "name.txt"
NAME_MAX = 80  # characters of a run name: room for a readable phrase, short enough for a legend
# Job ids as the job queue makes them (20261122-192803-ecd5): the last part tells runs apart
_JOB_ID = re.compile(r"^\d{8}-\d{6}-(?P<short>[0-9a-z]{2,8})$")
# Readable names of the bundled sources (other sources are named by their file)
SOURCE_NAMES = {"icd10": "ICD-10", "icd10cm": "ICD-10-CM", "hpo": "HPO"}
# run.json config "kind" of a pretrained base model published by a pretrain job (trainer.jobs.pretrain_job)
PRETRAIN_KIND = "pretrain"
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
    """What the views need to know about a run without loading it.

    A run whose ``run.json`` cannot be read (not JSON, not UTF-8, not an object, a config
    that is not an object) is *damaged*: ``damaged`` says why in one line, ``config`` and
    ``metrics`` are empty, and it is never offered as a model (:func:`list_runs`).
    """

    path: Path
    run_id: str
    config: dict
    metrics: dict
    created: str | None = None  # ISO time written by the trainer (absent in older runs)
    modified: float | None = None  # mtime of run.json when it was read (None: unknown)
    damaged: str | None = None  # why run.json cannot be used; None for a sound run
    user_name: str | None = None  # the name the user gave the run (NAME_FILE); None: the default name

    @property
    def default_name(self) -> str:
        """The name built from the run's config (:func:`default_run_name`)."""
        return default_run_name(self.config)

    @property
    def name(self) -> str:
        """The run's readable name: the user's (:func:`set_run_name`), else :attr:`default_name`."""
        return self.user_name or self.default_name

    @property
    def short_id(self) -> str:
        """The part of the run id that tells runs apart (``ecd5`` of ``20261122-192803-ecd5``; else the id)."""
        return short_run_id(self.run_id)

    @property
    def label(self) -> str:
        """``name (short id)`` for pickers, legends, tables and titles; ``run-id (damaged: why)``.

        The short id keeps two runs of the same name apart (tables are keyed by label).
        """
        if self.damaged:
            return f"{self.run_id} (damaged: {self.damaged})"
        return f"{self.name} ({self.short_id})"


def _kind(value) -> str:
    """``a list``, ``null``, ``a string`` ... for one-line reasons."""
    if value is None:
        return "null"
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean"}.get(type(value), "a number")


def _parse_run(path: Path) -> RunInfo:
    """``run.json`` of ``path`` as a RunInfo; raises ValueError (the one-line reason) when it cannot serve."""
    file = path / RUN_FILE
    raw = file.read_bytes()
    modified = file.stat().st_mtime
    try:
        data = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise ValueError(f"{RUN_FILE} is not UTF-8 text") from None
    except ValueError as error:
        raise ValueError(f"{RUN_FILE} is not valid JSON ({str(error).splitlines()[0]})") from None
    if not isinstance(data, dict):
        raise ValueError(f"{RUN_FILE} holds {_kind(data)}, not an object")
    for key in ("config", "metrics"):
        if key in data and not isinstance(data[key], dict):
            raise ValueError(f"the {key} in {RUN_FILE} is {_kind(data[key])}, not an object")
    run_id = data.get("run_id")
    created = data.get("created")
    return RunInfo(path, run_id if isinstance(run_id, str) and run_id.strip() else path.name,
                   data.get("config", {}), data.get("metrics", {}), created if isinstance(created, str) else None,
                   modified, user_name=read_run_name(path))


def read_run(path: str | Path) -> RunInfo:
    """Read ``run.json`` of a run directory.

    Raises
    ------
    ModelError
        One line naming the run and what is wrong: no ``run.json`` (not a run, or deleted),
        or a damaged one (not UTF-8, not JSON, not an object, a config that is not an object).
    """
    path = Path(path)
    try:
        return _parse_run(path)
    except FileNotFoundError:
        raise ModelError(f"{path} is not a trained run (no {RUN_FILE})") from None
    except OSError as error:
        raise ModelError(f"run {path.name} cannot be read: {error.strerror or error}") from None
    except ValueError as error:
        raise ModelError(f"run {path.name} is damaged: {error}; delete it or train it again") from None


def run_mtime(path: str | Path) -> float | None:
    """Modification time of a run's ``run.json``, or None when it is gone (a run deleted meanwhile).

    Pages key their caches on it, so a run trained again under the same path is read afresh.
    """
    try:
        return (Path(path) / RUN_FILE).stat().st_mtime
    except OSError:
        return None


def _listed(child: Path) -> RunInfo | None:
    """The RunInfo of one directory under the runs folder; a damaged one marked as such; None if not a run."""
    try:
        if not child.is_dir() or not is_run_dir(child):
            return None
        return _parse_run(child)
    except FileNotFoundError:  # deleted between listing the folder and reading it
        return None
    except (OSError, ValueError) as error:
        reason = str(error) if isinstance(error, ValueError) else f"{RUN_FILE} cannot be read ({error.strerror})"
        return RunInfo(child, child.name, {}, {}, None, run_mtime(child), reason)


def list_runs(base: str | Path | None = None, include_damaged: bool = False) -> list[RunInfo]:
    """Complete runs under ``base`` (default ``BIOVIZ_HOME/runs``), newest first.

    Never fails over one run: a run deleted while the folder is read is left out, and a
    damaged one (see :class:`RunInfo`) is left out with a logged warning, or listed with its
    ``damaged`` reason when ``include_damaged`` (for the run list, which shows it).

    Parameters
    ----------
    base : path-like, optional
        Folder of run directories.
    include_damaged : bool
        Also return damaged runs (``RunInfo.damaged`` set). Pickers of models leave it off.
    """
    base = Path(base) if base else runs_dir()
    try:
        children = list(base.iterdir()) if base.is_dir() else []
    except OSError as error:
        logger.warning("cannot list runs in %s: %s", base, error.strerror or error)
        children = []
    runs = []
    for child in children:
        run = _listed(child)
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


def short_run_id(run_id: str) -> str:
    """The part of a run id that tells runs apart: the random tail of a job id, else the whole id.

    >>> short_run_id("20261122-192803-ecd5"), short_run_id("my-run")
    ('ecd5', 'my-run')
    """
    match = _JOB_ID.match(run_id)
    return match.group("short") if match else run_id


def _source_name(source) -> str:
    """``HPO``, ``ICD-10``, ``ICD-10-CM``; a file source by its stem (``mini`` for ``/data/mini.obo``)."""
    text = str(source or "?").strip()
    if text in SOURCE_NAMES:
        return SOURCE_NAMES[text]
    path = Path(text)
    if path.name in ("META", "") and path.parent.name:  # a UMLS release: META under its release folder
        return f"UMLS {path.parent.name}"
    return path.stem or text


def pairs_text(count) -> str:
    """``20k``, ``1.5k``, ``640``; ``all`` when no cap (None).

    >>> pairs_text(20000), pairs_text(1500), pairs_text(640), pairs_text(None)
    ('20k', '1.5k', '640', 'all')
    """
    if not isinstance(count, int) or isinstance(count, bool):
        return "all"
    return f"{count / 1000:.3g}k" if count >= 1000 else str(count)


def pretrained_run_name(config: dict) -> str:
    """The name of a pretrained base model (``python -m trainer pretrain`` as a job): base, objectives, pairs.

    The pairs are those it trained on (``train_pairs``) once known, else the cap asked for.

    >>> pretrained_run_name({"kind": "pretrain", "base": "minilm", "objectives": ["synonyms", "hierarchy"],
    ...                      "max_pairs": 20000})
    'pretrained minilm: synonyms+hierarchy, 20k pairs'
    """
    base = str(config.get("base") or "?")
    base = Path(base).name if "/" in base and Path(base).is_absolute() else base
    objectives = config.get("objectives") if isinstance(config.get("objectives"), list) else []
    pairs = config.get("train_pairs", config.get("max_pairs"))
    return f"pretrained {base}: {'+'.join(map(str, objectives)) or '?'}, {pairs_text(pairs)} pairs"


def default_run_name(config: dict) -> str:
    """A readable name from what a run trained: encoder, level, shots.

    >>> default_run_name({"encoder": "residual", "source": "hpo", "depth": 1, "shots": 15})
    'residual · HPO d1 · 15-shot'
    >>> default_run_name({"encoder": "hierarchical", "finetune": True, "source": "/data/mini.obo",
    ...                   "root": "X:1", "depth": 2, "shots": None, "init": "/runs/a"})
    'hierarchical fine-tuned (continued) · mini under X:1 d2 · all names'
    >>> default_run_name({})
    'run · ? · ?'
    """
    config = config if isinstance(config, dict) else {}
    if config.get("kind") == PRETRAIN_KIND:
        return pretrained_run_name(config)
    encoder = str(config.get("encoder") or "run")
    if config.get("finetune") is True:
        encoder += " fine-tuned"
    if config.get("init"):
        encoder += " (continued)"
    if "source" in config:
        root = config.get("root")
        under = f" under {root}" if isinstance(root, str) and root else ""
        depth = config.get("depth")
        cut = "synonym sets" if config.get("synonyms") is True else f"d{depth}" if isinstance(depth, int) else "?"
        level = f"{_source_name(config['source'])}{under} {cut}"
    else:
        level = "?"
    shots = config.get("shots", "?")
    shots = "all names" if "shots" in config and shots is None else \
        f"{shots}-shot" if isinstance(shots, int) and not isinstance(shots, bool) else "?"
    return f"{encoder} · {level} · {shots}"


def distinct_labels(runs) -> dict[Path, str]:
    """``path -> label`` for a list of runs, with the whole run id where two labels would be equal.

    Two runs of the same name whose short ids happen to be equal (the random part of a job
    id has four hex digits) would share a label, and a picker keyed by label would lose one.

    Parameters
    ----------
    runs : iterable of RunInfo
    """
    runs = list(runs)
    seen: dict[str, int] = {}
    for run in runs:
        seen[run.label] = seen.get(run.label, 0) + 1
    return {run.path: run.label if seen[run.label] == 1 or run.damaged else f"{run.name} ({run.run_id})"
            for run in runs}


def check_run_name(name: str) -> str:
    """``name`` stripped, if it can name a run; the one-line reason otherwise.

    A name is one line of at most :data:`NAME_MAX` characters without control or format
    characters (which could hide text or break a table, a legend or LaTeX).

    Raises
    ------
    BiovizError
        Not text, empty, too long, several lines, or a control character.
    """
    if not isinstance(name, str):
        raise BiovizError(f"a run name is text, not {type(name).__name__}")
    text = name.strip()
    if not text:
        raise BiovizError("a run name cannot be empty (clear it to go back to the default name)")
    bad = next((ch for ch in text if is_invisible(ch)), None)
    if bad is not None:
        what = "several lines" if bad in "\n\r\u2028\u2029\x0b\x0c\x85" else f"the control character {bad!r}"
        raise BiovizError(f"a run name is one line of plain text: this one has {what}")
    if len(text) > NAME_MAX:
        raise BiovizError(f"a run name has at most {NAME_MAX} characters (this one has {len(text)})")
    return text


def read_run_name(path: str | Path) -> str | None:
    """The name the user gave run ``path``; None when it has none, or the file cannot serve as one.

    A name file edited by hand into something that is not a valid name is ignored with a
    warning (the run keeps its default name): a listing never fails over it.
    """
    file = Path(path) / NAME_FILE
    try:
        text = file.read_bytes().decode("utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as error:
        logger.warning("ignoring the name of run %s: %s", Path(path).name, error)
        return None
    try:
        return check_run_name(text)
    except BiovizError as error:
        logger.warning("ignoring the name of run %s: %s", Path(path).name, error)
        return None


def set_run_name(path: str | Path, name: str | None) -> RunInfo:
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
    RunInfo
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
    label: str | None = None  # the run's readable label (RunInfo.label); the id when None

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
    trained_on = _mapping(run.config.get("view"))
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
    split = _mapping(run.config.get("split"))
    zero_shot = split.get("zero_shot_classes")
    return RunSplit(run.run_id, parts, split.get("shots", run.config.get("shots")), split.get("seed"),
                    len(zero_shot) if isinstance(zero_shot, list) else 0, run.label)


def _mapping(value) -> dict:
    """``value`` when it is a dict, else empty (a field of run.json that is not an object)."""
    return value if isinstance(value, dict) else {}


def model_labels(models) -> list[str]:
    """Readable labels of MODEL strings, for table headers, legends and CSV columns.

    A run is named by its label (:attr:`RunInfo.label`: its readable name and short id, the
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
    runs: dict[int, RunInfo] = {}
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


MAX_CHAIN = 8  # runs trained on runs: deeper chains are not made, and a loop must end


def input_chain(model: str | Path) -> list[str]:
    """The models ``model`` was trained from, nearest first (empty for a preset, a hub id or a damaged run).

    A run's config names its input model as ``input_model`` (a head run), ``init`` (a run
    continued from another) or ``base``; a run trained on a run is followed through it.
    """
    chain: list[str] = []
    spec = str(model)
    for _ in range(MAX_CHAIN):
        if not is_run_dir(spec):
            break
        try:
            config = read_run(spec).config
        except (OSError, BiovizError) as error:
            logger.info("cannot follow %s to its input model: %s", spec, error)
            break
        nxt = next((config[k] for k in ("input_model", "init", "base") if isinstance(config.get(k), str)), None)
        if not nxt or nxt == spec or nxt in chain:
            break
        chain.append(nxt)
        spec = nxt
    return chain


def _same_model(a: str, b: str) -> bool:
    """Whether two MODEL strings name one model (a path compared resolved, a name as written)."""
    if a == b:
        return True
    pa, pb = Path(a).expanduser(), Path(b).expanduser()
    return pa.exists() and pb.exists() and pa.resolve() == pb.resolve()


def trained_from(trained: str | Path | None, base: str | Path | None) -> bool:
    """True when ``trained`` is a run whose input model chain reaches ``base``.

    What training moved is only meaningful between a run and a model it was trained from:
    between two unrelated models (minilm vs char-tfidf) nothing was trained.
    """
    if not trained or not base:
        return False
    return any(_same_model(step, str(base)) for step in input_chain(trained))
