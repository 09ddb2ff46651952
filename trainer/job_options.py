"""What a training form needs to know: the tunable options, the papers' per-encoder defaults,
and the size of the training set a setting gives.

The options and their help come from :class:`trainer.config.TrainConfig`'s field metadata
(:mod:`trainer.options`), so the page, the command line and the config never disagree.
"""

from __future__ import annotations

import dataclasses
from functools import lru_cache

from bioviz.ontology.level_spec import LevelSpec
from bioviz.ontology.levels import LevelView
from bioviz.ontology.splits import SplitSpec
from trainer.config import ENCODERS, OPTIONS, TrainConfig, validate
from trainer.data import check_split_feasible
from trainer.options import Option

# Fields the job system or the shared selection sets, not the hyperparameter form: the level's.
SELECTION_FIELDS = tuple(LevelSpec("any").to_config())
MODEL_FIELDS = ("encoder", "base", "init")


def field_help() -> dict[str, str]:
    """``field -> one-line help`` (prefixed by the encoder types a field concerns)."""
    return {name: opt.help_text for name, opt in OPTIONS.items()}


@lru_cache(maxsize=len(ENCODERS))
def encoder_defaults(encoder: str) -> dict:
    """The papers' defaults for ``encoder``: every field of a resolved config (no data loaded)."""
    return dataclasses.asdict(validate(TrainConfig(source="icd10", encoder=encoder)))


def hyperparameters(encoder: str | None = None) -> list[Option]:
    """The tunable fields, in declaration order (those concerning ``encoder`` when given).

    Selection fields (source, level), model choice (encoder, base, init) and the device are
    left to the caller's own widgets.
    """
    skip = set(SELECTION_FIELDS) | set(MODEL_FIELDS) | {"device"}
    return [o for o in OPTIONS.values() if o.name not in skip and (encoder is None or o.applies_to(encoder))]


def estimate_sizes(view: LevelView, split: SplitSpec) -> dict:
    """Names in each part of the split a job with these settings will draw.

    Parameters
    ----------
    view : LevelView
    split : SplitSpec
        The job's split (:attr:`trainer.config.TrainConfig.split`).

    Returns
    -------
    dict
        :meth:`bioviz.ontology.Split.sizes` plus ``classes`` (classes trained on).

    Raises
    ------
    SplitError
        When the trainer would refuse these shots (the same check it runs).
    """
    check_split_feasible(view.class_sizes(), split.shots, split.test_per_class)
    sizes = split.make(view).sizes()
    sizes["classes"] = len(view.classes) - sizes["zero_shot_classes"]
    return sizes
