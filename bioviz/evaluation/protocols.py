"""The papers' evaluation protocols as data: who ranks what, and what counts as relevant.

Each function turns a level view (and its split) or an ontology into a
:class:`RankingProblem` or a :class:`PairSample`, independent of any model; the
evaluation (:mod:`bioviz.evaluation.run`) embeds the names and scores them with
:mod:`bioviz.evaluation.metrics`.

- :func:`ranking_problem`: semantic similarity ranking, test names rank all training names
  (higher-level-semantics §4.2);
- :func:`hypernym_problem`: test names rank all hypernym names of the level
  (higher-level-semantics §4.3);
- :func:`synonym_problems`: synonym retrieval / concept mapping on train, test and
  zero-shot names (conceptual-grounding §5.1);
- :func:`leaf_to_parent_problem`: leaf concepts rank all non-leaf concepts
  (biolord-definitions Table 2, SCT-L2P);
- :func:`hierarchy_pairs`: name pairs at distance 0 (synonyms), 1 (siblings),
  2 (parent-child), 3 (other) (hiprbert §4.2).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import networkx as nx
import numpy as np
from scipy import sparse

from bioviz.ontology.levels import LevelView
from bioviz.ontology.model import Ontology, normalise_name
from bioviz.ontology.splits import Split

logger = logging.getLogger(__name__)

DISTANCE_NAMES = {0: "synonym", 1: "sibling", 2: "parent-child", 3: "other"}


@dataclass(frozen=True)
class RankingProblem:
    """Queries that rank references; relevance by equal labels or by an explicit matrix.

    Attributes
    ----------
    queries : tuple of str
    query_labels : numpy.ndarray
        Class (or concept) index of each query.
    references : tuple of str
        Candidate names; with ``reference_groups`` several rows may name one candidate.
    reference_labels : numpy.ndarray
        Class of each reference row (label mode) or candidate index per row (grouped).
    exclude_self : bool
        Queries are the references (a single training name at a time as test item).
    relevance : scipy.sparse.csr_matrix or None
        ``(queries, candidates)`` relevance; None means equal labels.
    reference_groups : numpy.ndarray or None
        Non-decreasing candidate index per reference row (candidates ranked by their best
        name).
    """

    queries: tuple[str, ...]
    query_labels: np.ndarray
    references: tuple[str, ...]
    reference_labels: np.ndarray
    exclude_self: bool = False
    relevance: sparse.csr_matrix | None = None
    reference_groups: np.ndarray | None = None

    @property
    def texts(self) -> list[str]:
        """Every name to embed (queries, then references)."""
        return list(self.queries) + list(self.references)


@dataclass(frozen=True)
class PairSample:
    """Name pairs with their hierarchy distance."""

    first: tuple[str, ...]
    second: tuple[str, ...]
    distances: np.ndarray

    @property
    def texts(self) -> list[str]:
        """Every name to embed."""
        return list(self.first) + list(self.second)


def drop_queries(problem: RankingProblem, names) -> RankingProblem:
    """The problem without queries whose name is in ``names`` (compared normalised).

    Used to keep names a compared trained run has seen out of the queries. When the
    queries are the references (``exclude_self``), the names leave both sides.
    """
    excluded = {normalise_name(n) for n in names}
    keep = np.asarray([normalise_name(q) not in excluded for q in problem.queries], dtype=bool)
    if keep.all():
        return problem
    rows = np.flatnonzero(keep)
    queries = tuple(problem.queries[i] for i in rows)
    if problem.exclude_self:
        return RankingProblem(queries, problem.query_labels[rows], queries, problem.reference_labels[rows],
                              exclude_self=True)
    relevance = None if problem.relevance is None else problem.relevance[rows]
    return RankingProblem(queries, problem.query_labels[rows], problem.references, problem.reference_labels,
                          problem.exclude_self, relevance, problem.reference_groups)


def _names(view: LevelView, rows: np.ndarray) -> tuple[str, ...]:
    return tuple(view.names[i] for i in rows)


def ranking_problem(view: LevelView, split: Split) -> RankingProblem:
    """Semantic similarity ranking: each test name ranks every training name.

    Relevant: training names of the test name's class. mAP over test names is Table 4 of
    higher-level-semantics.
    """
    return RankingProblem(
        queries=_names(view, split.test),
        query_labels=view.labels[split.test],
        references=_names(view, split.train),
        reference_labels=view.labels[split.train],
    )


def hypernym_problem(view: LevelView, split: Split) -> RankingProblem:
    """Unsupervised hypernym detection: each test name ranks every hypernym name of the level.

    The hypernym names are the class concepts' own names (never used for training).
    Relevant: names of the test name's class. MRR is Table 5 of higher-level-semantics.
    """
    names, labels = [], []
    for index, class_id in enumerate(view.classes):
        for text in view.hypernym_names.get(class_id, []):
            names.append(text)
            labels.append(index)
    return RankingProblem(
        queries=_names(view, split.test),
        query_labels=view.labels[split.test],
        references=tuple(names),
        reference_labels=np.asarray(labels, dtype=np.int64),
    )


def synonym_problems(view: LevelView, split: Split) -> dict[str, RankingProblem]:
    """Synonym retrieval and concept mapping on the three parts (conceptual-grounding §5.1).

    - ``train``: each training name ranks the other training names;
    - ``test``: each test name ranks all training names;
    - ``zero_shot``: each zero-shot name ranks the other zero-shot names (classes never
      trained on). Left out when the split holds out no class.

    The classes of the view are the concept identifiers: in synonym-set mode these are
    concepts (the papers' setting), in level mode the level's classes.
    """
    train = RankingProblem(_names(view, split.train), view.labels[split.train],
                           _names(view, split.train), view.labels[split.train], exclude_self=True)
    problems = {"train": train, "test": ranking_problem(view, split)}
    if len(split.zero_shot):
        problems["zero_shot"] = RankingProblem(
            _names(view, split.zero_shot), view.labels[split.zero_shot],
            _names(view, split.zero_shot), view.labels[split.zero_shot], exclude_self=True,
        )
    return problems


def _subtree(ontology: Ontology, root: str) -> set[str]:
    """The root and its descendants (the whole ontology when the root is unknown)."""
    if root in ontology.graph:
        return {root} | nx.descendants(ontology.graph, root)
    return set(ontology.concepts)


def leaf_to_parent_problem(ontology: Ontology, root: str, max_queries: int = 2000,
                           seed: int = 0) -> RankingProblem:
    """Leaf concepts map onto the ontology with its leaves pruned (BioLORD SCT-L2P).

    Queries are the preferred names of leaf concepts under ``root`` (a fixed-seed sample
    of ``max_queries`` when there are more); candidates are the non-leaf concepts under
    ``root``, each ranked once by the best of its names (so a concept with many synonyms
    takes one rank, as concepts do in the paper); relevant are the leaf's direct parents.

    Raises
    ------
    ValueError
        If the subtree has no leaf with a non-leaf parent.
    """
    graph = ontology.graph
    concepts = _subtree(ontology, root)
    inner = sorted(c for c in concepts if c in ontology.concepts and graph.out_degree(c) > 0
                   and any(s != c for s in graph.successors(c)))
    inner_index = {c: i for i, c in enumerate(inner)}
    leaves = sorted(c for c in concepts if c in ontology.concepts and c not in inner_index
                    and any(p in inner_index for p in graph.predecessors(c)))
    if not leaves:
        raise ValueError(f"no leaf concepts with parents under {root}")
    if len(leaves) > max_queries:
        rng = np.random.default_rng(seed)
        leaves = [leaves[i] for i in sorted(rng.choice(len(leaves), size=max_queries, replace=False))]
    names, groups = [], []
    for index, concept_id in enumerate(inner):
        for text in ontology.concepts[concept_id].names:
            names.append(text)
            groups.append(index)
    rows, cols = [], []
    for q, leaf in enumerate(leaves):
        for parent in graph.predecessors(leaf):
            if parent in inner_index:
                rows.append(q)
                cols.append(inner_index[parent])
    relevance = sparse.csr_matrix((np.ones(len(rows), dtype=bool), (rows, cols)),
                                  shape=(len(leaves), len(inner)))
    groups_array = np.asarray(groups, dtype=np.int64)
    return RankingProblem(
        queries=tuple(ontology.concepts[c].name for c in leaves),
        query_labels=np.arange(len(leaves)),
        references=tuple(names),
        reference_labels=groups_array,
        relevance=relevance,
        reference_groups=groups_array,
    )


def hierarchy_pairs(ontology: Ontology, root: str, exclude_names=(), *, per_distance: int = 1000,
                    seed: int = 0) -> PairSample:
    """A fixed-seed sample of name pairs at each hierarchy distance (hiprbert §3.3, §4.2).

    Distances: 0 two names of one concept (synonyms); 1 names of two concepts with a common
    parent (siblings); 2 a concept's name and its parent's name; 3 any other two concepts.
    Only concepts under ``root`` and names not in ``exclude_names`` (the split's training
    and validation names, compared normalised) take part, so trained models are scored on
    held-out pairs; names carried by several concepts are left out too. Up to ``per_distance`` distinct pairs per distance; a distance the
    ontology cannot supply (ICD-10 has one name per concept: no synonyms) has none.
    """
    rng = np.random.default_rng(seed)
    excluded = {normalise_name(n) for n in exclude_names}
    # A name carried by several concepts has no single distance to another name.
    excluded |= {key for key, ids in ontology.name_index.items() if len(set(ids)) > 1}
    graph = ontology.graph
    pool = sorted(c for c in _subtree(ontology, root) if c in ontology.concepts)
    names = {c: [n for n in ontology.concepts[c].names if normalise_name(n) not in excluded] for c in pool}
    usable = [c for c in pool if names[c]]
    usable_set = set(usable)
    edges = sorted((p, c) for p, c in graph.edges if p in usable_set and c in usable_set and p != c)
    related = {frozenset(e) for e in edges}
    parents = {c: set(graph.predecessors(c)) for c in usable}

    def pick(concept: str) -> str:
        options = names[concept]
        return options[int(rng.integers(len(options)))]

    pairs: dict[int, set[tuple[str, str]]] = {d: set() for d in DISTANCE_NAMES}
    attempts = 4 * per_distance

    def add(distance: int, a: str, b: str) -> None:
        if a != b and normalise_name(a) != normalise_name(b):
            pairs[distance].add((a, b) if a < b else (b, a))

    multi = [c for c in usable if len(names[c]) > 1]
    for _ in range(attempts if multi else 0):
        if len(pairs[0]) >= per_distance:
            break
        concept = multi[int(rng.integers(len(multi)))]
        i, j = rng.choice(len(names[concept]), size=2, replace=False)
        add(0, names[concept][i], names[concept][j])
    children: dict[str, list[str]] = {}
    for p, c in edges:
        children.setdefault(p, []).append(c)
    sibling_edges = [(p, c) for p, c in edges if len(children[p]) > 1]
    for _ in range(attempts if sibling_edges else 0):
        if len(pairs[1]) >= per_distance:
            break
        p, a = sibling_edges[int(rng.integers(len(sibling_edges)))]
        b = children[p][int(rng.integers(len(children[p])))]
        if a != b and frozenset((a, b)) not in related:
            add(1, pick(a), pick(b))
    for _ in range(attempts if edges else 0):
        if len(pairs[2]) >= per_distance:
            break
        p, c = edges[int(rng.integers(len(edges)))]
        add(2, pick(p), pick(c))
    for _ in range(attempts if len(usable) > 1 else 0):
        if len(pairs[3]) >= per_distance:
            break
        i, j = rng.choice(len(usable), size=2, replace=False)
        a, b = usable[i], usable[j]
        if frozenset((a, b)) in related or parents[a] & parents[b]:
            continue
        add(3, pick(a), pick(b))
    first, second, distances = [], [], []
    for distance in sorted(pairs):
        for a, b in sorted(pairs[distance]):
            first.append(a)
            second.append(b)
            distances.append(distance)
    logger.info("hierarchy pairs under %s: %s", root, {d: len(p) for d, p in pairs.items()})
    return PairSample(tuple(first), tuple(second), np.asarray(distances, dtype=np.int64))
