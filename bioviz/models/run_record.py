"""One typed read of a run's ``run.json``: :class:`RunRecord`.

``run.json`` is written last by the trainer (``trainer.runs``) or by a pretrain job
(``trainer.jobs.pretrain_job``) and is the completeness marker of a run directory. This module
is the only code that reads its keys: everything else asks a :class:`RunRecord` for the run's
level, split, input model, kind and name.

What makes a run *damaged* (listed with its reason, never offered as a model): ``run.json`` not
UTF-8, not JSON, not an object, or a ``config``/``metrics`` that is not an object. Any other
field of the wrong type, or missing, reads as unknown, so that runs written by older trainers
(no ``finetune``, ``kind``, ``source_options``, ``split_seed`` or ``split``) still open; split
settings that are not numbers are refused only where a split is used (:meth:`RunRecord.split_spec`).
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType

from bioviz.errors import BiovizError, ModelError
from bioviz.ontology import DEFAULT_SPLIT, LevelSpec, SplitSpec
from bioviz.text_clean import is_invisible

logger = logging.getLogger(__name__)

RUN_FILE = "run.json"
# The name the user gave the run: one line of UTF-8 text in a file of its own, so that naming
# a run never rewrites run.json (the trainer's record) and never changes the run's weights'
# fingerprint (bioviz.models.model_files leaves it out of the hash).
NAME_FILE = "name.txt"
NAME_MAX = 80  # characters of a run name: room for a readable phrase, short enough for a legend
# run.json config "kind" of a pretrained base model published by a pretrain job (trainer.jobs.pretrain_job);
# runs of the trainer record no kind (TRAIN_KIND)
PRETRAIN_KIND = "pretrain"
TRAIN_KIND = "train"
# LevelView.stats() fields that identify the level a run was trained on
LEVEL_KEYS = ("source", "root", "depth", "mode", "classes", "names")
# The config fields naming the model a run was trained from, nearest first: a head run's
# input_model (init or base), a run continued from another (init), a base model (base).
INPUT_KEYS = ("input_model", "init", "base")
# Readable names of the bundled sources (other sources are named by their file)
SOURCE_NAMES = {"icd10": "ICD-10", "icd10cm": "ICD-10-CM", "hpo": "HPO"}
# Job ids as the job queue makes them (20261122-192803-ecd5): the last part tells runs apart
_JOB_ID = re.compile(r"^\d{8}-\d{6}-(?P<short>[0-9a-z]{2,8})$")
_SPLIT_NOT_NUMBERS = f"its split settings in {RUN_FILE} are not numbers"
_EMPTY: Mapping = MappingProxyType({})


def _text(value) -> str | None:
    """``value`` when it is non-empty text, else None."""
    return value if isinstance(value, str) and value.strip() else None


def _int(value) -> int | None:
    """``value`` when it is an integer (not a boolean), else None."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _mapping(value) -> Mapping:
    """``value`` when it is an object, else empty (a field of run.json that is not an object)."""
    return value if isinstance(value, Mapping) else _EMPTY


def _kind(value) -> str:
    """``a list``, ``null``, ``a string`` ... for one-line reasons."""
    if value is None:
        return "null"
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean"}.get(type(value), "a number")


# ---------------------------------------------------------------------------- the values


@dataclass(frozen=True)
class InputModel:
    """The model a run was trained from, as its ``run.json`` names it.

    Attributes
    ----------
    spec : str
        Its MODEL string: a head run's ``input_model``, else ``init``, else ``base``.
    fingerprint : str or None
        The input's fingerprint when the run was trained (``base_fingerprint``; head runs).
    label : str or None
        The input's readable label then (``input_label``).
    """

    spec: str
    fingerprint: str | None = None
    label: str | None = None


