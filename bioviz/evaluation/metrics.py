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
from scipy.stats import rankdata

from bioviz.space import l2_normalise

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


def _chunk_stats(scores: np.ndarray, relevant: np.ndarray, with_ap: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """Per-query AP and first-relevant rank for one chunk (see the module's tie rules)."""
    if relevant.shape != scores.shape:
        raise ValueError(f"relevance has shape {relevant.shape}, scores {scores.shape}")
    n_rel = relevant.sum(axis=1)
    missing = n_rel == 0
    # Rank of the first relevant reference: 1 + non-relevant references scoring at least as
    # high as the best relevant one.
    best_relevant = np.where(relevant, scores, -np.inf).max(axis=1)
    beaten_by = ((scores >= best_relevant[:, None]) & ~relevant).sum(axis=1)
    first_rank = 1.0 + beaten_by
    first_rank[missing] = np.nan
    if not with_ap:
        return np.full(len(n_rel), np.nan), first_rank
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
    ap[missing] = np.nan
    return ap, first_rank


def ranking_stats(query_vectors, reference_vectors, relevance, *, exclude_self: bool = False,
                  reference_groups=None, with_ap: bool = True) -> tuple[np.ndarray, np.ndarray]:
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
    reference_groups : array (m,), optional
        Candidate index of each reference row, non-decreasing (rows of one candidate
        together). A candidate with several names (a concept) scores the maximum similarity
        of its names and is ranked once; ``relevance`` is then over candidates.
    with_ap : bool
        Compute AP (a row-wise sort); False skips it (NaN) when only ranks are needed,
        which costs one comparison pass instead of a sort.

    Returns
    -------
    (ap, first_rank) : two float arrays (n,)
        NaN for queries with no relevant reference.
    """
    queries = _as_matrix(query_vectors)
    references = _as_matrix(reference_vectors)
    n, m = len(queries), len(references)
    if exclude_self and (n != m or reference_groups is not None):
        raise ValueError(f"exclude_self needs the queries to be the references ({n} != {m}), ungrouped")
    group_starts = None
    if reference_groups is not None:
        groups = np.asarray(reference_groups, dtype=np.int64)
        if len(groups) != m or (m and np.any(np.diff(groups) < 0)):
            raise ValueError("reference_groups must give one non-decreasing group per reference")
        group_starts = np.flatnonzero(np.r_[True, groups[1:] != groups[:-1]]) if m else groups
    ap = np.full(n, np.nan)
    first_rank = np.full(n, np.nan)
    if n == 0 or m == 0:
        return ap, first_rank
    for start, stop in _chunks(n, m):
        scores = queries[start:stop] @ references.T
        if group_starts is not None:
            scores = np.maximum.reduceat(scores, group_starts, axis=1)
        relevant = np.array(relevance(start, stop), dtype=bool, copy=True)
        if exclude_self:
            rows = np.arange(stop - start)
            scores[rows, rows + start] = -np.inf  # ranked after everything, never counted
            relevant[rows, rows + start] = False
        ap[start:stop], first_rank[start:stop] = _chunk_stats(scores, relevant, with_ap)
    return ap, first_rank


def average_precisions(query_vectors, query_labels, reference_vectors, reference_labels, *,
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
                          label_relevance(query_labels, reference_labels), exclude_self=exclude_self)
    return ap


def class_retrieval_map(query_vectors, query_labels, reference_vectors, reference_labels, *,
                        exclude_self: bool = False) -> float:
    """Mean average precision of retrieving references of the query's class.

    Semantic similarity ranking (higher-level-semantics §4.2): test names rank all training
    names; synonym retrieval (conceptual-grounding §5.1) is the same with concepts as
    classes. Queries with no relevant reference are left out (NaN when none is left).
    """
    ap = average_precisions(query_vectors, query_labels, reference_vectors, reference_labels,
                            exclude_self=exclude_self)
    return _nanmean(ap)


def per_class_map(ap: np.ndarray, query_labels) -> dict:
    """Mean of per-query APs within each query class.

    Returns
    -------
    dict
        ``label -> mAP`` for every label with at least one scored query.

    >>> per_class_map([1.0, 0.5, float("nan")], ["a", "a", "b"])  # b's only query was not scored
    {'a': 0.75}
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


def ranking_metrics(query_vectors, reference_vectors, relevance, *, exclude_self: bool = False,
                    reference_groups=None, with_ap: bool = True, n_boot: int = 1000, seed: int = 0,
                    per_query: bool = False) -> dict:
    """mAP, Acc@1 and MRR of one ranking task, with bootstrap intervals and sample sizes.

    Parameters
    ----------
    query_vectors, reference_vectors : arrays
        L2-normalised vectors.
    relevance : callable
        From :func:`label_relevance` or :func:`matrix_relevance`.
    exclude_self, reference_groups, with_ap : optional
        See :func:`ranking_stats`.
    n_boot : int
        Bootstrap resamples of the queries for the 95% intervals (0: no intervals).
    seed : int
        Seed of the bootstrap.
    per_query : bool
        Also return ``per_query``: ``{"ap": (n,), "rank": (n,)}`` arrays (NaN = not scored).

    Returns
    -------
    dict
        ``map``, ``acc1``, ``mrr`` (floats, NaN when nothing could be scored; ``map`` absent
        without ``with_ap``), ``ci`` (``metric -> [low, high]``), ``queries`` (scored),
        ``skipped`` (queries without a relevant reference), ``references`` (candidates).
    """
    ap, rank = ranking_stats(query_vectors, reference_vectors, relevance, exclude_self=exclude_self,
                             reference_groups=reference_groups, with_ap=with_ap)
    scored = ~np.isnan(rank)
    # (named apart from the ``per_query`` flag, which it used to shadow)
    values_of = {"acc1": (rank[scored] == 1).astype(float), "mrr": 1.0 / rank[scored]}
    if with_ap:
        values_of = {"map": ap[scored], **values_of}
    n_refs = len(np.asarray(reference_vectors)) if reference_groups is None else len(np.unique(reference_groups))
    result: dict = {name: _nanmean(values) for name, values in values_of.items()}
    result["ci"] = {name: bootstrap_mean_ci(values, n_boot, seed) for name, values in values_of.items()}
    result.update(queries=int(scored.sum()), skipped=int((~scored).sum()), references=int(n_refs))
    if per_query:
        result["per_query"] = {"ap": ap, "rank": rank}
    return result


def bootstrap_mean_ci(values, n_boot: int = 1000, seed: int = 0, level: float = 0.95) -> list[float]:
    """Percentile bootstrap interval of a mean (resampling the values with replacement).

    Returns
    -------
    list of two floats
        ``[low, high]``; NaNs when there are no values or ``n_boot`` is 0.
    """
    values = np.asarray(values, dtype=float)
    values = values[~np.isnan(values)]
    if not len(values) or n_boot <= 0:
        return [float("nan"), float("nan")]
    rng = np.random.default_rng(seed)
    means = values[rng.integers(0, len(values), size=(n_boot, len(values)))].mean(axis=1)
    tail = (1 - level) / 2 * 100
    low, high = np.percentile(means, [tail, 100 - tail])
    return [float(low), float(high)]


def _nanmean(values: np.ndarray) -> float:
    values = np.asarray(values, dtype=float)
    values = values[~np.isnan(values)]
    return float(values.mean()) if len(values) else float("nan")


def roc_auc(positive_scores, negative_scores) -> float:
    """ROC-AUC of scores separating positives from negatives (Mann-Whitney form).

    The probability that a random positive scores higher than a random negative; a tie
    counts one half (as in ``sklearn.metrics.roc_auc_score``). NaN when a side is empty.

    >>> roc_auc([0.9, 0.8], [0.1, 0.8])  # 3 wins and a tie out of 4 pairs
    0.875
    """
    return float(_auc_rows(np.asarray(positive_scores, float)[None, :],
                           np.asarray(negative_scores, float)[None, :])[0])


def _auc_rows(pos: np.ndarray, neg: np.ndarray) -> np.ndarray:
    """Row-wise AUC of ``pos`` (b, p) against ``neg`` (b, q) by average ranks."""
    n_pos, n_neg = pos.shape[1], neg.shape[1]
    if n_pos == 0 or n_neg == 0:
        return np.full(pos.shape[0], np.nan)
    ranks = rankdata(np.concatenate([pos, neg], axis=1), axis=1)  # ties get average ranks
    u = ranks[:, :n_pos].sum(axis=1) - n_pos * (n_pos + 1) / 2
    return u / (n_pos * n_neg)


def hierarchy_auc(similarities, distances, n_boot: int = 1000, seed: int = 0) -> dict:
    """ROC-AUC of cosine similarity separating pairs at distance i from pairs at distance j.

    HiPrBERT §4.2 (Table 3): distances are 0 synonyms, 1 siblings, 2 parent-child,
    3 other; for every ``i < j`` the closer pairs are the positives. Intervals resample the
    pairs of each distance separately (stratified percentile bootstrap); every AUC and their
    mean are read from the same resamples, so the mean AUC has an interval too.

    Parameters
    ----------
    similarities : array (n,)
        Cosine similarity of each pair.
    distances : array (n,)
        Distance class of each pair.

    Returns
    -------
    dict
        ``auc`` (``"i-j" -> AUC`` for pairs of distances present), ``ci`` (``"i-j" ->
        [low, high]`` and ``mean_auc``), ``mean_auc`` over the pairs of distances, ``pairs``
        (``distance -> count``).
    """
    sims = np.asarray(similarities, dtype=float)
    dist = np.asarray(distances)
    present = sorted(int(d) for d in np.unique(dist))
    auc = {key: float(values[0]) for key, values in auc_by_distance(sims, dist, None).items()}
    ci = {key: [float("nan"), float("nan")] for key in [*auc, "mean_auc"]}
    if n_boot > 0 and auc:
        boot = auc_by_distance(sims, dist, stratified_resamples(dist, n_boot, seed))
        for key, values in boot.items():
            ci[key] = [float(v) for v in np.percentile(values, [2.5, 97.5])]
        ci["mean_auc"] = [float(v) for v in np.percentile(np.mean(list(boot.values()), axis=0), [2.5, 97.5])]
    return {
        "auc": auc,
        "ci": ci,
        "mean_auc": float(np.mean(list(auc.values()))) if auc else float("nan"),
        "pairs": {int(d): int((dist == d).sum()) for d in present},
    }


def stratified_resamples(distances, n_boot: int, seed: int = 0) -> dict[int, np.ndarray]:
    """Bootstrap resamples of pair rows drawn within each distance class.

    Returns
    -------
    dict
        ``distance -> (n_boot, pairs at that distance)`` row indices into ``distances``.
        Two models' similarities of the same pairs resampled with these rows give paired
        intervals (:mod:`bioviz.evaluation.paired`).
    """
    dist = np.asarray(distances)
    rng = np.random.default_rng(seed)
    out = {}
    for d in sorted(int(d) for d in np.unique(dist)):
        rows = np.flatnonzero(dist == d)
        out[d] = rows[rng.integers(0, len(rows), (n_boot, len(rows)))]
    return out


def auc_by_distance(similarities, distances, resamples: dict | None) -> dict[str, np.ndarray]:
    """AUC of every pair of distances ``i < j``, on the pairs as given or on each resample.

    Parameters
    ----------
    similarities, distances : array (n,)
    resamples : dict or None
        From :func:`stratified_resamples`; None scores the pairs once, as given.

    Returns
    -------
    dict
        ``"i-j" -> (b,)`` AUCs (``b`` = 1 without resamples).
    """
    sims = np.asarray(similarities, dtype=float)
    dist = np.asarray(distances)
    present = sorted(int(d) for d in np.unique(dist))
    rows = resamples or {d: np.flatnonzero(dist == d)[None, :] for d in present}
    out = {}
    for a_index, i in enumerate(present):
        for j in present[a_index + 1:]:
            out[f"{i}-{j}"] = _auc_rows(sims[rows[i]], sims[rows[j]])
    return out


def spearman(x, y) -> float:
    """Spearman's rank correlation (average ranks for ties); NaN with fewer than 3 pairs.

    >>> spearman([1, 2, 3, 4], [10, 20, 30, 25])
    0.8
    >>> spearman([1, 2], [1, 2])
    nan
    """
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    if len(x) < 3:
        return float("nan")
    return float(_spearman_rows(x[None, :], y[None, :])[0])


def spearman_rows(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Row-wise Spearman correlation of two ``(b, n)`` arrays (NaN where a row is all ties).

    >>> spearman_rows(np.array([[1.0, 2.0, 3.0]]), np.array([[3.0, 2.0, 1.0]]))
    array([-1.])
    """
    return _spearman_rows(np.asarray(x, dtype=float), np.asarray(y, dtype=float))


def _spearman_rows(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Row-wise Spearman correlation: Pearson correlation of average ranks."""
    rx = rankdata(x, axis=1)
    ry = rankdata(y, axis=1)
    rx -= rx.mean(axis=1, keepdims=True)
    ry -= ry.mean(axis=1, keepdims=True)
    denominator = np.sqrt((rx * rx).sum(axis=1) * (ry * ry).sum(axis=1))
    with np.errstate(invalid="ignore", divide="ignore"):
        return (rx * ry).sum(axis=1) / denominator


def spearman_bootstrap_ci(x, y, *, n_boot: int = 1000, seed: int = 0, level: float = 0.95) -> list[float]:
    """Percentile bootstrap interval of Spearman's rho, resampling pairs with replacement.

    Resamples where every value ties (rho undefined) are left out.
    """
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    if len(x) < 3 or n_boot <= 0:
        return [float("nan"), float("nan")]
    rng = np.random.default_rng(seed)
    rows = rng.integers(0, len(x), size=(n_boot, len(x)))
    rhos = _spearman_rows(x[rows], y[rows])
    rhos = rhos[~np.isnan(rhos)]
    if not len(rhos):
        return [float("nan"), float("nan")]
    tail = (1 - level) / 2 * 100
    low, high = np.percentile(rhos, [tail, 100 - tail])
    return [float(low), float(high)]


class CrossClassRetention:
    """How much of a base model's similarity structure between classes a trained model keeps.

    Spearman correlation between base and trained cosine similarities of name pairs from
    different classes. Class-based training is meant to pull each class together; what it
    does between classes is what relatedness benchmarks (MayoSRS, UMNSRS) see, and a class
    metric such as mAP cannot. Computed on a split's own names (the trainer uses the
    validation names), so a hyperparameter choice that weighs it never sees benchmark pairs.

    Parameters
    ----------
    base_vectors : array (n, d)
        The base model's vectors of the names.
    labels : array (n,)
        Class index per name; only pairs with different labels count.
    max_pairs : int
        Above this many pairs, a fixed random sample of this many (drawn with replacement)
        keeps each call cheap.
    seed : int
        Seed of that sample.

    Examples
    --------
    >>> base = np.random.default_rng(0).normal(size=(6, 4))
    >>> probe = CrossClassRetention(base, labels=[0, 0, 1, 1, 2, 2])
    >>> round(probe(3 * base), 6)  # scaling keeps every cosine: the same cross-class order
    1.0
    """

    def __init__(self, base_vectors, labels, max_pairs: int = 200_000, seed: int = 0):
        self.left, self.right = _cross_class_pairs(np.asarray(labels), max_pairs, seed)
        self.base_cosines = self._cosines(base_vectors)

    def _cosines(self, vectors, chunk: int = 16_384) -> np.ndarray:
        # In chunks of pairs: gathering both ends of 200k pairs at once copies two 200k x d
        # arrays (over a gigabyte at d = 768), and this runs every epoch.
        x = l2_normalise(vectors)
        out = np.empty(len(self.left), dtype=np.float32)
        for start in range(0, len(out), chunk):
            left, right = self.left[start : start + chunk], self.right[start : start + chunk]
            out[start : start + chunk] = np.einsum("ij,ij->i", x[left], x[right])
        return out

    def __call__(self, trained_vectors) -> float:
        """Spearman's rho between base and trained cross-class similarities (NaN under 3 pairs)."""
        return spearman(self.base_cosines, self._cosines(trained_vectors))


def _cross_class_pairs(labels: np.ndarray, max_pairs: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Index pairs ``i < j`` with different labels: all of them, or a fixed sample of ``max_pairs``.

    The sample is drawn directly, never by listing all ``n (n - 1) / 2`` pairs first: a
    level trained with all its names (or on synonym sets) has tens of thousands of
    validation names, and that list would take gigabytes.
    """
    n = len(labels)
    if n * (n - 1) // 2 <= max_pairs:
        left, right = np.triu_indices(n, 1)
        cross = labels[left] != labels[right]
        return left[cross], right[cross]
    rng = np.random.default_rng(seed)
    found_left, found_right, found = [], [], 0
    for _ in range(20):  # a few rounds suffice unless nearly every name is in one class
        i, j = rng.integers(n, size=(2, 2 * max_pairs))
        keep = (i != j) & (labels[i] != labels[j])
        found_left.append(np.minimum(i, j)[keep])
        found_right.append(np.maximum(i, j)[keep])
        found += int(keep.sum())
        if found >= max_pairs:
            break
    return np.concatenate(found_left)[:max_pairs], np.concatenate(found_right)[:max_pairs]
