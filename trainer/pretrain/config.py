"""The settings of a pretraining run, their defaults and their validation.

Each field is declared once with :func:`~trainer.options.option`, as
:class:`~trainer.config.TrainConfig`'s are: ``python -m trainer pretrain``'s flags, the Train
page's *Pretrain a base model* widgets and :func:`validate`'s range checks are generated from it.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path

from bioviz.errors import BiovizError
from bioviz.ontology.splits import DEFAULT_SPLIT_SEED
from trainer.config import DEVICES, SplitFields, split_option
from trainer.options import option, options
from trainer.pretrain.negatives import HARD_NEGATIVES
from trainer.pretrain.pairs import OBJECTIVES, check_objectives

LOSSES = ("mnrl", "cached", "gist", "multisimilarity")  # trainer.pretrain.losses
CONFIG_FILE = "pretrain-config.json"  # in the output directory while training (read back by --resume)
NO_SOURCE = "no source: give --sources (icd10, icd10cm, hpo, an .obo file or a UMLS directory)"


@dataclass
class PretrainConfig(SplitFields):
    """Everything that reproduces a pretraining run.

    Defaults follow BioLORD §3.2 and App. A (InfoNCE over in-batch negatives, batches of 64,
    one epoch, AdamW 2e-5 with a linear warm-up); ``loss="cached"`` is GradCache's
    CachedMultipleNegativesRankingLoss, for batches larger than memory allows. The split
    fields are the split of the excluded levels (:attr:`split`), whose held-out names are kept out.
    """

    sources: list[str] = option(help="icd10, icd10cm, hpo, .obo files, UMLS directories or tables",
                                metavar="SOURCE", label="Sources")
    objectives: list[str] = option(help=f"any of {', '.join(OBJECTIVES)}", choices=OBJECTIVES, metavar="OBJECTIVE",
                                   label="Objectives")
    base: str = option("minilm", "MODEL to start from (sentence-transformers)", label="Base model")
    max_pairs: int | None = option(20000, "training pairs sampled per source and objective in equal shares "
                                   "(all: every pair)", min=2, none="all", label="Max pairs")
    validation_pairs: int = option(500, "held-out validation pairs", min=0, label="Validation pairs")
    epochs: int = option(1, "passes over the training pairs", min=1, max=1000, label="Epochs")
    batch_size: int = option(64, "in-batch negatives: larger batches give more of them", min=2, max=8192,
                             label="Batch size")
    lr: float = option(2e-5, "AdamW learning rate", min=0, min_exclusive=True, label="Learning rate")
    weight_decay: float = option(0.01, "AdamW weight decay (BioLORD App. A)", min=0, label="Weight decay")
    warmup_ratio: float = option(0.05, "linear warm-up share of the steps", min=0, max=1,
                                 label="Warm-up share of steps")
    seed: int = option(0, "seeds the sampling of pairs, the validation slice and training", min=0, label="Seed")
    loss: str = option("mnrl", "mnrl: MultipleNegativesRankingLoss; cached: its GradCache variant for large batches; "
                       "gist: GISTEmbedLoss guided by the frozen base (masks in-batch false negatives); "
                       "multisimilarity: the multi-similarity loss", choices=LOSSES, label="Loss")
    mini_batch_size: int = option(32, "mini-batch of the cached loss", min=1, max=8192, label="Mini-batch size")
    save_steps: int = option(500, "checkpoint every this many steps (an interrupted job resumes from the last)",
                             min=1, label="Checkpoint every (steps)")
    # Long definitions cost most: truncating them is the cheapest speed-up.
    max_seq_length: int | None = option(None, "truncate texts to this many tokens while training (none: the base's)",
                                        min=8, max=8192, label="Max tokens per text (empty: the base's)")
    device: str = option("auto", "auto (CUDA when present), cpu or cuda", choices=DEVICES)
    exclude_levels: list[str] = option(help="keep this level's validation/test/zero-shot names out of the pairs "
                                       "(repeatable)", flag="--exclude-level", repeat=True,
                                       metavar="SOURCE:ROOT:DEPTH", default_factory=list)
    split_seed: int = split_option("split_seed", default=DEFAULT_SPLIT_SEED, help="seed of the excluded levels' split")
    shots: int | None = split_option("shots", help="shots of the excluded levels' split (all: every name)",
                                     label="Shots of that split")
    test_per_class: int = split_option("test_per_class", help="test names per class of that split")
    zero_shot_classes: float = split_option("zero_shot_classes", help="zero-shot classes of that split (a fraction "
                                            "when below 1, else a count)")
    hard_negatives: str = option("none", "siblings: a sibling concept's name as a hard negative of synonym and "
                                 "hierarchy pairs (trainer.pretrain.negatives); mined: the nearest other concept's "
                                 "name by the base model among every name of the sources (trainer.pretrain.mining)",
                                 choices=HARD_NEGATIVES, metavar="none|siblings|mined", label="Hard negatives")
    # A distillation term keeping the base's relatedness between unrelated names (issue 31).
    relatedness_weight: float = option(0.0, "weight of a relatedness-keeping term: random name pairs of the "
                                       "sources with the base model's cosine as target, MSE (0: off)", min=0, max=1000,
                                       label="Relatedness weight")
    relatedness_pairs: int = option(10000, "random name pairs of the relatedness term (their share of the "
                                    "batches is their share of all rows)", min=2, max=10_000_000,
                                    label="Relatedness pairs")
    # The model whose relatedness is kept: continuing a pretrained model, the general model it
    # started from (its cosines are what held-out clinical relatedness rewarded, issue 31).
    relatedness_teacher: str | None = option(None, "MODEL whose cosines are the relatedness targets (none: the "
                                             "base)", none="none", metavar="MODEL", label="Relatedness teacher")
    # WiSE-FT (Wortsman et al. 2022): the published weights interpolated with the base's.
    interpolate: float | None = option(None, "publish (1-ALPHA)·base + ALPHA·trained (WiSE-FT weight "
                                       "interpolation; none: the trained model)", min=0, max=1, none="none",
                                       metavar="ALPHA", label="Interpolate with the base (alpha)")
    # Train on pairs prepared elsewhere (trainer.pretrain.pairs_file); sources and objectives then
    # choose a part of the file (empty: all of it).
    pairs_file: str | None = option(None, "train on a --save-pairs file (built elsewhere); --sources/--objectives "
                                    "then pick a part of it", flag="--pairs", metavar="FILE")
    exclude_names: str | None = option(None, "keep these names (UTF-8, one per line) out of every pair, e.g. a "
                                       "protocol's queries", metavar="FILE")

    def to_dict(self) -> dict:
        """Plain dict (``pretrain-config.json``, ``pretrain.json``)."""
        return dataclasses.asdict(self)

    @classmethod
    def read(cls, out: str | Path) -> "PretrainConfig":
        """The config an interrupted run in ``out`` was started with.

        Raises
        ------
        BiovizError
            ``out`` holds no interrupted pretraining run.
        """
        path = Path(out) / CONFIG_FILE
        try:
            return cls(**json.loads(path.read_text(encoding="utf-8")))
        except (OSError, ValueError, TypeError):
            raise BiovizError(f"{out} holds no interrupted pretraining run to resume") from None


# Every field's description (help, bounds, choices, flag), by name.
OPTIONS = {o.name: o for o in options(PretrainConfig)}


def validate(c: PretrainConfig) -> PretrainConfig:
    """Refuse impossible settings with one line before anything is loaded.

    Pure: ``c`` is left as it was.

    Returns
    -------
    PretrainConfig
        A copy with the objectives checked (in the order given, duplicates removed) and the
        list fields as lists.

    Raises
    ------
    BiovizError
    """
    with_file = bool(c.pairs_file)
    # With a pair file, no objective means every objective the file holds.
    objectives = check_objectives(c.objectives) if c.objectives or not with_file else []
    c = dataclasses.replace(c, objectives=objectives, sources=list(c.sources or []),
                            exclude_levels=list(c.exclude_levels or []))
    if with_file:
        # The pair file was built with its own exclusions and negatives: adding either needs the
        # ontologies, which a machine training on a pair file need not have.
        checks = [(not c.exclude_levels and not c.exclude_names, "--exclude-level/--exclude-names do not apply to "
                   "--pairs: the pair file's own exclusions do (give it to the --save-pairs run)"),
                  (c.hard_negatives == "none", "--hard-negatives does not apply to --pairs: give it to the "
                   "--save-pairs run"),
                  (not c.relatedness_weight, "--relatedness-weight needs the sources' names: not with --pairs")]
    else:
        checks = [(bool(c.sources), NO_SOURCE)]
    for ok, message in checks:
        if not ok:
            raise BiovizError(message)
    for opt in OPTIONS.values():  # types, bounds and choices, from the field metadata
        if problem := opt.problem(getattr(c, opt.name), opt.cli_flag):
            raise BiovizError(problem)
    return c
