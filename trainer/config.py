"""Training configuration: one dataclass with the papers' defaults, and its validation.

:func:`validate` refuses an impossible configuration with a one-line
:class:`~bioviz.errors.BiovizError` *before* anything is trained (the command line and the
job queue both call it), and fills the defaults that depend on the encoder type. It reads
nothing but the config; the checks that need models or data live in :mod:`trainer.data`.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from bioviz.errors import BiovizError
from bioviz.ontology.level_spec import LevelSpec
from bioviz.ontology.splits import DEFAULT_SHOTS, DEFAULT_SPLIT_SEED, SplitSpec
from trainer.base_mix import BASE_WEIGHTS
from trainer.devices import DEVICES
from trainer.options import option, options

ENCODERS = ("residual", "dan", "cca", "hierarchical", "definitions")
STOP_ON = ("auto", "loss", "mAP")
HEADS = ("residual", "dan", "cca", "hierarchical")  # the types that train a head over base vectors

# Per-encoder defaults from the papers: batch size, learning rate, max epochs, stopping criterion,
# and the contextual weight: the DAN's gamma (higher-level §3, alpha = beta = gamma = 1); the
# grounding paper's CCA+DAN has no contextual objective, so 0 where a type leaves it out.
_DEFAULTS = {
    "residual": {"batch_size": 16, "lr": 1e-3, "epochs": 100, "stop_on": "loss"},  # fewshot §3.2
    "dan": {"batch_size": 64, "lr": 1e-3, "epochs": 100, "stop_on": "mAP", "context_weight": 1.0},  # higher-level §5.2
    "cca": {"batch_size": 64, "lr": 1e-3, "epochs": 100, "stop_on": "mAP"},  # grounding §5.3
    "hierarchical": {"batch_size": 64, "lr": 1e-3, "epochs": 100, "stop_on": "mAP"},  # HiPrBERT §3.5 head
    "definitions": {"batch_size": 64, "lr": 2e-5, "epochs": 1, "stop_on": "mAP"},  # BioLORD §3.2, App. A
}


# The split fields both configs declare (a training run's split; a pretraining's excluded levels').
_SPLIT_OPTIONS = {
    "shots": {"default": DEFAULT_SHOTS, "help": "training (and validation) names per class; all = all names",
              "min": 1, "none": "all", "label": "Shots per class"},
    "test_per_class": {"default": 1, "help": "held-out test names per class", "min": 0,
                       "label": "Test names per class"},
    "zero_shot_classes": {"default": 0, "help": "classes held out entirely (count, or fraction when < 1)", "min": 0,
                          "label": "Zero-shot classes"},
    "split_seed": {"default": None, "help": "seed of the few-shot split (None: same as seed)", "min": 0,
                   "label": "Split seed"},
}


def split_option(name: str, **changes):
    """A fresh :func:`~trainer.options.option` for split field ``name`` (``shots``, ``test_per_class``,
    ``zero_shot_classes``, ``split_seed``), with ``changes`` (another help or default)."""
    return option(**{**_SPLIT_OPTIONS[name], **changes})


class SplitFields:
    """The :class:`~bioviz.ontology.splits.SplitSpec` of a config declaring the split fields."""

    @property
    def split(self) -> SplitSpec:
        """The split drawn: ``shots``, ``test_per_class``, ``zero_shot_classes`` and the split seed
        (``split_seed``, or ``seed`` when that is None)."""
        seed = self.seed if self.split_seed is None else self.split_seed
        return SplitSpec(shots=self.shots, seed=seed, test_per_class=self.test_per_class,
                         zero_shot_classes=self.zero_shot_classes)


@dataclass
class TrainConfig(SplitFields):
    """Everything needed to reproduce a training run.

    ``None`` fields take the encoder type's default in :func:`validate`. The level is kept
    as flat fields (``source`` ... ``source_options``), the form of ``run.json`` and of a
    job's ``config.json`` since the first runs; :attr:`level` is the same as a
    :class:`~bioviz.ontology.LevelSpec`, and :attr:`split` the split it draws.
    """

    source: str = option(help="SOURCE: icd10, icd10cm, hpo, or a path (.obo, UMLS META dir, .tsv/.csv)")
    depth: int = option(1, "levels below the root whose concepts are the classes", max=64, label="Depth")
    root: str | None = option(None, "root concept id (None: the source's default root)", label="Root concept")
    synonyms: bool = option(False, "synonym-set mode: every concept is its own class (depth ignored)",
                            label="Synonym sets")
    keep_ambiguous: bool = option(False, "keep names found under several classes", label="Keep ambiguous names")
    shots: int | None = split_option("shots")
    test_per_class: int = split_option("test_per_class")
    zero_shot_classes: float = split_option("zero_shot_classes")
    encoder: str = option("residual", "residual | dan | cca | hierarchical | definitions", choices=ENCODERS)
    base: str = option("minilm", "MODEL whose vectors are the input (a run directory works too)")
    init: str | None = option(None, "continual learning: train on the outputs of this earlier run")
    seed: int = option(DEFAULT_SPLIT_SEED, "seed of weights, sampling and dropout", min=0, max=2**32 - 1,
                       label="Random seed")
    split_seed: int | None = split_option("split_seed")
    # The upper bounds of these ranges (issue 32): far above any run the papers or this app make, below
    # what would hold a slot for ever or ask for more memory than a server has (a 50-million-wide head).
    epochs: int | None = option(None, "maximum epochs (100 for heads, 1 for definitions)", min=1, max=10_000,
                                per_encoder=True, label="Maximum epochs")
    hidden: int = option(9600, "hidden layer width (fewshot §3.3 tunes 9,600)", min=1, max=65_536,
                         label="Hidden layer width")
    lr: float | None = option(None, "learning rate (Adam 1e-3; AdamW 2e-5 for fine-tuning)", min=0,
                              min_exclusive=True, max=1, per_encoder=True, label="Learning rate")
    batch_size: int | None = option(None, "16 residual, 64 dan/cca/hierarchical/definitions", min=2,
                                    max=8192, per_encoder=True, label="Batch size")
    margin: float = option(0.1, "triplet margin", min=0, max=10, label="Triplet margin")
    triplet_weight: float = option(1.0, "weight of the triplet loss (alpha in higher-level §3)",
                                   encoders=("residual", "dan", "cca"), min=0, label="Triplet loss weight (α)")
    grounding_weight: float = option(1.0, "weight of the grounding loss (beta in higher-level §3)",
                                     encoders=("residual", "dan", "cca"), min=0, label="Grounding loss weight (β)")
    context_weight: float | None = option(None, "weight of the contextual loss d(f(n), u_n) (gamma; dan 1, cca 0)",
                                          encoders=("dan", "cca"), min=0, per_encoder=True,
                                          label="Contextual loss weight (γ)")
    dropout: float = option(0.5, "dropout on the hidden layer", min=0, max=1, max_exclusive=True, label="Dropout")
    identity_start: bool = option(False, "start the head at f(u) = u, not random (hidden >= 2 x dim)",
                                  encoders=HEADS, label="Start at the identity f(u) = u")
    base_weight: float | None = option(None, "BaseMix: weight w of the input u in the output (1 - w) f(u) / s + w u, "
                                       "which keeps the base model's order between classes; auto: chosen on "
                                       "validation", encoders=HEADS, min=0, max=1,
                                       offered=BASE_WEIGHTS, none="auto", label="Base weight w")
    min_retention: float = option(0.9, "auto base_weight keeps at least this validation retention of the base's "
                                  "cross-class order", encoders=HEADS, min=0, max=1, label="Minimum retention")
    synonym_dropout: float = option(0.5, "names left out of each prototype mean", encoders=("cca",), min=0, max=1,
                                    max_exclusive=True, label="Synonym dropout")
    patience: int = option(10, "epochs without validation improvement before stopping", min=1, max=10_000,
                           label="Early-stopping patience (epochs)")
    stop_on: str = option("auto", "early-stopping criterion: loss (few-shot) or mAP (level training)",
                          choices=STOP_ON, per_encoder=True, label="Early-stopping criterion")
    finetune: bool = option(False, "fine-tune the base transformer (AdamW 2e-5) instead of a head",
                            encoders=("hierarchical",), label="Fine-tune the transformer")
    ms_alpha: float = option(2.0, "multi-similarity alpha", encoders=("hierarchical",), label="Multi-similarity α")
    ms_beta: float = option(2.0, "multi-similarity beta", encoders=("hierarchical",), label="Multi-similarity β")
    ms_lambda: float = option(0.5, "multi-similarity lambda", encoders=("hierarchical",), label="Multi-similarity λ")
    weight_decay: float = option(0.01, "AdamW weight decay (BioLORD App. A)", encoders=("definitions",), min=0,
                                 label="Weight decay")
    warmup_ratio: float = option(0.05, "linear warm-up share of the steps", encoders=("definitions",), min=0, max=1,
                                 label="Warm-up share of steps")
    definition_scope: str = option("train", 'pairs from "train" names or "all" names but val/test',
                                   encoders=("definitions",), choices=("train", "all"), label="Definition pairs from")
    max_pairs: int = option(20000, "cap on (name, definition) pairs", encoders=("definitions",), min=1,
                            label="Maximum definition pairs")
    device: str = option("auto", "auto (CUDA when present) | cpu | cuda", choices=DEVICES)
    source_options: dict = option(help="loader options (UMLS sab, semantic_group, hierarchy)", default_factory=dict)

    def to_dict(self) -> dict:
        """Plain dict for run.json and a job's config.json."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, values: Mapping) -> "TrainConfig":
        """A config from a dict of its fields (a config.json, a job request).

        Raises
        ------
        BiovizError
            With unknown fields (named) or without a source.
        """
        unknown = sorted(set(values) - {f.name for f in dataclasses.fields(cls)})
        if unknown:
            raise BiovizError(f"unknown training option(s): {', '.join(unknown)}")
        if not values.get("source"):
            raise BiovizError("a training config needs a source (--source or \"source\" in --config)")
        return cls(**values)

    @property
    def level(self) -> LevelSpec:
        """The level trained on (from the flat ``source``, ``root``, ``depth`` ... fields)."""
        return LevelSpec.from_config(self.to_dict())

    @property
    def input_model(self) -> str:
        """The MODEL whose vectors the encoder reads: the ``init`` run if given, else ``base``."""
        return self.init or self.base


