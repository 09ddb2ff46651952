"""Answers while a level encodes: exact matches, then lexical and partial dense rankings merged.

A first encoding of ICD-10-CM (110k names) takes minutes; the names already stored are an
unbiased, growing sample of the level (:meth:`bioviz.models.encoding_session.EncodingSession.partial`).
A progressive answer is built from what is known now, best evidence first:

1. the names of a concept one of whose names equals the query but for case, spacing and
   punctuation (:class:`~bioviz.search.hybrid.NameMatcher`): certain, whatever is encoded;
2. then the char-tfidf ranking over *every* name (:class:`~bioviz.search.hybrid.SparseNames`,
   or :class:`~bioviz.search.name_search.NameSearch`'s tiers while the char-tfidf rows are
   still being built) merged with the dense ranking over the names encoded so far, by
   reciprocal rank fusion (Cormack et al., 2009): a name's merged score is the sum of
   ``1 / (RRF_K + rank)`` over the rankings it appears in. Ranks, not scores, are merged
   because a cosine and a char-tfidf cosine are on different scales, and a name not encoded
   yet has no dense score at all: it can still be found through the lexical ranking, and a
   name found by both rises above one found by either.

The answer is marked (:attr:`PartialAnswer.marker`: ``partial: 12,800 of 110,233 names encoded,
refining``) until every name is encoded; then the page or command gives the usual ranking
(:func:`bioviz.search.neighbours.rank_neighbours`, :func:`bioviz.search.term_coding.code_terms`).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from bioviz.ontology.model import normalise_name
from bioviz.search.hybrid import NameMatcher, SparseNames
from bioviz.search.neighbours import QueryInfo

logger = logging.getLogger(__name__)

RRF_K = 60  # Cormack et al.'s constant: a top rank does not swamp the other ranking
DEPTH = 200  # names taken from each ranking: far more than any k shown, a few milliseconds to sort
EXACT, BOTH, DENSE, LEXICAL, PLACED = "exact", "both", "dense", "lexical", "placed"


@dataclass(frozen=True)
class LexicalRanking:
    """A ranking of a level's names by their spelling alone, best first (no vectors needed).

    Attributes
    ----------
    rows : numpy.ndarray
        ``int64`` rows of the level's names, best first.
    kind : str
        ``char-tfidf`` or ``name search`` (what ranked them, for the marker).
    """

    rows: np.ndarray
    kind: str

    @classmethod
    def by_tfidf(cls, sparse: SparseNames, text: str, depth: int = DEPTH) -> LexicalRanking:
        """The ``depth`` names of ``sparse`` (every name of the level, in its order) nearest ``text`` by char-tfidf."""
        scores = sparse.scores([text])[0]
        positive = np.flatnonzero(scores > 0)
        top = positive[np.argsort(-scores[positive], kind="stable")[:depth]]
        return cls(top.astype(np.int64), "char-tfidf")

    @classmethod
    def by_name_search(cls, search, names: Sequence[str], text: str, depth: int = DEPTH) -> LexicalRanking:
        """The names :class:`~bioviz.search.name_search.NameSearch` finds for ``text``, as rows of ``names``.

        A stand-in while the char-tfidf rows of a large level are being built (tens of seconds): the
        search is built in about a second and answers in milliseconds.
        """
        row_of: dict[str, int] = {}
        for row, name in enumerate(names):
            row_of.setdefault(name.strip(), row)
        rows = [row_of[name] for name in search.search(text, limit=depth) if name in row_of]
        return cls(np.asarray(rows, dtype=np.int64), "name search")


@dataclass(frozen=True)
class PartialAnswer:
    """A ranking given before every name is encoded.

    Attributes
    ----------
    rows : tuple of dict
        ``rank, row, name, concept_id, class_id, class_label, score, via, same_class, same_concept``:
        ``score`` is the dense cosine where the name is encoded (else NaN), ``via`` says what found it
        (``exact``, ``both``, ``dense`` or ``lexical``); with :func:`with_rank_changes`, also
        ``other_rank`` and ``rank_change``.
    names_encoded, total : int
        Distinct names encoded so far, of all of the level's.
    lexical : str
        What ranked the names by spelling (``char-tfidf`` or ``name search``).
    order : tuple of int
        The level rows of the whole merged ranking, best first (the rows shown are its first ``k``).
    """

    rows: tuple[dict, ...]
    names_encoded: int
    total: int
    lexical: str = "char-tfidf"
    order: tuple[int, ...] = ()  # every merged row (exact first, up to 2 x DEPTH): where another model's rows sit

    @property
    def complete(self) -> bool:
        """True once every name is encoded (the usual ranking can then be given)."""
        return self.names_encoded >= self.total

    @property
    def marker(self) -> str:
        """``partial: 12,800 of 110,233 names encoded, refining`` (or ``complete: ...``).

        >>> PartialAnswer((), 12_800, 110_233).marker
        'partial: 12,800 of 110,233 names encoded, refining'
        """
        if self.complete:
            return f"complete: all {self.total:,} names encoded"
        return f"partial: {self.names_encoded:,} of {self.total:,} names encoded, refining"


@dataclass(frozen=True, eq=False)
class QueryForm:
    """Another text a query is also ranked as: its synonym expansion (``heart attack`` as ``Myocardial infarction``).

    Attributes
    ----------
    text : str
        The expanded form (a concept's preferred name from the lexicon, :mod:`bioviz.search.lexicon`).
    vector : numpy.ndarray or None
        Its vector under the model; None while it is encoded.
    lexical : LexicalRanking
        The level's names ranked by its spelling.
    """

    text: str
    vector: np.ndarray | None
    lexical: LexicalRanking


def best_rank_merge(rankings: Sequence[np.ndarray]) -> np.ndarray:
    """One ranking in which each row keeps its best rank among ``rankings`` (ties: the earlier ranking's first).

    How an expanded query's spelling rankings are joined: each name keeps its best match, as the
    full ranking keeps each name's best score against the query and its expanded forms.

    >>> best_rank_merge([np.array([4, 2, 9]), np.array([7, 4])]).tolist()
    [4, 7, 2, 9]
    """
    merged: dict[int, None] = {}
    for position in range(max((len(r) for r in rankings), default=0)):
        for ranking in rankings:
            if position < len(ranking):
                merged.setdefault(int(ranking[position]), None)
    return np.fromiter(merged, dtype=np.int64, count=len(merged))


def with_rank_changes(answer: PartialAnswer, other: PartialAnswer) -> PartialAnswer:
    """``answer`` with each row's rank in ``other``'s merged ranking (``other_rank``) and ``rank_change``.

    ``rank_change`` is ``other_rank - rank`` (positive: ranked higher in ``answer``), as in the full
    comparison; None for a row not (yet) in ``other``'s merged ranking.
    """
    position = {row: rank for rank, row in enumerate(other.order, start=1)}
    rows = tuple({**row, "other_rank": position.get(row["row"]),
                  "rank_change": position[row["row"]] - row["rank"] if row["row"] in position else None}
                 for row in answer.rows)
    return dataclasses.replace(answer, rows=rows)


def fuse(rankings: Sequence[np.ndarray], k: int, *, skip: set[int] | frozenset = frozenset(),
         scales: Sequence[float] | None = None) -> list[int]:
    """The ``k`` best rows of several rankings (rows best first) by reciprocal rank fusion.

    A row ranked by several rankings sums their ``1 / (RRF_K + rank * scale)``; ties keep the order
    of first appearance (the first ranking's first). Rows in ``skip`` are left out. A ranking over a
    sample of the names (the dense one over the names encoded so far: a fraction ``f`` of the level)
    takes ``scale = 1 / f``: its rank ``r`` in the sample stands for about rank ``r / f`` in the level,
    so a handful of encoded names does not put its nearest one level with the best spelling match.

    Examples
    --------
    >>> fuse([np.array([5, 1, 2]), np.array([2, 7])], 3)
    [2, 5, 1]
    """
    score: dict[int, float] = {}
    for ranking, scale in zip(rankings, scales or [1.0] * len(rankings)):
        rank = 0
        for row in ranking:
            row = int(row)
            if row in skip:
                continue
            rank += 1
            score[row] = score.get(row, 0.0) + 1.0 / (RRF_K + rank * scale)
    return sorted(score, key=lambda row: -score[row])[:k]  # sorted() is stable: first appearance breaks ties


def dense_order(rows: np.ndarray, vectors: np.ndarray, query_vector: np.ndarray,
                depth: int = DEPTH) -> tuple[np.ndarray, np.ndarray]:
    """The encoded rows nearest the query, best first, and their cosines (of every encoded row).

    ``query_vector`` may hold several rows (the query and its expanded forms): each name then
    keeps its best cosine against any of them.

    Returns
    -------
    (order, cosines)
        ``order``: at most ``depth`` rows of the level, best first; ``cosines``: per entry of ``rows``.
    """
    if not len(rows):
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
    queries = np.asarray(query_vector, dtype=np.float32)
    cosines = (np.asarray(vectors, dtype=np.float32) @ queries.reshape(-1, queries.shape[-1]).T).max(axis=1)
    take = min(depth, len(cosines))
    head = np.argpartition(-cosines, take - 1)[:take]
    head = head[np.argsort(-cosines[head], kind="stable")]
    return np.asarray(rows, dtype=np.int64)[head], cosines


def partial_neighbours(view, partial, query: QueryInfo, *, query_vector: np.ndarray | None,
                       lexical: LexicalRanking, k: int = 10, restrict_class: str | None = None,
                       matcher: NameMatcher | None = None, keep_query: bool = False,
                       forms: Sequence[QueryForm] = (), placed: tuple[tuple[str, ...], ...] = ()) -> PartialAnswer:
    """The neighbours of a query among a level's names, from the names encoded so far and every name's spelling.

    Parameters
    ----------
    view : LevelView
        The level (its ``names``, ``name_concepts``, ``labels``, ``classes``, ``class_labels``).
    partial : PartialVectors
        The level's vectors stored so far (:meth:`~bioviz.models.encoding_session.EncodingSession.partial`).
    query_vector : numpy.ndarray or None
        The query under the same model; None while the model loads (the answer is then lexical alone).
    query : QueryInfo
        The resolved query (:func:`~bioviz.search.neighbours.resolve_query`): names equal to it are left
        out, as :func:`~bioviz.search.neighbours.rank_neighbours` leaves them out.
    lexical : LexicalRanking
        Every name ranked by spelling.
    k : int
    restrict_class : str, optional
        Only names of this class.
    matcher : NameMatcher, optional
        Over ``view``'s names and concepts (built here when not given: a page keeps one per level).
    keep_query : bool
        Keep names equal to the query (coding a name gives its own concept; a neighbour list leaves it out).
    forms : sequence of QueryForm
        The query's synonym expansion: the names of a concept one of whose names equals a form come
        first with the exact matches, and each name keeps its best rank by spelling and its best cosine.
    placed : tuple of tuples of str
        Concepts the clinical vocabulary places first (:attr:`bioviz.search.lexicon.QueryExpansion.placed`):
        their names come right after the exact matches, tier by tier, each tier in the fused order
        (``via`` ``placed``), as :func:`~bioviz.search.neighbours.rank_neighbours` places them.

    Returns
    -------
    PartialAnswer
    """
    matcher = matcher or NameMatcher(view.names, view.name_concepts)
    allowed = None
    if restrict_class is not None and restrict_class in view.classes:
        label = view.classes.index(restrict_class)
        allowed = set(np.flatnonzero(np.asarray(view.labels) == label).tolist())
    exact_concepts = set(matcher.concepts(query.typed or "", query.text, *(form.text for form in forms)))
    exact = [row for row, concept in enumerate(view.name_concepts) if concept in exact_concepts
             and (allowed is None or row in allowed)]
    queries = [v for v in (query_vector, *(form.vector for form in forms)) if v is not None]
    dense, cosines = dense_order(partial.rows, partial.vectors, np.stack(queries)) if queries \
        else (np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32))
    spelling = best_rank_merge([lexical.rows, *(form.lexical.rows for form in forms)]) if forms else lexical.rows
    # the query's own name is no neighbour of it (as rank_neighbours has it): looked for among the candidates only
    key = normalise_name(query.text)
    own = set() if keep_query else \
        {int(row) for row in (*exact, *spelling, *dense) if normalise_name(view.names[row]) == key}
    exact = [row for row in exact if row not in own]
    rankings = [spelling, dense]
    if allowed is not None:
        rankings = [np.asarray([r for r in ranking if int(r) in allowed], dtype=np.int64) for ranking in rankings]
    sampled = partial.total / max(partial.done, 1)  # the dense ranking sees this fraction of the names
    merged = fuse(rankings, 2 * DEPTH, skip=own | set(exact), scales=[1.0, sampled])
    placed_first = _placed_rows(view, placed, merged, skip=own | set(exact), allowed=allowed)
    merged = [row for row in merged if row not in set(placed_first)]
    exact = [*exact, *placed_first]
    order = (*exact, *merged)
    exact, rest = exact[:k], merged[:max(k - len(exact), 0)]
    cosine_of = dict(zip(np.asarray(partial.rows).tolist(), cosines.tolist()))
    in_lexical, in_dense = set(rankings[0].tolist()), set(rankings[1].tolist())
    concepts = set(query.concept_ids)
    placed_set = set(placed_first)
    rows = []
    for rank, row in enumerate([*exact, *rest], start=1):
        label = int(view.labels[row])
        via = PLACED if row in placed_set else EXACT if row in exact else BOTH if row in in_lexical and row in in_dense else \
            DENSE if row in in_dense else LEXICAL
        rows.append({"rank": rank, "row": row, "name": view.names[row], "concept_id": view.name_concepts[row],
                     "class_id": view.classes[label], "class_label": view.class_labels[label],
                     "score": round(cosine_of[row], 4) if row in cosine_of else float("nan"), "via": via,
                     "same_class": query.class_id is not None and view.classes[label] == query.class_id,
                     "same_concept": bool(concepts) and view.name_concepts[row] in concepts})
    return PartialAnswer(tuple(rows), partial.done, partial.total, lexical.kind, tuple(int(r) for r in order))


def _placed_rows(view, placed: tuple[tuple[str, ...], ...], merged: Sequence[int], *, skip: set,
                 allowed: set | None) -> list[int]:
    """The rows of the placed concepts' names, tier by tier, each tier in ``merged``'s order (then the level's)."""
    if not placed:
        return []
    position = {int(row): i for i, row in enumerate(merged)}
    out: list[int] = []
    for tier in placed:
        wanted = set(tier)
        rows = [row for row, concept in enumerate(view.name_concepts) if concept in wanted and row not in skip
                and (allowed is None or row in allowed) and row not in out]
        out += sorted(rows, key=lambda row: position.get(row, len(position) + row))
    return out


@dataclass(frozen=True)
class PartialCoding(PartialAnswer):
    """Each term's first concepts before every name of the level is encoded (one model).

    Attributes
    ----------
    rows : tuple of dict
        Per term: ``term``, ``match`` (``exact``: a code or name of the ontology, else ``nearest``),
        ``code``, ``name``, ``score`` (the first name's dense cosine, NaN when found by spelling alone),
        ``via`` and ``others`` (the rest of the top k, ``; ``-separated).
    names_encoded, total, lexical
        As :class:`PartialAnswer`, whose marker and completeness it shares.
    """


def partial_coding(terms: Sequence[str], infos: Sequence[QueryInfo], view, partial, *,
                   term_vectors: np.ndarray | None, lexicals: Sequence[LexicalRanking], k: int = 5,
                   ontology=None, forms: Sequence[Sequence[QueryForm]] = ()) -> PartialCoding:
    """Each term's top ``k`` concepts from the names encoded so far and every name's spelling.

    A term that is a code or a name of the ontology (``infos[i].resolved_by``) or that equals a name
    but for case, spacing and punctuation gets that concept first, as in
    :func:`~bioviz.search.term_coding.code_terms`; the rest come from :func:`partial_neighbours`'
    merge, each concept once (its best name's place).

    Parameters
    ----------
    terms : sequence of str
    infos : sequence of QueryInfo
        :func:`~bioviz.search.term_coding.resolve_terms` of ``terms``.
    view : LevelView
    partial : PartialVectors
    term_vectors : numpy.ndarray or None
        ``(n_terms, dim)`` vectors of the resolved terms under the model; None while it loads.
    lexicals : sequence of LexicalRanking
        One per term.
    k : int
    ontology : Ontology, optional
        The concepts' names (else a concept's first name in the level).
    forms : sequence of sequences of QueryForm, optional
        Each term's synonym expansion (see :func:`partial_neighbours`); none when not given.
    """
    matcher = NameMatcher(view.names, view.name_concepts)
    first_name: dict[str, str] = {}
    for name, concept in zip(view.names, view.name_concepts):
        first_name.setdefault(concept, name)
    rows = []
    for i, (term, info) in enumerate(zip(terms, infos)):
        vector = term_vectors[i] if term_vectors is not None else None
        answer = partial_neighbours(view, partial, info, query_vector=vector, lexical=lexicals[i], k=k * 4,
                                    matcher=matcher, keep_query=True, forms=forms[i] if forms else ())
        exact = list(info.concept_ids[:1] if info.resolved_by == "id" else info.concept_ids
                     if info.resolved_by == "name" else ())
        exact += [c for c in matcher.concepts(term, info.text) if c not in exact]
        concepts: dict[str, tuple[float, str]] = {c: (1.0, EXACT) for c in exact}
        for row in answer.rows:
            concepts.setdefault(row["concept_id"], (row["score"], row["via"]))
        top = list(concepts.items())[:k]
        code, (score, via) = top[0] if top else ("", (float("nan"), ""))
        name = ontology.concepts[code].name if ontology is not None and code in ontology.concepts \
            else first_name.get(code, code)
        rows.append({"term": term, "match": EXACT if exact else "nearest", "code": code, "name": name,
                     "score": score, "via": via, "others": "; ".join(c for c, _ in top[1:])})
    return PartialCoding(tuple(rows), partial.done, partial.total, lexicals[0].kind if lexicals else "char-tfidf")


def sparse_names_aside(names: Sequence[str], timeout_s: float = 1800) -> SparseNames:
    """The char-tfidf rows of a level's names (every name, in its order), built in a child process.

    Fitting char-tfidf on ICD-10-CM takes tens of seconds of Python that holds the interpreter lock:
    in a server's thread it would slow the level's encoding and every session's page beside it. The
    child (``python -m bioviz.search.progressive NAMES.json``, at a lower CPU priority) writes the fit
    and the rows to their disk caches (:meth:`SparseNames.build`); they are then read here. Should the
    child fail, the rows are built here after all (logged).
    """
    names = list(names)
    root = Path(__file__).resolve().parents[2]  # the bioviz package importable in the child, wherever it runs
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")]))}
    with tempfile.TemporaryDirectory(prefix="bioviz-tfidf-") as folder:
        listed = Path(folder) / "names.json"
        listed.write_text(json.dumps(names), encoding="utf-8")
        try:
            done = subprocess.run([sys.executable, "-m", "bioviz.search.progressive", str(listed)], env=env,
                                  stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout_s,
                                  check=False)
            if done.returncode:
                logger.warning("char-tfidf in a child process failed (%s): built here", done.stderr[-500:])
        except (OSError, subprocess.TimeoutExpired) as error:
            logger.warning("char-tfidf in a child process failed (%s): built here", error)
    return SparseNames.build(names, names)


if __name__ == "__main__":  # the child of sparse_names_aside: fit and rows into the disk caches, nothing printed
    os.nice(5)  # behind the encoding and the pages it is built for
    _names = json.loads(Path(sys.argv[1]).read_text(encoding="utf-8"))
    SparseNames.build(_names, _names)
