"""Hard negatives from siblings: the closest wrong answer for a synonym or IS-A pair.

In-batch negatives drawn at random are mostly easy (a cardiac name against a skin one).
A sibling in the IS-A graph is the wrong answer a model confuses most, and it is wrong in
the direction HiPrBERT's ordered categories (§3.3) put it: a sibling is further than a
synonym, a parent's sibling further than the parent.

``synonyms`` (anchor, positive: two names of concept ``c``)
    negative: the preferred name of a sibling of ``c`` (a concept sharing a parent with it).
``hierarchy`` (anchor ``c``, positive: its parent ``p``)
    negative: the preferred name of a sibling of ``p`` that is neither ``c`` nor one of
    ``c``'s ancestors (with several parents, a sibling of one parent may be another parent
    or a grandparent of ``c``: not a negative).

A candidate is never the anchor's concept, never a concept sharing a (normalised) name with
it, never a text of the pair itself, and never a name the caller forbids (the held-out
names of excluded levels and the validation texts: a negative is training data too). The
choice is seeded per pair, so it does not depend on the order or the number of the pairs.
``definitions`` pairs get none (a sibling's definition would be a third long text per row,
the costly part of pretraining on a CPU).
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Callable

import networkx as nx

from bioviz.ontology.model import Ontology, normalise_name
from trainer.pretrain.pairs import Pair

HARD_NEGATIVES = ("none", "siblings", "mined")  # mined: trainer.pretrain.mining
NEGATIVE_OBJECTIVES = ("synonyms", "hierarchy")

Allowed = Callable[[str, str, str], bool]  # (negative text, its concept id, source) -> may it be trained on


def siblings(ontology: Ontology, concept_id: str) -> list[str]:
    """Concepts that share a parent with ``concept_id`` (itself excluded), sorted.

    A synthetic root counts as a parent here: the chapters under it are each other's
    closest wrong answers, although the root's name says nothing as a positive.
    """
    graph = ontology.graph
    if concept_id not in graph:
        return []
    found = {s for p in graph.predecessors(concept_id) for s in graph.successors(p)}
    found.discard(concept_id)
    return sorted(c for c in found if c in ontology.concepts)


def _names(ontology: Ontology, concept_id: str) -> set[str]:
    return {normalise_name(n) for n in ontology.concepts[concept_id].names}


def negative_for(pair: Pair, ontology: Ontology, seed: int = 0, allowed: Allowed | None = None) -> Pair:
    """``pair`` with a sibling hard negative, or unchanged when it has none (or is not eligible).

    Parameters
    ----------
    pair : Pair
        A pair extracted from ``ontology``.
    ontology : Ontology
    seed : int
    allowed : callable, optional
        ``allowed(text, concept_id, source)``: False forbids that negative.

    Returns
    -------
    Pair
    """
    if pair.objective not in NEGATIVE_OBJECTIVES or pair.concepts[0] not in ontology.concepts:
        return pair
    anchor_concept = pair.concepts[0]
    if pair.objective == "synonyms":
        candidates = siblings(ontology, anchor_concept)
        forbidden = {anchor_concept}
    else:
        candidates = siblings(ontology, pair.concepts[1])
        forbidden = {anchor_concept, *nx.ancestors(ontology.graph, anchor_concept)}
    own = _names(ontology, anchor_concept) | {normalise_name(pair.anchor), normalise_name(pair.positive)}
    eligible = []
    for concept_id in candidates:
        text = ontology.concepts[concept_id].name
        if concept_id in forbidden or _names(ontology, concept_id) & own:
            continue
        if allowed is not None and not allowed(text, concept_id, pair.source):
            continue
        eligible.append((concept_id, text))
    if not eligible:
        return pair
    # Seeded by the pair itself (not by the source's path, which differs between machines): the
    # same pair gets the same negative whatever else is sampled, wherever it runs.
    concept_id, text = random.Random(f"{seed}:{pair.key}:{pair.concepts}").choice(eligible)
    return dataclasses.replace(pair, negative=text, negative_concept=concept_id)


def add_negatives(pairs: list[Pair], ontologies: dict[str, Ontology], *, mode: str = "siblings", seed: int = 0,
                  allowed: Allowed | None = None) -> list[Pair]:
    """Every pair with its hard negative where one exists (``mode="none"``: the pairs as given).

    Parameters
    ----------
    pairs : list of Pair
    ontologies : dict
        ``source -> Ontology`` the pairs were extracted from.
    mode : str
        ``siblings``; any other mode returns the pairs as given.
    seed : int
    allowed : callable, optional
        See :func:`negative_for`.
    """
    if mode != "siblings":  # none; mined negatives come from trainer.pretrain.mining
        return list(pairs)
    return [negative_for(p, ontologies[p.source], seed, allowed) if p.source in ontologies else p for p in pairs]