@dataclass(frozen=True)
class TrainedSplit:
    """The split a run was trained with, as its ``run.json`` records it.

    Attributes
    ----------
    spec : SplitSpec or None
        The settings that draw it again (the flat ``shots``, ``seed``/``split_seed``,
        ``test_per_class``, ``zero_shot_classes``); None when the run records no ``shots``
        (a pretrained base model) or its settings are not numbers (``problem``).
    shots, seed : int or None
        As drawn (``config.split``, else the flat fields): names per class (None: all names)
        and the split seed (None: not recorded).
    zero_shot_count : int
        How many classes were held out entirely.
    problem : str or None
        Why the flat settings cannot draw a split (not numbers); None when they can or are absent.
    """

    spec: SplitSpec | None = None
    shots: int | None = None
    seed: int | None = None
    zero_shot_count: int = 0
    problem: str | None = None


@dataclass(frozen=True)
class PretrainSettings:
    """What a pretrained base model (``kind: pretrain``) was trained from: base, sources, objectives, pairs."""

    base: str | None = None
    sources: tuple[str, ...] = ()
    objectives: tuple[str, ...] = ()
    pairs: int | None = None  # the pairs trained on, else the cap asked for; None: all


def _split_spec(config: Mapping) -> tuple[SplitSpec | None, str | None]:
    """The flat split fields as a SplitSpec (None without ``shots``), or the reason they cannot be one."""
    if "shots" not in config:
        return None, None
    seed, shots = config.get("split_seed"), config.get("shots")
    zero_shot = config.get("zero_shot_classes", 0) or 0
    try:
        if not (shots is None or _is_number(shots)) or not _is_number(zero_shot):
            raise TypeError("not a number")
        return SplitSpec(shots=shots, seed=int(config.get("seed", DEFAULT_SPLIT.seed) if seed is None else seed),
                         test_per_class=int(config.get("test_per_class", DEFAULT_SPLIT.test_per_class)),
                         zero_shot_classes=zero_shot), None
    except (TypeError, ValueError, OverflowError):
        return None, _SPLIT_NOT_NUMBERS


def _trained_split(config: Mapping) -> TrainedSplit:
    spec, problem = _split_spec(config)
    drawn = _mapping(config.get("split"))
    shots = drawn.get("shots", config.get("shots"))
    if shots is not None and _int(shots) is None:  # a count that is not one: the settings', if they are
        shots = _int(spec.shots) if spec is not None else None
    zero = drawn.get("zero_shot_classes")
    return TrainedSplit(spec, shots, _int(drawn.get("seed")), len(zero) if isinstance(zero, list) else 0, problem)


def _level(config: Mapping) -> LevelSpec | None:
    if "source" not in config:
        return None
    try:
        return LevelSpec.from_config(config)
    except (TypeError, ValueError, OverflowError):  # OverflowError: a depth of Infinity
        return None


def _input_model(config: Mapping) -> InputModel | None:
    spec = next((config[key] for key in INPUT_KEYS if _text(config.get(key))), None)
    if spec is None:
        return None
    fingerprint, label = config.get("base_fingerprint"), config.get("input_label")
    return InputModel(spec, fingerprint if isinstance(fingerprint, str) else None, _text(label))


def _pretraining(config: Mapping) -> PretrainSettings | None:
    if config.get("kind") != PRETRAIN_KIND:
        return None
    sources, objectives = config.get("sources"), config.get("objectives")
    return PretrainSettings(_text(config.get("base")),
                            tuple(map(str, sources)) if isinstance(sources, list) else (),
                            tuple(map(str, objectives)) if isinstance(objectives, list) else (),
                            _int(config.get("train_pairs", config.get("max_pairs"))))


