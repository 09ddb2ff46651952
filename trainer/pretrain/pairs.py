"""Positive pairs of the pretraining objectives, built from a loaded ontology.

Four objectives, each a list of :class:`Pair` (anchor text, positive text):

``synonyms`` (SapBERT)
    Two names of one concept (``Concept.names``: HPO exact/related synonyms, ICD-10-CM
    inclusion terms, UMLS atoms), every unordered pair, at most :data:`MAX_SYNONYM_PAIRS`
    per concept (seeded sample) so that a concept with dozens of atoms does not dominate.
``definitions`` (BioLORD §3.1)
    Each name of a concept paired with its definition. A concept without a definition gets
    a generated description instead, BioLORD's template "[more generic concept] which
    [relationship] [related concept]" restricted to IS-A: ``"<parent name> which has subtype
    <child name>"`` when the concept has children, else ``"a kind of <parent name>"`` (names
    drawn at random, seeded). Top concepts (no parent) and parents that are top concepts
    (a synthetic root such as ``ICD10CM`` or HPO's ``All``) give no description.
``hierarchy`` (HiPrBERT §3.3's closest category, distance 1)
    One (child name, parent name) pair per IS-A edge, parents that are top concepts left out.
``distances`` (HiPrBERT §3.3-3.5's ordered categories)
    (name, sibling's name, parent's name) rows trained with HiPrBERT's multi-similarity loss
    (:mod:`trainer.pretrain.ordered_loss`): sibling nearer than parent, both nearer than the rest.

Every pair records the concept ids and the names it was built from, so that the leakage
rule (:mod:`trainer.pretrain.leakage`) can drop a pair by what it mentions, and so that
batches can keep two pairs of one concept apart.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from bioviz.errors import BiovizError
from bioviz.ontology.model import Ontology, normalise_name

OBJECTIVES = ("synonyms", "definitions", "hierarchy", "distances")
MAX_SYNONYM_PAIRS = 10  # per concept


@dataclass(frozen=True)
class Pair:
    """One positive pair.

    Attributes
    ----------
    anchor, positive : str
        The two texts (a name, and a name, definition, description or parent name).
    objective : str
        ``synonyms``, ``definitions`` or ``hierarchy``.
    source : str
        The SOURCE string the pair came from.
    kind : str
        ``synonym``, ``definition``, ``description`` or ``parent``.
    concepts : tuple of str
        Ids of the concepts the pair was built from (anchor's concept first).
    names : tuple of str
        Every concept name used in the pair (definitions are free text, not names).
    negative : str, optional
        A hard negative for the anchor (the name of a sibling concept,
        :mod:`trainer.pretrain.negatives`); None for a plain pair.
    negative_concept : str, optional
        The concept the negative names.
    """

    anchor: str
    positive: str
    objective: str
    source: str
    kind: str
    concepts: tuple[str, ...]
    names: tuple[str, ...]
    negative: str | None = None
    negative_concept: str | None = None

    @property
    def key(self) -> tuple[str, str, str]:
        """What makes two pairs the same: objective and both texts, normalised."""
        return self.objective, normalise_name(self.anchor), normalise_name(self.positive)


def _top_concepts(ontology: Ontology) -> set[str]:
    graph = ontology.graph
    return {c for c in graph.nodes if graph.in_degree(c) == 0}


def _parents(ontology: Ontology, concept_id: str, tops: set[str]) -> list[str]:
    """Parents that are concepts and not top concepts (a synthetic root says nothing)."""
    return sorted(p for p in ontology.graph.predecessors(concept_id) if p in ontology.concepts and p not in tops)


def synonym_pairs(ontology: Ontology, source: str, rng: random.Random) -> list[Pair]:
    """SapBERT-style (name, other name) pairs of each concept with two names or more."""
    out = []
    for concept in ontology.concepts.values():
        names = concept.names
        combos = list(itertools.combinations(names, 2))
        if len(combos) > MAX_SYNONYM_PAIRS:
            combos = rng.sample(combos, MAX_SYNONYM_PAIRS)
        out += [Pair(a, b, "synonyms", source, "synonym", (concept.id,), (a, b)) for a, b in combos]
    return out


def describe(ontology: Ontology, concept_id: str, rng: random.Random,
             tops: set[str]) -> tuple[str, tuple, tuple] | None:
    """A BioLORD-style description of a concept from its IS-A neighbours.

    Returns
    -------
    (text, concept ids, names) or None
        None when the concept has no parent below a top concept.
    """
    parents = _parents(ontology, concept_id, tops)
    if not parents:
        return None
    parent = ontology.concepts[rng.choice(parents)]
    generic = rng.choice(parent.names)
    children = sorted(c for c in ontology.graph.successors(concept_id) if c in ontology.concepts)
    if children:
        child = ontology.concepts[rng.choice(children)]
        specific = rng.choice(child.names)
        return f"{generic} which has subtype {specific}", (parent.id, child.id), (generic, specific)
    return f"a kind of {generic}", (parent.id,), (generic,)


def definition_pairs(ontology: Ontology, source: str, rng: random.Random) -> list[Pair]:
    """BioLORD (name, definition) pairs; a generated description where there is no definition."""
    tops = _top_concepts(ontology)
    out = []
    for concept in ontology.concepts.values():
        for name in concept.names:
            if concept.definition:
                out.append(Pair(name, concept.definition.strip(), "definitions", source, "definition",
                                (concept.id,), (name,)))
                continue
            described = describe(ontology, concept.id, rng, tops)
            if described is None:
                break
            text, related, used = described
            out.append(Pair(name, text, "definitions", source, "description", (concept.id, *related), (name, *used)))
    return out


def hierarchy_pairs(ontology: Ontology, source: str, rng: random.Random) -> list[Pair]:
    """(child name, parent name) for each IS-A edge below the top concepts.

    Preferred names on both sides: a synonym drawn at random could make two edges' pairs the
    same text (two children sharing a synonym), and deduplication would silently lose an edge.
    ``rng`` is unused (the builders share one signature).
    """
    tops = _top_concepts(ontology)
    out = []
    for concept in ontology.concepts.values():
        for parent_id in _parents(ontology, concept.id, tops):
            parent = ontology.concepts[parent_id]
            child_name, parent_name = concept.name, parent.name
            out.append(Pair(child_name, parent_name, "hierarchy", source, "parent", (concept.id, parent_id),
                            (child_name, parent_name)))
    return out


def distance_rows(ontology: Ontology, source: str, rng: random.Random) -> list[Pair]:
    """HiPrBERT's ordered categories: (name, a sibling's name, the parent's name) per concept.

    ``positive`` is the sibling (distance 1: same parent) and ``negative`` the parent
    (distance 2: parent and child); :class:`trainer.pretrain.ordered_loss.OrderedDistanceLoss`
    asks the sibling to be nearer than the parent and both nearer than everything else. One
    row per (concept, parent) below the top concepts whose parent has another child; the
    sibling is drawn at random (seeded). Preferred names, as in :func:`hierarchy_pairs`.
    """
    tops = _top_concepts(ontology)
    out = []
    for concept in ontology.concepts.values():
        for parent_id in _parents(ontology, concept.id, tops):
            siblings = sorted(c for c in ontology.graph.successors(parent_id)
                              if c != concept.id and c in ontology.concepts
                              and ontology.concepts[c].name != concept.name)
            if not siblings:
                continue
            sibling, parent = ontology.concepts[rng.choice(siblings)], ontology.concepts[parent_id]
            out.append(Pair(concept.name, sibling.name, "distances", source, "sibling-parent",
                            (concept.id, sibling.id, parent_id), (concept.name, sibling.name, parent.name),
                            negative=parent.name, negative_concept=parent_id))
    return out


BUILDERS = {"synonyms": synonym_pairs, "definitions": definition_pairs, "hierarchy": hierarchy_pairs,
            "distances": distance_rows}


def check_objectives(objectives: Iterable[str]) -> list[str]:
    """The objectives, in the order given, duplicates removed.

    Raises
    ------
    BiovizError
        Unknown or no objective.
    """
    objectives = list(dict.fromkeys(objectives))
    unknown = [o for o in objectives if o not in OBJECTIVES]
    if unknown:
        raise BiovizError(f"unknown objective {unknown[0]!r}: use any of {', '.join(OBJECTIVES)}")
    if not objectives:
        raise BiovizError(f"no objective: use any of {', '.join(OBJECTIVES)}")
    return objectives


def dedupe(pairs: Iterable[Pair]) -> list[Pair]:
    """Pairs without repeats (same objective and texts, after normalisation) and without a
    text paired with itself; the first of each kept, order kept."""
    seen: set = set()
    out = []
    for pair in pairs:
        key = pair.key
        if key[1] == key[2] or key in seen:
            continue
        seen.add(key)
        out.append(pair)
    return out


def seed_name(source: str) -> str:
    """The part of a SOURCE string that seeds its random choices: a bundled name, or a file's or folder's name.

    Not the whole path: the same recipe on the same file draws the same pairs in any checkout
    or working directory (a path in the seed made the pairs depend on where the file lay).

    >>> seed_name("/home/me/ontologies/mini.obo"), seed_name("mini.obo"), seed_name("hpo")
    ('mini.obo', 'mini.obo', 'hpo')
    """
    return Path(source).name or source


def extract_pairs(ontology: Ontology, source: str, objectives: Iterable[str], seed: int = 0) -> dict[str, list[Pair]]:
    """Deduplicated pairs of each objective from one loaded source.

    Parameters
    ----------
    ontology : Ontology
    source : str
        The SOURCE string (recorded in each pair).
    objectives : iterable of str
    seed : int
        Seed of the random choices (which names, which parent, which synonym pairs).

    Returns
    -------
    dict
        ``objective -> list of Pair``.
    """
    out = {}
    for objective in check_objectives(objectives):
        rng = random.Random(f"{seed}:{seed_name(source)}:{objective}")
        out[objective] = dedupe(BUILDERS[objective](ontology, source, rng))
    return out
