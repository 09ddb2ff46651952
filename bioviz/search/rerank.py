"""Granularity in term coding: a first concept one hierarchy step off, corrected from the top candidates.

Half of a biomedical encoder's coding misses name a concept next to the right one in the
hierarchy (issue 31's error analysis of held-out phenotype mentions: 105 of 323 misses a
descendant of the gold concept, 48 an ancestor, 22 a sibling): "seizures" coded as *Focal
seizure*, "heart defect" as one particular defect. The candidates the ranking already
returns usually hold the right one, a step away from the first. A re-ranker looks at the
top ``k`` concepts and their IS-A links only: no model, no text, microseconds a term.

``ancestor`` (the rule bioviz uses)
    when a parent of the first concept is among the top ``k`` with a score within
    ``margin`` of the first's, the parent comes first: a mention scored almost as well by a
    concept and by its parent names the parent (the child's extra words are not in it).
    Exact matches (a name or id the term spells out) are never moved.
``cross-encoder``
    a cross-encoder (:mod:`bioviz.search.cross_rerank`, trained by ``python -m trainer
    reranker`` on ontology pairs: synonyms match, parents, children and siblings do not) reads
    the term with each of the top ``k`` concepts' preferred names; the window is re-ordered by
    ``score + weight * p(match)``. Exact matches stay first; the scores shown stay the ranking's.
``none``
    the ranking as it is.

The rule and its margin were chosen on the development coding files
(``benchmarks/coding_rerank.py``, docs/models.md), never on a benchmark that reports results.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass

from bioviz.errors import BiovizError
from bioviz.ontology.model import Ontology

RULES = ("none", "ancestor", "cross-encoder")
TOP_K = 20  # candidates a re-ranker looks at


@dataclass(frozen=True)
class Reranker:
    """How term coding re-orders its top candidates.

    Attributes
    ----------
    rule : str
        One of :data:`RULES`.
    margin : float
        ``ancestor``: how far below the first concept's score its parent may be and still
        come first (in the ranking's score units).
    k : int
        Candidates looked at.
    model : str, optional
        ``cross-encoder``: the cross-encoder's directory.
    weight : float
        ``cross-encoder``: the match probability's weight against the ranking's score.
    """

    rule: str = "none"
    margin: float = 0.0
    k: int = TOP_K
    model: str | None = None
    weight: float = 1.0

    def __post_init__(self):
        if self.rule not in RULES:
            raise BiovizError(f"unknown re-ranking {self.rule!r}: use one of {', '.join(RULES)}")
        if self.margin < 0 or self.k < 1 or self.weight < 0:
            raise BiovizError("a re-ranker's margin and weight must be >= 0 and its k >= 1")
        if (self.rule == "cross-encoder") != (self.model is not None):
            raise BiovizError("a cross-encoder re-ranker needs its model directory, and only it takes one")

    @property
    def active(self) -> bool:
        """Whether it can change an order."""
        return self.rule != "none"

    @property
    def label(self) -> str:
        """``ancestor (margin 0.02)``, ``cross-encoder (weight 0.1)`` or ``none``."""
        if self.rule == "cross-encoder":
            return f"{self.rule} (weight {self.weight:g})"
        return self.rule if not self.active else f"{self.rule} (margin {self.margin:g})"


def rerank(top: Sequence[tuple[str, float]], *, parents_of: Callable[[str], Iterable[str]],
           exact: Collection[str] = (), reranker: Reranker) -> list[tuple[str, float]]:
    """``top`` re-ordered by the re-ranker's rule (scores unchanged).

    Parameters
    ----------
    top : sequence of (concept id, score)
        Best first, as the ranking returned them.
    parents_of : callable
        ``parents_of(concept_id)``: the concept's parents in the ontology.
    exact : collection of str
        Concepts the term matches exactly: an exact first concept is never moved.
    reranker : Reranker

    Returns
    -------
    list of (concept id, score)
    """
    top = list(top)
    if not reranker.active or len(top) < 2 or top[0][0] in exact:
        return top
    first, first_score = top[0]
    window = top[:reranker.k]
    position = {concept: i for i, (concept, _) in enumerate(window)}
    parents = [position[p] for p in parents_of(first) if p in position]
    eligible = [i for i in parents if window[i][1] >= first_score - reranker.margin]
    if not eligible:
        return top
    chosen = min(eligible)  # the best-scored parent among those close enough
    return [top[chosen]] + [row for i, row in enumerate(top) if i != chosen]


def cross_rerank(top: Sequence[tuple[str, float]], *, probabilities: Sequence[float], exact: Collection[str] = (),
                 weight: float) -> list[tuple[str, float]]:
    """``top``'s window re-ordered by ``score + weight * probability`` (scores unchanged; exact ones first).

    Parameters
    ----------
    top : sequence of (concept id, score)
        Best first; the first ``len(probabilities)`` are the window.
    probabilities : sequence of float
        The cross-encoder's match probability of each window concept.
    exact : collection of str
        Concepts the term matches exactly: they keep their places at the head.
    weight : float
    """
    top = list(top)
    k = len(probabilities)
    window, rest = top[:k], top[k:]
    head = [row for row in window if row[0] in exact]
    scored = [(row[1] + weight * p, -i, row) for i, (row, p) in enumerate(zip(window, probabilities))
              if row[0] not in exact]
    return head + [row for *_, row in sorted(scored, reverse=True)] + rest


class OntologyReranker:
    """A :class:`Reranker` with an ontology's IS-A parents bound: ``regrain(top, exact)``.

    Without an ontology (or with the ``none`` rule) it returns ``top`` unchanged.
    """

    def __init__(self, reranker: Reranker, ontology: Ontology | None) -> None:
        self.reranker, self.ontology = reranker, ontology
        self.active = reranker.active and ontology is not None

    def parents_of(self, concept: str) -> Iterable[str]:
        """The concept's parents (none for a concept the ontology does not hold)."""
        graph = self.ontology.graph
        return graph.predecessors(concept) if concept in graph else ()

    def __call__(self, top: Sequence[tuple[str, float]], exact: Collection[str],
                 term: str | None = None) -> list[tuple[str, float]]:
        if not self.active or len(top) < 2:
            return list(top)
        if self.reranker.rule == "cross-encoder":
            if term is None or top[0][0] in exact:  # an exact first concept is never moved
                return list(top)
            from bioviz.search.cross_rerank import cross_scorer  # torch only when a cross-encoder is asked for

            window = top[:self.reranker.k]
            names = [self.ontology.concepts[c].name if c in self.ontology.concepts else c for c, _ in window]
            return cross_rerank(top, probabilities=cross_scorer(self.reranker.model)(term, names), exact=exact,
                                weight=self.reranker.weight)
        return rerank(top, parents_of=self.parents_of, exact=exact, reranker=self.reranker)


# What term coding uses unless told otherwise (chosen on the development files: docs/models.md).
DEFAULT_RERANKER = Reranker()
