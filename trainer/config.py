"""Training configuration: one dataclass with the papers' defaults, and its validation.

:func:`validate` refuses an impossible configuration with a one-line
:class:`~bioviz.errors.BiovizError` *before* anything is trained (the command line and the
job queue both call it), and fills the defaults that depend on the encoder type. It reads
nothing but the config; the checks that need models or data live in :mod:`trainer.data`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from bioviz.errors import BiovizError
from bioviz.ontology.level_spec import LevelSpec
from bioviz.ontology.splits import DEFAULT_SHOTS, DEFAULT_SPLIT_SEED, SplitSpec
from trainer.base_mix import BASE_WEIGHTS

ENCODERS = ("residual", "dan", "cca", "hierarchical", "definitions")
STOP_ON = ("auto", "loss", "mAP")
DEVICES = ("auto", "cpu", "cuda")

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


@dataclass
class TrainConfig:
    """Everything needed to reproduce a training run.

    ``None`` fields take the encoder type's default in :func:`validate`. The level is kept
    as flat fields (``source`` ... ``source_options``), the form of ``run.json`` and of a
    job's ``config.json`` since the first runs; :attr:`level` is the same as a
    :class:`~bioviz.ontology.LevelSpec`, and :attr:`split` the split it draws.
    """

    source: str  # SOURCE: icd10, icd10cm, hpo, or a path (.obo, UMLS META dir, .tsv/.csv)
    depth: int = 1  # levels below the root whose concepts are the classes
    root: str | None = None  # root concept id (None: the source's default root)
    synonyms: bool = False  # synonym-set mode: every concept is its own class (depth ignored)
    keep_ambiguous: bool = False  # keep names found under several classes
    shots: int | None = DEFAULT_SHOTS  # training (and validation) names per class; None = all names
    test_per_class: int = 1  # held-out test names per class
    zero_shot_classes: float = 0  # classes held out entirely (count, or fraction when < 1)
    encoder: str = "residual"  # residual | dan | cca | hierarchical | definitions
    base: str = "minilm"  # MODEL whose vectors are the input (a run directory works too)
    init: str | None = None  # continual learning: train on the outputs of this earlier run
    seed: int = DEFAULT_SPLIT_SEED  # seed of weights, sampling and dropout
    split_seed: int | None = None  # seed of the few-shot split (None: same as seed)
    epochs: int | None = None  # maximum epochs (100 for heads, 1 for definitions)
    hidden: int = 9600  # hidden layer width (fewshot §3.3 tunes 9,600)
    lr: float | None = None  # learning rate (Adam 1e-3; AdamW 2e-5 for fine-tuning)
    batch_size: int | None = None  # 16 residual, 64 dan/cca/hierarchical/definitions
    margin: float = 0.1  # triplet margin
    triplet_weight: float = 1.0  # residual/dan/cca: weight of the triplet loss (alpha in higher-level §3)
    grounding_weight: float = 1.0  # residual/dan/cca: weight of the grounding loss (beta in higher-level §3)
    context_weight: float | None = None  # dan/cca: weight of the contextual loss d(f(n), u_n) (gamma; dan 1, cca 0)
    dropout: float = 0.5  # dropout on the hidden layer
    identity_start: bool = False  # residual/dan/cca/hierarchical: start the head at f(u) = u, not random (hidden >= 2 x dim)
    base_weight: float | None = field(default=None, metadata={"choices": BASE_WEIGHTS, "none": "auto"})  # residual/dan/cca/hierarchical: weight w of the input u in the output (1 - w) f(u) / s + w u; auto: chosen on validation
    min_retention: float = 0.85  # residual/dan/cca/hierarchical: auto base_weight keeps at least this validation retention of the base's cross-class order
    synonym_dropout: float = 0.5  # cca: names left out of each prototype mean
    patience: int = 10  # epochs without validation improvement before stopping
    stop_on: str = field(default="auto", metadata={"choices": STOP_ON})  # early-stopping criterion: loss (few-shot) or mAP (level training)
    finetune: bool = False  # hierarchical: fine-tune the base transformer (AdamW 2e-5) instead of a head
    ms_alpha: float = 2.0  # hierarchical: multi-similarity alpha
    ms_beta: float = 2.0  # hierarchical: multi-similarity beta
    ms_lambda: float = 0.5  # hierarchical: multi-similarity lambda
    weight_decay: float = 0.01  # definitions: AdamW weight decay (BioLORD App. A)
    warmup_ratio: float = 0.05  # definitions: linear warm-up share of the steps
    definition_scope: str = field(default="train", metadata={"choices": ("train", "all")})  # definitions: pairs from "train" names or "all" names but val/test
    max_pairs: int = 20000  # definitions: cap on (name, definition) pairs
    device: str = "auto"  # auto (CUDA when present) | cpu | cuda
    source_options: dict = field(default_factory=dict)  # loader options (UMLS sab, semantic_group, hierarchy)

    def to_dict(self) -> dict:
        """Plain dict for run.json."""
        return dataclasses.asdict(self)

    @property
    def level(self) -> LevelSpec:
        """The level trained on (from the flat ``source``, ``root``, ``depth`` ... fields)."""
        return LevelSpec.from_config(self.to_dict())

    @property
    def split(self) -> SplitSpec:
        """The split drawn: ``shots``, ``test_per_class``, ``zero_shot_classes`` and the split seed
        (``split_seed``, or ``seed`` when that is None)."""
        seed = self.seed if self.split_seed is None else self.split_seed
        return SplitSpec(shots=self.shots, seed=seed, test_per_class=self.test_per_class,
                         zero_shot_classes=self.zero_shot_classes)

    @property
    def input_model(self) -> str:
        """The MODEL whose vectors the encoder reads: the ``init`` run if given, else ``base``."""
        return self.init or self.base


def _check_numbers(c: TrainConfig) -> None:
    if c.encoder not in ENCODERS:
        raise BiovizError(f"unknown encoder {c.encoder!r}: choose one of {', '.join(ENCODERS)}")
    if c.stop_on not in STOP_ON:
        raise BiovizError(f"unknown stopping criterion {c.stop_on!r}: choose one of {', '.join(STOP_ON)}")
    if c.device not in DEVICES:
        raise BiovizError(f"unknown device {c.device!r}: choose one of {', '.join(DEVICES)}")
    if c.definition_scope not in ("train", "all"):
        raise BiovizError(f"definition_scope must be train or all (got {c.definition_scope!r})")
    checks = [
        (c.shots is None or c.shots >= 1, f"shots must be at least 1 (got {c.shots})"),
        (c.synonyms or c.depth >= 1, f"depth must be at least 1 (got {c.depth})"),
        (c.epochs >= 1, f"epochs must be at least 1 (got {c.epochs})"),
        (c.hidden >= 1, f"hidden must be at least 1 (got {c.hidden})"),
        (c.lr > 0, f"learning rate must be positive (got {c.lr})"),
        (c.batch_size >= 2, f"batch size must be at least 2 (got {c.batch_size})"),
        (c.margin >= 0, f"margin must be >= 0 (got {c.margin})"),
        (min(c.triplet_weight, c.grounding_weight, c.context_weight) >= 0,
         "loss weights must be >= 0 (got triplet {}, grounding {}, context {})".format(
             c.triplet_weight, c.grounding_weight, c.context_weight)),
        (c.context_weight == 0 or c.encoder in ("dan", "cca"),
         f"a contextual loss applies to dan and cca only (got context_weight {c.context_weight} for {c.encoder})"),
        (0 <= c.dropout < 1, f"dropout must be in [0, 1) (got {c.dropout})"),
        (0 <= c.synonym_dropout < 1, f"synonym dropout must be in [0, 1) (got {c.synonym_dropout})"),
        (not c.identity_start or (c.encoder != "definitions" and not c.finetune),
         "identity_start applies to trained heads (not to fine-tuning)"),
        (c.base_weight is None or (isinstance(c.base_weight, (int, float)) and not isinstance(c.base_weight, bool)
                                   and 0 <= c.base_weight <= 1),
         f"base_weight must be in [0, 1], or auto (got {c.base_weight!r})"),
        (not c.base_weight or (c.encoder != "definitions" and not c.finetune),
         "base_weight applies to trained heads (not to fine-tuning)"),
        (0 <= c.min_retention <= 1, f"min_retention must be in [0, 1] (got {c.min_retention})"),
        (c.patience >= 1, f"patience must be at least 1 (got {c.patience})"),
        (c.max_pairs >= 1, f"max_pairs must be at least 1 (got {c.max_pairs})"),
    ]
    for ok, message in checks:
        if not ok:
            raise BiovizError(message)


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
    if config.encoder not in ENCODERS:
        raise BiovizError(f"unknown encoder {config.encoder!r}: choose one of {', '.join(ENCODERS)}")
    defaults = _DEFAULTS[config.encoder]
    if config.encoder == "hierarchical" and config.finetune:
        defaults = {**defaults, "lr": 2e-5, "epochs": 5}  # HiPrBERT §4.1: AdamW 2e-5, linear schedule
    if config.finetune and config.encoder != "hierarchical":
        raise BiovizError("finetune applies to the hierarchical encoder (definitions always fine-tunes)")
    c = dataclasses.replace(
        config,
        batch_size=config.batch_size or defaults["batch_size"],
        lr=config.lr or defaults["lr"],
        epochs=config.epochs or defaults["epochs"],
        stop_on=defaults["stop_on"] if config.stop_on == "auto" else config.stop_on,
        context_weight=defaults.get("context_weight", 0.0) if config.context_weight is None else config.context_weight,
        source_options=dict(config.source_options or {}),
    )
    _check_numbers(c)
    if c.init is not None and (c.encoder == "definitions" or c.finetune):
        raise BiovizError("--init continues a head-based run; fine-tuning trains a base model "
                          "(pass the run as --base instead)")
    return c