def read_config(path: str | Path) -> dict:
    """The JSON object of training options in ``path`` (a job's ``config.json``).

    Raises
    ------
    BiovizError
        If the file is missing or does not hold a JSON object.
    """
    try:
        values = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as error:
        raise BiovizError(f"cannot read config file {path}: {error.strerror or error}") from None
    except ValueError as error:
        raise BiovizError(f"config file {path} is not JSON: {error}") from None
    if not isinstance(values, dict):
        raise BiovizError(f"config file {path} must hold a JSON object of training options")
    return values


# Every field's description (help, encoder types, bounds, choices), by name.
OPTIONS = {o.name: o for o in options(TrainConfig)}


def _check_combinations(c: TrainConfig) -> None:
    """Settings that contradict each other or the encoder type (the ranges are checked per field)."""
    checks = [
        (c.synonyms or c.depth >= 1, f"depth must be at least 1 (got {c.depth})"),
        (c.context_weight == 0 or c.encoder in ("dan", "cca"),
         f"a contextual loss applies to dan and cca only (got context_weight {c.context_weight} for {c.encoder})"),
        (not c.identity_start or (c.encoder != "definitions" and not c.finetune),
         "identity_start applies to trained heads (not to fine-tuning)"),
        (not c.base_weight or (c.encoder != "definitions" and not c.finetune),
         "base_weight applies to trained heads (not to fine-tuning)"),
        (c.init is None or (c.encoder != "definitions" and not c.finetune),
         "--init continues a head-based run; fine-tuning trains a base model (pass the run as --base instead)"),
    ]
    for ok, message in checks:
        if not ok:
            raise BiovizError(message)


