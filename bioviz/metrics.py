"""The papers' ranking evaluations, vectorised.

Every task here is the same ranking problem: each *query* vector ranks all *reference*
vectors by cosine similarity (the vectors are L2-normalised, so a dot product), and some
references are *relevant* to it (same class, same concept, a true parent). From that one
ranking the papers read three figures:

- **AP** (average precision) over all relevant references; its mean over queries is the
  mAP of semantic similarity ranking (higher-level-semantics §4.2-4.3, Table 4) and of
  synonym retrieval (conceptual-grounding §5.1, Tables 3-5);
- **RR** (reciprocal rank) of the first relevant reference; its mean is the MRR of
  unsupervised hypernym detection (higher-level-semantics Table 5), of concept mapping
  (conceptual-grounding) and of leaf-to-parent mapping (biolord-definitions Table 2);
- **Acc@1**: whether the top-ranked reference is relevant.

Ties
----
Cosine similarities can tie exactly (identical names, a collapsed encoder, zero vectors
from a character model given an empty string). Ties are resolved **against the query**,
so a degenerate encoder never scores better than it deserves:

- a non-relevant reference with a similarity equal to a relevant one counts as ranked
  *before* it; relevant references tied with each other do not hurt each other;
- AP uses the tie-aware precision of scikit-learn's ``label_ranking_average_precision_score``:
  for a relevant reference ``r``, precision = |relevant with score >= s_r| / |all with
  score >= s_r|. Without ties this is the textbook AP; with every score tied it is
  ``n_relevant / n_references``;
- the rank of the first relevant reference is ``1 + |non-relevant with score >= best
  relevant score|``; Acc@1 is ``rank == 1``.

Queries with no relevant reference (a class with a single training name when the query
itself is excluded, say) have no AP or RR: they get NaN per query and are left out of the
means; :func:`ranking_metrics` reports how many queries were scored.

All functions work in chunks of queries (one matrix product and one row-wise sort per
chunk), with no Python loop over query/reference pairs.
"""

from __future__ import annotations

import logging

import numpy as np
from scipy import sparse

logger = logging.getLogger(__name__)

# Queries per chunk are chosen so one chunk's score matrix stays near this many entries
# (float32 scores, int64 sort order: ~50 MB of working memory per chunk).
_CHUNK_ENTRIES = 4_000_000


def _as_matrix(vectors) -> np.ndarray:
    """Float32 2-D array (rows are assumed L2-normalised, as in every :class:`Space`)."""
    matrix = np.asarray(vectors, dtype=np.float32)
    if matrix.ndim != 2:
        raise ValueError(f"expected a 2-D array of vectors, got shape {matrix.shape}")
    return matrix


