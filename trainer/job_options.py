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

# What each encoder type does, one sentence each (the papers in docs/training.md): the form's help.
ENCODER_SUMMARIES = {
    "residual": "A small network on top of the base model's vectors, half its own output and half the input "
                "(f(u) = (enc(u) + u) / 2), trained with a triplet loss on a few names per class "
                "(few-shot biomedical names).",
    "dan": "A deep averaging network f(u) = enc(u) that pulls the names of a class together while staying close "
           "to the base vectors (triplet, contextual and grounding losses): higher-level semantics of the classes.",
    "cca": "Projects the base vectors onto the class prototypes with CCA, then trains a DAN against those "
           "prototypes, grounding each name in its concept (conceptual grounding).",
    "hierarchical": "A head (or, with fine-tuning, the whole transformer) trained with a multi-similarity loss that "
                    "puts synonyms nearest, then siblings, parents and other classes, following the hierarchy "
                    "(HiPrBERT).",
    "definitions": "Fine-tunes the base transformer itself so that each name lies near its definition, or a "
                   "description from its IS-A parents (BioLORD); slower: the transformer is trained.",
}
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
        :meth:`bioviz.ontology.Split.sizes` plus ``classes`` (classes trained on) and
        ``short_class_names``: ``(class name, names it has)`` of each class with fewer names
        than asked for, smallest first.

    Raises
    ------
    SplitError
        When the trainer would refuse these shots (the same check it runs).
    """
    check_split_feasible(view.class_sizes(), split.shots, split.test_per_class)
    drawn = split.make(view)
    sizes = drawn.sizes()
    sizes["classes"] = len(view.classes) - sizes["zero_shot_classes"]
    name_of = dict(zip(view.classes, view.class_labels))
    sizes["short_class_names"] = sorted(((name_of.get(c, c), n) for c, n in drawn.short_classes.items()),
                                        key=lambda pair: (pair[1], pair[0]))
    return sizes

# What each pretraining objective teaches, one sentence each (docs/pretraining.md): the Train page's help.
OBJECTIVE_SUMMARIES = {
    "synonyms": "Pulls the names of one concept together (HPO synonyms, ICD-10-CM inclusion terms, UMLS atoms), "
                "as SapBERT does: names that mean the same become neighbours.",
    "definitions": "Pulls each name towards its concept's definition, or a description from its IS-A parents "
                   "(BioLORD): names land near what they mean, not near names that merely look alike.",
    "hierarchy": "Pulls each concept's names towards its parent's (HiPrBERT's closest category): kinds of a "
                 "thing gather near it, so neighbours follow the ontology's tree.",
    "distances": "Orders the tree's distances (HiPrBERT): a sibling nearer than the parent, both nearer than "
                 "unrelated terms, with the paper's multi-similarity loss.",
}