@dataclass(frozen=True)
class RunSettings:
    """A flat training config (``run.json``'s ``config``, or a job's) read once into typed fields.

    Reading never fails: a field that is missing or of the wrong type is unknown (None, empty),
    as in runs written by older trainers. Build it with :meth:`parse`.
    """

    kind: str = TRAIN_KIND
    encoder: str | None = None
    fine_tuned: bool = False  # the whole transformer was trained (finetune, or definitions)
    level: LevelSpec | None = None
    shots: int | None = None  # the flat "shots": names per class, None for all names or unknown
    shots_known: bool = False  # "shots" recorded as a count or null (all names)
    seed: int | None = None  # the training seed
    init: str | None = None  # the run this one continued from
    base: str | None = None
    input: InputModel | None = None
    split: TrainedSplit = field(default_factory=TrainedSplit)
    trained_view: tuple[tuple[str, object], ...] = ()  # the LEVEL_KEYS of the level trained on
    pretraining: PretrainSettings | None = None
    default_name: str = "run · ? · ?"

    @classmethod
    def parse(cls, config: Mapping) -> RunSettings:
        """Typed fields of a flat config; never raises (see the class)."""
        config = _mapping(config)
        shots, encoder = config.get("shots"), _text(config.get("encoder"))
        view = _mapping(config.get("view"))
        return cls(kind=PRETRAIN_KIND if config.get("kind") == PRETRAIN_KIND else TRAIN_KIND, encoder=encoder,
                   fine_tuned=config.get("finetune") is True or encoder == "definitions", level=_level(config),
                   shots=_int(shots), shots_known="shots" in config and (shots is None or _int(shots) is not None),
                   seed=_int(config.get("seed")), init=_text(config.get("init")), base=_text(config.get("base")),
                   input=_input_model(config), split=_trained_split(config),
                   trained_view=tuple((key, view.get(key)) for key in LEVEL_KEYS),
                   pretraining=_pretraining(config), default_name=_default_name(config))

    def trained_on(self, stats: Mapping) -> bool:
        """Whether ``stats`` (:meth:`LevelView.stats`) is the level this run was trained on."""
        return all(stats.get(key) == value for key, value in self.trained_view)


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


def pretrained_run_name(config: Mapping) -> str:
    """The name of a pretrained base model (``python -m trainer pretrain`` as a job): base, objectives, pairs.

    The pairs are those it trained on (``train_pairs``) once known, else the cap asked for.

    >>> pretrained_run_name({"kind": "pretrain", "base": "minilm", "objectives": ["synonyms", "hierarchy"],
    ...                      "max_pairs": 20000})
    'pretrained minilm: synonyms+hierarchy, 20k pairs'
    """
    settings = _pretraining({**_mapping(config), "kind": PRETRAIN_KIND})
    base = settings.base or "?"
    base = Path(base).name if "/" in base and Path(base).is_absolute() else base
    return f"pretrained {base}: {'+'.join(settings.objectives) or '?'}, {pairs_text(settings.pairs)} pairs"


def _default_name(config: Mapping) -> str:
    if config.get("kind") == PRETRAIN_KIND:
        return pretrained_run_name(config)
    encoder = _text(config.get("encoder")) or "run"
    if config.get("finetune") is True:
        encoder += " fine-tuned"
    if _text(config.get("init")):
        encoder += " (continued)"
    if "source" in config:
        root, depth = config.get("root"), config.get("depth")
        under = f" under {root}" if isinstance(root, str) and root else ""
        cut = "synonym sets" if config.get("synonyms") is True else f"d{depth}" if isinstance(depth, int) else "?"
        level = f"{_source_name(config['source'])}{under} {cut}"
    else:
        level = "?"
    shots = config.get("shots", "?")
    shots = "all names" if "shots" in config and shots is None else \
        f"{shots}-shot" if _int(shots) is not None else "?"
    return f"{encoder} · {level} · {shots}"


def default_run_name(config: Mapping) -> str:
    """A readable name from what a run (or a job) trains: encoder, level, shots.

    >>> default_run_name({"encoder": "residual", "source": "hpo", "depth": 1, "shots": 15})
    'residual · HPO d1 · 15-shot'
    >>> default_run_name({"encoder": "hierarchical", "finetune": True, "source": "/data/mini.obo",
    ...                   "root": "X:1", "depth": 2, "shots": None, "init": "/runs/a"})
    'hierarchical fine-tuned (continued) · mini under X:1 d2 · all names'
    >>> default_run_name({})
    'run · ? · ?'
    """
    return _default_name(_mapping(config))


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


# ---------------------------------------------------------------------------- the record


def is_run_dir(path: str | Path) -> bool:
    """True when ``path`` is a complete trained run (has ``run.json``)."""
    return (Path(path) / RUN_FILE).is_file()


