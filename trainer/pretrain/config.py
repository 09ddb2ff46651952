"""The settings of a pretraining run, their defaults and their validation."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path

from bioviz.errors import BiovizError
from bioviz.ontology.splits import DEFAULT_SHOTS, DEFAULT_SPLIT_SEED
from trainer.pretrain.negatives import HARD_NEGATIVES
from trainer.pretrain.pairs import check_objectives

LOSSES = ("mnrl", "cached")
CONFIG_FILE = "pretrain-config.json"  # in the output directory while training (read back by --resume)


@dataclass
class PretrainConfig:
    """Everything that reproduces a pretraining run.

    Defaults follow BioLORD §3.2 and App. A (InfoNCE over in-batch negatives, batches of 64,
    one epoch, AdamW 2e-5 with a linear warm-up); ``loss="cached"`` is GradCache's
    CachedMultipleNegativesRankingLoss, for batches larger than memory allows.
    """

    sources: list[str]
    objectives: list[str]
    base: str = "minilm"
    max_pairs: int | None = 20000
    validation_pairs: int = 500
    epochs: int = 1
    batch_size: int = 64
    lr: float = 2e-5
    weight_decay: float = 0.01
    warmup_ratio: float = 0.05
    seed: int = 0
    loss: str = "mnrl"
    mini_batch_size: int = 32
    save_steps: int = 500
    max_seq_length: int | None = None  # tokens per text while training (None: the base's); long definitions cost most
    device: str = "auto"
    exclude_levels: list[str] = field(default_factory=list)
    split_seed: int = DEFAULT_SPLIT_SEED
    shots: int | None = DEFAULT_SHOTS
    test_per_class: int = 1
    zero_shot_classes: float = 0
    hard_negatives: str = "none"  # "siblings": a sibling's name as a third column (trainer.pretrain.negatives)
    # Train on pairs prepared elsewhere (trainer.pretrain.pairs_file); sources and objectives then
    # choose a part of the file (empty: all of it).
    pairs_file: str | None = None
    exclude_names: str | None = None  # a file of names kept out of every pair (trainer.pretrain.leakage.held_out_names)

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


def validate(c: PretrainConfig) -> PretrainConfig:
    """Refuse impossible settings with one line before anything is loaded.

    Raises
    ------
    BiovizError
    """
    if c.pairs_file:
        return _validate_with_pairs_file(c)
    c.objectives = check_objectives(c.objectives)
    return _check_settings(c, [
        (bool(c.sources), "no source: give --sources (icd10, icd10cm, hpo, an .obo file or a UMLS directory)"),
    ])


def _validate_with_pairs_file(c: PretrainConfig) -> PretrainConfig:
    # The pair file was built with its own exclusions and negatives: adding either needs the
    # ontologies, which a machine training on a pair file need not have.
    c.objectives = check_objectives(c.objectives) if c.objectives else []
    c.sources = list(c.sources or [])
    return _check_settings(c, [
        (not c.exclude_levels and not c.exclude_names, "--exclude-level/--exclude-names do not apply to --pairs: the pair file's own exclusions do "
                               "(give it to the --save-pairs run)"),
        (c.hard_negatives == "none", "--hard-negatives does not apply to --pairs: give it to the --save-pairs run"),
    ])


def _check_settings(c: PretrainConfig, checks: list) -> PretrainConfig:
    checks = [
        *checks,
        (c.max_pairs is None or c.max_pairs >= 2, f"--max-pairs must be at least 2 (got {c.max_pairs})"),
        (c.batch_size >= 2, f"--batch-size must be at least 2: in-batch negatives need a batch (got {c.batch_size})"),
        (c.epochs >= 1, f"--epochs must be at least 1 (got {c.epochs})"),
        (c.lr > 0, f"--lr must be positive (got {c.lr})"),
        (c.loss in LOSSES, f"unknown loss {c.loss!r}: use {' or '.join(LOSSES)}"),
        (c.save_steps >= 1, f"--save-steps must be at least 1 (got {c.save_steps})"),
        (c.validation_pairs >= 0, f"--validation-pairs must be at least 0 (got {c.validation_pairs})"),
        (c.max_seq_length is None or c.max_seq_length >= 8,
         f"--max-seq-length must be at least 8 tokens (got {c.max_seq_length})"),
        (c.device in ("auto", "cpu", "cuda"), f"unknown device {c.device!r}: use auto, cpu or cuda"),
        (c.hard_negatives in HARD_NEGATIVES,
         f"unknown --hard-negatives {c.hard_negatives!r}: use {' or '.join(HARD_NEGATIVES)}"),
    ]
    for ok, message in checks:
        if not ok:
            raise BiovizError(message)
    return c
