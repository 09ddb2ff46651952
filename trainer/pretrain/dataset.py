"""From SOURCE strings to the training and validation pairs of a pretraining run."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from bioviz.errors import BiovizError
from bioviz.ontology.model import normalise_name
from bioviz.ontology.sources import load_source
from trainer.pretrain.leakage import HeldOut, exclude, source_key
from trainer.pretrain.mining import mine_negatives
from trainer.pretrain.name_pool import name_pool
from trainer.pretrain.negatives import add_negatives
from trainer.pretrain.pairs import Pair, check_objectives, dedupe, extract_pairs
from trainer.pretrain.relatedness import random_pairs
from trainer.pretrain.selection import hold_out_validation, stratified_sample, validation_size


@dataclass
class PairSet:
    """The pairs a run trains and validates on, and how they were chosen.

    Attributes
    ----------
    train, validation : list of Pair
    available : dict
        ``source -> objective -> pairs`` extracted (deduplicated, before exclusion).
    excluded : dict
        ``objective -> pairs`` dropped by the leakage rule; ``levels``: each level's record.
    overlap_dropped : int
        Training pairs dropped because they share a text or concept with a validation pair.
    relatedness : list of ScoredPair
        Random name pairs of the relatedness term (:mod:`trainer.pretrain.relatedness`), their
        targets filled in when training starts; empty without ``--relatedness-weight``.
    mining : dict
        What ``--hard-negatives mined`` did (:func:`trainer.pretrain.mining.mine_negatives`); empty otherwise.
    """

    train: list[Pair]
    validation: list[Pair]
    available: dict = field(default_factory=dict)
    excluded: dict = field(default_factory=dict)
    overlap_dropped: int = 0
    relatedness: list = field(default_factory=list)
    mining: dict = field(default_factory=dict)

    def counts(self) -> dict:
        """Training pairs per objective, per source and per kind (definition vs description ...)."""
        return {"objectives": dict(Counter(p.objective for p in self.train)),
                "sources": dict(Counter(p.source for p in self.train)),
                "kinds": dict(Counter(p.kind for p in self.train)),
                "hard_negatives": dict(Counter(p.objective for p in self.train if p.negative is not None)),
                "train": len(self.train), "validation": len(self.validation),
                **({"relatedness": len(self.relatedness)} if self.relatedness else {})}


def negatives_allowed(held: list[HeldOut], validation: list[Pair]):
    """``allowed(text, concept_id, source)``: a negative is training data, so the leakage rule and the
    validation slice's texts and anchor concepts bind it as they bind the pairs."""
    banned = {normalise_name(t) for p in validation for t in (p.anchor, p.positive)}
    for h in held:
        banned |= h.names
    validation_concepts = {(p.source, p.concepts[0]) for p in validation}
    zero_shot = [(source_key(h.level.source), h.concepts) for h in held if h.concepts]

    def allowed(text: str, concept_id: str, source: str) -> bool:
        if normalise_name(text) in banned or (source, concept_id) in validation_concepts:
            return False
        return not any(key == source_key(source) and concept_id in concepts for key, concepts in zero_shot)

    return allowed


def build_pairs(sources: list[str], objectives: list[str], *, max_pairs: int | None = None, seed: int = 0,
                held: list[HeldOut] = (), validation_pairs: int = 500, hard_negatives: str = "none",
                base: str = "minilm", relatedness_pairs: int = 0) -> PairSet:
    """Extract, deduplicate, drop leaks, hold out validation, sample ``max_pairs``, add hard negatives.

    Parameters
    ----------
    sources : list of str
        SOURCE strings (bundled names, OBO paths, UMLS directories, tables).
    objectives : list of str
    max_pairs : int, optional
        Cap on training pairs, sampled per (source, objective) stratum.
    seed : int
    held : list of HeldOut
        Levels whose held-out names must stay unseen (:func:`trainer.pretrain.leakage.held_out`).
    validation_pairs : int
        Size of the validation slice (at most a tenth of the pairs).
    hard_negatives : str
        ``siblings``: each training synonym/hierarchy pair gets a sibling concept's name as a
        hard negative where one exists (:mod:`trainer.pretrain.negatives`); ``mined``: the
        nearest other concept's name by ``base`` (:mod:`trainer.pretrain.mining`); ``none``.
    base : str
        The MODEL that mines negatives (``mined`` only).
    relatedness_pairs : int
        Random name pairs for the relatedness term (:mod:`trainer.pretrain.relatedness`; their
        targets are the base's cosines, computed when training starts); 0: none.

    Raises
    ------
    BiovizError
        Unknown objective, a source that cannot be loaded, or fewer than two training pairs.
    """
    objectives = check_objectives(objectives)
    if not sources:
        raise BiovizError("no source: give --sources (icd10, icd10cm, hpo, an .obo file or a UMLS directory)")
    available, pool, ontologies = {}, [], {}
    for source in dict.fromkeys(sources):
        ontologies[source] = load_source(source)
        extracted = extract_pairs(ontologies[source], source, objectives, seed)
        available[source] = {k: len(v) for k, v in extracted.items()}
        pool += [p for pairs in extracted.values() for p in pairs]
    pool = dedupe(pool)  # the same pair from two sources counts once
    pool, dropped = exclude(pool, list(held))
    train, validation, overlap = hold_out_validation(pool, validation_size(len(pool), validation_pairs), seed)
    train = stratified_sample(train, max_pairs, seed)
    allowed = negatives_allowed(list(held), validation)
    # The pool of every allowed name: only mined negatives and the relatedness term read it.
    pool = name_pool(ontologies, allowed) if hard_negatives == "mined" or relatedness_pairs else []
    mining = {}
    if hard_negatives == "mined":
        train, mining = mine_negatives(train, ontologies, pool, base=base)
    elif hard_negatives != "none":
        train = add_negatives(train, ontologies, mode=hard_negatives, seed=seed, allowed=allowed)
    related = random_pairs(pool, relatedness_pairs, seed) if relatedness_pairs else []
    if len(train) < 2:
        raise BiovizError(f"only {len(train)} training pairs from {', '.join(sources)} for "
                          f"{', '.join(objectives)}: nothing to pretrain on")
    excluded = {"pairs": dropped, "total": sum(dropped.values()),
                "levels": [h.record() for h in held if isinstance(h, HeldOut)],
                "names": [h.record() for h in held if not isinstance(h, HeldOut)]}
    return PairSet(train, validation, available, excluded, overlap, relatedness=related, mining=mining)
