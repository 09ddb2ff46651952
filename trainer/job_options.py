"""What a training form needs to know: each option's default, the papers' per-encoder
defaults, one line of help, and the size of the training set a setting gives.

The help lines are the comments of :class:`trainer.config.TrainConfig` (one per field), so
the page, the command line and the config never disagree.
"""

from __future__ import annotations

import dataclasses
import inspect
import re
from functools import lru_cache

from bioviz.ontology.levels import LevelView
from bioviz.ontology.splits import SplitSpec
from trainer.config import ENCODERS, TrainConfig, validate
from trainer.data import check_split_feasible

# Fields the job system or the shared selection sets, not the hyperparameter form.
SELECTION_FIELDS = ("source", "root", "depth", "synonyms", "keep_ambiguous", "source_options")
MODEL_FIELDS = ("encoder", "base", "init")
# Settings whose default depends on the encoder type (filled by trainer.config.validate).
ENCODER_DEPENDENT = ("epochs", "lr", "batch_size", "stop_on", "context_weight")

_FIELD_COMMENT = re.compile(r"^\s+(\w+)\s*:[^#]*#\s*(.+?)\s*$")


@lru_cache(maxsize=1)
def field_help() -> dict[str, str]:
    """``field -> one-line help`` from the comments in ``TrainConfig``'s source."""
    return {m.group(1): m.group(2) for line in inspect.getsource(TrainConfig).splitlines()
            if (m := _FIELD_COMMENT.match(line))}


@lru_cache(maxsize=len(ENCODERS))
def encoder_defaults(encoder: str) -> dict:
    """The papers' defaults for ``encoder``: every field of a resolved config (no data loaded)."""
    config = validate(TrainConfig(source="icd10", encoder=encoder))
    return dataclasses.asdict(config)


def hyperparameters() -> list[dict]:
    """The tunable fields, in declaration order: name, default, type, help, and for fields with
    a fixed set of values their ``choices`` (with ``none``, the word for None, e.g. ``auto``).

    Selection fields (source, level), model choice (encoder, base, init) and the device are
    left to the caller's own widgets.
    """
    skip = set(SELECTION_FIELDS) | set(MODEL_FIELDS) | {"device"}
    helps = field_help()
    out = []
    for f in dataclasses.fields(TrainConfig):
        if f.name in skip:
            continue
        default = None if f.default is dataclasses.MISSING else f.default
        out.append({"name": f.name, "default": default, "type": str(f.type), "help": helps.get(f.name, ""),
                    "per_encoder": f.name in ENCODER_DEPENDENT, "choices": f.metadata.get("choices"),
                    "none": f.metadata.get("none")})
    return out


def applies_to(option: dict, encoder: str) -> bool:
    """Whether a hyperparameter from :func:`hyperparameters` concerns ``encoder``.

    Settings of some encoder types only say so in their help: ``"cca: ..."`` or
    ``"dan/cca: ..."``; the rest apply to all.
    """
    first = option["help"].split(" ")[0]
    if not first.endswith(":"):
        return True
    return encoder in first[:-1].split("/")


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