def _chunks(n_queries: int, n_references: int):
    size = max(1, _CHUNK_ENTRIES // max(n_references, 1))
    for start in range(0, n_queries, size):
        yield start, min(start + size, n_queries)


def label_relevance(query_labels, reference_labels) -> "callable":
    """Relevance by equal labels: reference ``j`` is relevant to query ``i`` iff labels match.

    Returns
    -------
    callable
        ``f(start, stop) -> bool array (stop - start, n_references)`` for a chunk of queries.
    """
    q = np.asarray(query_labels)
    r = np.asarray(reference_labels)
    return lambda start, stop: q[start:stop, None] == r[None, :]


def matrix_relevance(relevance) -> "callable":
    """Relevance given as a (sparse or dense) ``(n_queries, n_references)`` boolean matrix.

    Used when a query has several relevant labels (a leaf concept with several parents).
    """
    if sparse.issparse(relevance):
        csr = sparse.csr_matrix(relevance, dtype=bool)
        return lambda start, stop: csr[start:stop].toarray()
    dense = np.asarray(relevance, dtype=bool)
    return lambda start, stop: dense[start:stop]


def _chunk_stats(scores: np.ndarray, relevant: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-query AP and first-relevant rank for one chunk (see the module's tie rules)."""
    n_rel = relevant.sum(axis=1)
    # Rank of the first relevant reference: 1 + non-relevant references scoring at least as
    # high as the best relevant one.
    best_relevant = np.where(relevant, scores, -np.inf).max(axis=1)
    beaten_by = ((scores >= best_relevant[:, None]) & ~relevant).sum(axis=1)
    first_rank = 1.0 + beaten_by
    # AP: sort descending, then give every member of a tie group the group's end position.
    order = np.argsort(-scores, axis=1, kind="stable")
    s_sorted = np.take_along_axis(scores, order, axis=1)
    r_sorted = np.take_along_axis(relevant, order, axis=1)
    m = scores.shape[1]
    positions = np.arange(m)
    is_group_end = np.ones_like(r_sorted)
    is_group_end[:, :-1] = s_sorted[:, :-1] != s_sorted[:, 1:]
    # Reverse running minimum of the end positions: the end of each element's tie group.
    end_marks = np.where(is_group_end, positions, m)
    group_end = np.minimum.accumulate(end_marks[:, ::-1], axis=1)[:, ::-1]
    relevant_upto = np.cumsum(r_sorted, axis=1)
    relevant_in_reach = np.take_along_axis(relevant_upto, group_end, axis=1)
    precision = relevant_in_reach / (group_end + 1.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        ap = (precision * r_sorted).sum(axis=1) / n_rel
    missing = n_rel == 0
    ap[missing] = np.nan
    first_rank[missing] = np.nan
    return ap, first_rank


def ranking_stats(query_vectors, reference_vectors, relevance, exclude_self: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Per-query average precision and rank of the first relevant reference.

    Parameters
    ----------
    query_vectors : array (n, d)
        L2-normalised query vectors.
    reference_vectors : array (m, d)
        L2-normalised reference vectors.
    relevance : callable
        ``f(start, stop) -> bool (stop - start, m)``, from :func:`label_relevance` or
        :func:`matrix_relevance`.
    exclude_self : bool
        Queries are the references themselves (same rows, ``n == m``): query ``i`` does not
        rank reference ``i`` (the papers' "a single training name at a time as test item").

    Returns
    -------
    (ap, first_rank) : two float arrays (n,)
        NaN for queries with no relevant reference.
    """
    queries = _as_matrix(query_vectors)
    references = _as_matrix(reference_vectors)
    n, m = len(queries), len(references)
    if exclude_self and n != m:
        raise ValueError(f"exclude_self needs the queries to be the references ({n} != {m})")
    ap = np.full(n, np.nan)
    first_rank = np.full(n, np.nan)
    if n == 0 or m == 0:
        return ap, first_rank
    for start, stop in _chunks(n, m):
        scores = queries[start:stop] @ references.T
        relevant = np.array(relevance(start, stop), dtype=bool, copy=True)
        if exclude_self:
            rows = np.arange(stop - start)
            scores[rows, rows + start] = -np.inf  # ranked after everything, never counted
            relevant[rows, rows + start] = False
        ap[start:stop], first_rank[start:stop] = _chunk_stats(scores, relevant)
    return ap, first_rank


def average_precisions(query_vectors, query_labels, reference_vectors, reference_labels,
                       exclude_self: bool = False) -> np.ndarray:
    """Average precision of each query for retrieving references of its own class.

    Parameters
    ----------
    query_vectors, reference_vectors : array (n, d), array (m, d)
        L2-normalised vectors.
    query_labels, reference_labels : array (n,), array (m,)
        Class of each query / reference.
    exclude_self : bool
        See :func:`ranking_stats`.

    Returns
    -------
    numpy.ndarray
        ``(n,)`` float, NaN where no reference shares the query's class.

    Examples
    --------
    >>> import numpy as np
    >>> refs = np.array([[1.0, 0.0], [0.0, 1.0]])
    >>> average_precisions(np.array([[0.0, 1.0]]), [1], refs, [0, 1])
    array([1.])
    """
    ap, _ = ranking_stats(query_vectors, reference_vectors,
                          label_relevance(query_labels, reference_labels), exclude_self)
    return ap


def class_retrieval_map(query_vectors, query_labels, reference_vectors, reference_labels,
                        exclude_self: bool = False) -> float:
    """Mean average precision of retrieving references of the query's class.

    Semantic similarity ranking (higher-level-semantics §4.2): test names rank all training
    names; synonym retrieval (conceptual-grounding §5.1) is the same with concepts as
    classes. Queries with no relevant reference are left out (NaN when none is left).
    """
    ap = average_precisions(query_vectors, query_labels, reference_vectors, reference_labels, exclude_self)
    return _nanmean(ap)


def per_class_map(ap: np.ndarray, query_labels) -> dict:
    """Mean of per-query APs within each query class.

    Returns
    -------
    dict
        ``label -> mAP`` for every label with at least one scored query.
    """
    ap = np.asarray(ap, dtype=float)
    labels = np.asarray(query_labels)
    out = {}
    for label in np.unique(labels):
        values = ap[labels == label]
        values = values[~np.isnan(values)]
        if len(values):
            out[label.item() if hasattr(label, "item") else label] = float(values.mean())
    return out


def hypernym_mrr(query_vectors, query_labels, hypernym_vectors, hypernym_labels) -> float:
    """MRR of the first hypernym name of the query's own class (higher-level-semantics Table 5).

    Parameters
    ----------
    query_vectors : array (n, d)
        Test names.
    query_labels : array (n,)
        Their classes.
    hypernym_vectors : array (m, d)
        Every hypernym name of the level (the class concepts' own names).
    hypernym_labels : array (m,)
        The class each hypernym name names.
    """
    _, rank = ranking_stats(query_vectors, hypernym_vectors, label_relevance(query_labels, hypernym_labels))
    return _nanmean(1.0 / rank)


def ranking_metrics(query_vectors, reference_vectors, relevance, exclude_self: bool = False) -> dict:
    """mAP, Acc@1 and MRR of one ranking task, with the number of scored queries.

    Parameters
    ----------
    query_vectors, reference_vectors : arrays
        L2-normalised vectors.
    relevance : callable
        From :func:`label_relevance` or :func:`matrix_relevance`.
    exclude_self : bool
        See :func:`ranking_stats`.

    Returns
    -------
    dict
        ``map``, ``acc1``, ``mrr`` (floats, NaN when nothing could be scored), ``queries``
        (scored), ``skipped`` (queries without a relevant reference), ``references``.
    """
    ap, rank = ranking_stats(query_vectors, reference_vectors, relevance, exclude_self)
    scored = ~np.isnan(ap)
    return {
        "map": _nanmean(ap),
        "acc1": _nanmean(np.where(scored, rank == 1, np.nan)),
        "mrr": _nanmean(1.0 / rank),
        "queries": int(scored.sum()),
        "skipped": int((~scored).sum()),
        "references": int(len(np.asarray(reference_vectors))),
    }


def synonym_metrics(query_vectors, query_labels, reference_vectors, reference_labels,
                    exclude_self: bool = False) -> dict:
    """Synonym retrieval (mAP) and concept mapping (Acc@1, MRR) by label (conceptual-grounding §5.1).

    Returns
    -------
    dict
        See :func:`ranking_metrics`.
    """
    return ranking_metrics(query_vectors, reference_vectors,
                           label_relevance(query_labels, reference_labels), exclude_self)


def _nanmean(values: np.ndarray) -> float:
    values = np.asarray(values, dtype=float)
    values = values[~np.isnan(values)]
    return float(values.mean()) if len(values) else float("nan")