def run_mtime(path: str | Path) -> float | None:
    """Modification time of a run's ``run.json``, or None when it is gone (a run deleted meanwhile).

    Pages key their caches on it, so a run trained again under the same path is read afresh.
    """
    try:
        return (Path(path) / RUN_FILE).stat().st_mtime
    except OSError:
        return None


@dataclass(frozen=True)
class RunRecord:
    """A run directory's ``run.json``, read and checked once (:meth:`read`).

    A run whose ``run.json`` cannot be read (see the module) is *damaged*: :attr:`damaged` says
    why in one line, its settings are unknown, and it is never offered as a model
    (:func:`bioviz.models.runs.list_runs`). ``config`` and ``metrics`` are read-only views of
    the file's objects, for display; code asks :attr:`settings` (or the properties below).
    """

    path: Path
    run_id: str
    settings: RunSettings = field(default_factory=RunSettings)
    config: Mapping = field(default_factory=lambda: _EMPTY)
    metrics: Mapping = field(default_factory=lambda: _EMPTY)
    created: str | None = None  # ISO time written by the trainer (absent in older runs)
    modified: float | None = None  # mtime of run.json when it was read (None: unknown)
    damaged: str | None = None  # why run.json cannot be used; None for a sound run
    user_name: str | None = None  # the name the user gave the run (NAME_FILE); None: the default name

    @classmethod
    def read(cls, path: str | Path) -> RunRecord:
        """Read and check ``run.json`` of run directory ``path`` (and its user's name).

        Raises
        ------
        ModelError
            One line naming the run and what is wrong: no ``run.json`` (not a run, or deleted),
            or a damaged one (not UTF-8, not JSON, not an object, a config that is not an object).
        """
        path = Path(path)
        try:
            return _parse(path)
        except FileNotFoundError:
            raise ModelError(f"{path} is not a trained run (no {RUN_FILE})") from None
        except OSError as error:
            raise ModelError(f"run {path.name} cannot be read: {error.strerror or error}") from None
        except ValueError as error:
            raise ModelError(f"run {path.name} is damaged: {error}; delete it or train it again") from None

    @classmethod
    def listed(cls, path: Path) -> RunRecord | None:
        """The record of one directory of a listing: damaged ones marked as such, None if not (or no longer) a run."""
        try:
            if not path.is_dir() or not is_run_dir(path):
                return None
            return _parse(path)
        except FileNotFoundError:  # deleted between listing the folder and reading it
            return None
        except (OSError, ValueError) as error:
            reason = str(error) if isinstance(error, ValueError) else f"{RUN_FILE} cannot be read ({error.strerror})"
            return cls(path, path.name, modified=run_mtime(path), damaged=reason)

    @property
    def kind(self) -> str:
        """:data:`TRAIN_KIND`, or :data:`PRETRAIN_KIND` for a pretrained base model."""
        return self.settings.kind

    @property
    def input(self) -> InputModel | None:
        """The model this run was trained from; None when it names none (or is damaged)."""
        return self.settings.input

    @property
    def split(self) -> TrainedSplit:
        """The split this run was trained with."""
        return self.settings.split

    def split_spec(self) -> SplitSpec | None:
        """The split settings this run was trained with; None when it records none.

        Raises
        ------
        ModelError
            Split settings that are not numbers (the run is damaged for evaluation).
        """
        if self.split.problem:
            raise ModelError(f"run {self.path.name} is damaged: {self.split.problem}; delete it or train it again")
        return self.split.spec

    @property
    def default_name(self) -> str:
        """The name built from the run's config (:func:`default_run_name`)."""
        return self.settings.default_name

    @property
    def name(self) -> str:
        """The run's readable name: the user's (:func:`bioviz.models.runs.set_run_name`), else :attr:`default_name`."""
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


def _parse(path: Path) -> RunRecord:
    """``run.json`` of ``path`` as a RunRecord; raises ValueError (the one-line reason) when it cannot serve."""
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
    config, created = data.get("config", {}), data.get("created")
    return RunRecord(path, _text(data.get("run_id")) or path.name, RunSettings.parse(config),
                     MappingProxyType(config), MappingProxyType(data.get("metrics", {})),
                     created if isinstance(created, str) else None, modified, user_name=read_run_name(path))