def paper_defaults(encoder: str, finetune: bool = False) -> dict:
    """The papers' defaults of the fields marked ``per_encoder`` (batch size, lr, epochs, ...)."""
    defaults = {"context_weight": 0.0, **_DEFAULTS[encoder]}
    if encoder == "hierarchical" and finetune:
        defaults.update(lr=2e-5, epochs=5)  # HiPrBERT §4.1: AdamW 2e-5, linear schedule
    return defaults


def validate(config: TrainConfig) -> TrainConfig:
    """Fill encoder defaults and refuse impossible settings before any training.

    Pure: reads nothing but ``config``. What needs the machine or the data (models, CUDA,
    the level's classes) is :func:`trainer.data.check_feasible`.

    Parameters
    ----------
    config : TrainConfig

    Returns
    -------
    TrainConfig
        A copy with every ``None`` default resolved.

    Raises
    ------
    BiovizError
        With a one-line reason (unknown encoder, bad numbers, settings that contradict the
        encoder type).
    """
    if problem := OPTIONS["encoder"].problem(config.encoder):
        raise BiovizError(problem)
    if config.finetune and config.encoder != "hierarchical":
        raise BiovizError("finetune applies to the hierarchical encoder (definitions always fine-tunes)")
    defaults = paper_defaults(config.encoder, config.finetune)
    # None means "the encoder type's default"; any other value (0 included) is checked as given.
    filled = {name: value for name, value in defaults.items() if getattr(config, name) is None}
    if config.stop_on == "auto":
        filled["stop_on"] = defaults["stop_on"]
    c = dataclasses.replace(config, **filled, source_options=dict(config.source_options or {}))
    for opt in OPTIONS.values():  # types, bounds and choices, from the field metadata
        if problem := opt.problem(getattr(c, opt.name)):
            raise BiovizError(problem)
    _check_combinations(c)
    return c
