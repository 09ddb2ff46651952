"""Ranking metrics against hand-computed cases and scikit-learn's tie-aware LRAP."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.metrics import label_ranking_average_precision_score

from bioviz.evaluation import metrics


def at_angles(degrees) -> np.ndarray:
    """Unit 2-D vectors; the query [1, 0] has cosine cos(angle) with each."""
    radians = np.deg2rad(np.asarray(degrees, dtype=float))
    return np.stack([np.cos(radians), np.sin(radians)], axis=1).astype(np.float32)


QUERY = at_angles([0])


def by_label(query_vectors, query_labels, reference_vectors, reference_labels, exclude_self=False):
    """Ranking metrics where a reference is relevant when it shares the query's label."""
    relevance = metrics.label_relevance(query_labels, reference_labels)
    return metrics.ranking_metrics(query_vectors, reference_vectors, relevance, exclude_self=exclude_self)


def test_perfect_ranking_scores_one():
    refs = at_angles([10, 20, 30, 40])
    result = by_label(QUERY, [1], refs, [1, 1, 0, 0])
    assert result["map"] == pytest.approx(1.0)
    assert result["mrr"] == pytest.approx(1.0)
    assert result["acc1"] == pytest.approx(1.0)
    assert result["queries"] == 1 and result["skipped"] == 0 and result["references"] == 4


def test_reversed_ranking_known_value():
    # Relevant references at ranks 3 and 4 of 4: AP = (1/3 + 2/4) / 2 = 5/12, RR = 1/3.
    refs = at_angles([10, 20, 30, 40])
    result = by_label(QUERY, [1], refs, [0, 0, 1, 1])
    assert result["map"] == pytest.approx(5 / 12)
    assert result["mrr"] == pytest.approx(1 / 3)
    assert result["acc1"] == 0.0


def test_all_tied_counts_against_the_query():
    # Every score equal: AP = n_relevant / n_references, first rank = 1 + non-relevant.
    refs = at_angles([30, 30, 30, 30, 30])
    result = by_label(QUERY, [1], refs, [1, 0, 1, 0, 0])
    assert result["map"] == pytest.approx(2 / 5)
    assert result["mrr"] == pytest.approx(1 / 4)
    assert result["acc1"] == 0.0


def test_relevant_tied_with_relevant_does_not_hurt():
    refs = at_angles([10, 10, 50])
    result = by_label(QUERY, [1], refs, [1, 1, 0])
    assert result["map"] == pytest.approx(1.0)
    assert result["mrr"] == pytest.approx(1.0)


def test_tie_between_relevant_and_irrelevant():
    # Ranks: rel@10deg first, then {rel, irr} tied at 20deg: precision of the tied relevant = 2/3.
    refs = at_angles([10, 20, 20, 60])
    ap = metrics.average_precisions(QUERY, [1], refs, [1, 1, 0, 0])
    assert ap[0] == pytest.approx((1 + 2 / 3) / 2)
    result = by_label(QUERY, [1], at_angles([20, 20, 60]), [1, 0, 0])
    assert result["mrr"] == pytest.approx(1 / 2)
    assert result["acc1"] == 0.0


def test_matches_sklearn_lrap_with_ties():
    rng = np.random.default_rng(3)
    queries = rng.normal(size=(40, 6)).astype(np.float32)
    refs = rng.normal(size=(30, 6)).astype(np.float32)
    refs[5] = refs[4]  # exact duplicate references tie for every query
    refs[12] = refs[4]
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)
    refs /= np.linalg.norm(refs, axis=1, keepdims=True)
    q_labels = rng.integers(0, 4, size=40)
    r_labels = rng.integers(0, 4, size=30)
    ap = metrics.average_precisions(queries, q_labels, refs, r_labels)
    truth = q_labels[:, None] == r_labels[None, :]
    scores = queries @ refs.T
    expected = [label_ranking_average_precision_score(truth[i:i + 1], scores[i:i + 1]) for i in range(40)]
    np.testing.assert_allclose(ap, expected, rtol=1e-6)


def test_chunking_gives_same_result(monkeypatch):
    rng = np.random.default_rng(0)
    vectors = rng.normal(size=(50, 4)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    labels = rng.integers(0, 5, size=50)
    whole = metrics.ranking_stats(vectors, vectors, metrics.label_relevance(labels, labels), exclude_self=True)
    monkeypatch.setattr(metrics, "_CHUNK_ENTRIES", 120)  # 2 queries per chunk
    chunked = metrics.ranking_stats(vectors, vectors, metrics.label_relevance(labels, labels), exclude_self=True)
    np.testing.assert_allclose(whole[0], chunked[0])
    np.testing.assert_allclose(whole[1], chunked[1])


def test_exclude_self_and_queries_without_relevant():
    refs = at_angles([0, 5, 90])
    # Row 0's only classmate is row 1; row 2 is alone in its class once itself is excluded.
    result = by_label(refs, [0, 0, 1], refs, [0, 0, 1], exclude_self=True)
    assert result["map"] == pytest.approx(1.0)
    assert result["queries"] == 2 and result["skipped"] == 1
    # Without exclusion each query finds itself first.
    assert metrics.class_retrieval_map(refs, [0, 0, 1], refs, [0, 0, 1]) == pytest.approx(1.0)
    with pytest.raises(ValueError):
        metrics.ranking_stats(refs[:2], refs, metrics.label_relevance([0, 0], [0, 0, 1]), exclude_self=True)


def test_nothing_scored_is_nan():
    assert np.isnan(metrics.class_retrieval_map(QUERY, [7], at_angles([10]), [1]))


def test_hypernym_mrr():
    # Query 0 (class 0): its hypernym is ranked 2nd; query 1 (class 1): 1st. MRR = (1/2 + 1)/2.
    queries = at_angles([0, 90])
    hypernyms = at_angles([10, 30, 80])
    result = metrics.ranking_metrics(queries, hypernyms, metrics.label_relevance([0, 1], [2, 0, 1]), with_ap=False)
    assert result["mrr"] == pytest.approx(0.75) and "map" not in result


def test_matrix_relevance_several_parents():
    refs = at_angles([10, 20, 30])
    relevance = np.array([[False, True, True]])
    dense = metrics.ranking_metrics(QUERY, refs, metrics.matrix_relevance(relevance))
    from scipy import sparse
    sparse_result = metrics.ranking_metrics(QUERY, refs, metrics.matrix_relevance(sparse.csr_matrix(relevance)))
    assert dense["mrr"] == pytest.approx(0.5)
    assert dense["map"] == pytest.approx((1 / 2 + 2 / 3) / 2)
    assert sparse_result == dense


def test_per_class_map():
    ap = np.array([1.0, 0.5, np.nan, 0.25])
    assert metrics.per_class_map(ap, [0, 0, 1, 2]) == {0: 0.75, 2: 0.25}


def test_grouped_references_rank_concepts_once():
    # Candidate 0 has names at 10 and 70 degrees (max = cos 10), candidate 1 at 20, candidate 2 at 30.
    refs = at_angles([10, 70, 20, 30])
    groups = [0, 0, 1, 2]
    relevance = metrics.matrix_relevance(np.array([[False, False, True]]))
    result = metrics.ranking_metrics(QUERY, refs, relevance, reference_groups=groups, with_ap=False)
    assert result["mrr"] == pytest.approx(1 / 3)  # candidate 2 is third, not fourth
    assert result["references"] == 3 and "map" not in result
    with pytest.raises(ValueError):
        metrics.ranking_stats(QUERY, refs, relevance, reference_groups=[1, 0, 0, 2])


def test_bootstrap_interval_contains_the_mean():
    values = np.random.default_rng(1).random(200)
    low, high = metrics.bootstrap_mean_ci(values, n_boot=500, seed=0)
    assert low < values.mean() < high
    assert metrics.bootstrap_mean_ci(values, n_boot=500, seed=0) == [low, high]  # seeded
    assert np.isnan(metrics.bootstrap_mean_ci([], n_boot=10)[0])


def test_roc_auc_matches_sklearn_with_ties():
    from sklearn.metrics import roc_auc_score
    pos = np.array([0.9, 0.5, 0.5, 0.3])
    neg = np.array([0.5, 0.2, 0.1])
    expected = roc_auc_score([1] * 4 + [0] * 3, np.r_[pos, neg])
    assert metrics.roc_auc(pos, neg) == pytest.approx(expected)
    assert metrics.roc_auc([1.0, 2.0], [0.0]) == 1.0
    assert metrics.roc_auc([0.0], [1.0, 2.0]) == 0.0


def test_hierarchy_auc_perfect_and_reversed():
    sims = np.array([0.9, 0.8, 0.6, 0.5, 0.3, 0.2])
    result = metrics.hierarchy_auc(sims, [0, 0, 1, 1, 3, 3], n_boot=50)
    assert result["auc"] == {"0-1": 1.0, "0-3": 1.0, "1-3": 1.0}
    assert result["pairs"] == {0: 2, 1: 2, 3: 2}
    assert result["mean_auc"] == 1.0
    reversed_result = metrics.hierarchy_auc(sims[::-1], [0, 0, 1, 1, 3, 3], n_boot=0)
    assert reversed_result["auc"]["0-3"] == 0.0
    assert np.isnan(reversed_result["ci"]["0-3"][0])


def test_spearman_matches_scipy():
    from scipy.stats import spearmanr
    rng = np.random.default_rng(2)
    x = rng.random(30)
    y = np.round(x + rng.normal(scale=0.3, size=30), 1)  # with ties
    assert metrics.spearman(x, y) == pytest.approx(spearmanr(x, y).statistic)
    assert metrics.spearman([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    low, high = metrics.spearman_bootstrap_ci(x, y, n_boot=300)
    assert low < metrics.spearman(x, y) < high
    assert np.isnan(metrics.spearman([1, 2], [1, 2]))


def test_cross_class_retention_is_one_for_the_base_and_lower_for_a_scramble():
    from bioviz.evaluation.metrics import CrossClassRetention

    rng = np.random.default_rng(0)
    labels = np.repeat(np.arange(4), 10)
    base = rng.normal(size=(40, 8))
    probe = CrossClassRetention(base, labels)
    assert probe(base) == pytest.approx(1.0)
    assert probe(3.0 * base) == pytest.approx(1.0)  # cosines: the scale does not matter
    assert abs(probe(rng.normal(size=(40, 8)))) < 0.2
    # Only pairs across classes count.
    assert len(probe.left) == 40 * 39 // 2 - 4 * 45
    assert (labels[probe.left] != labels[probe.right]).all()


def test_cross_class_retention_samples_a_fixed_subset_of_pairs():
    from bioviz.evaluation.metrics import CrossClassRetention

    rng = np.random.default_rng(1)
    labels = np.arange(100) % 5
    base = rng.normal(size=(100, 6))
    first, second = CrossClassRetention(base, labels, max_pairs=500), CrossClassRetention(base, labels, max_pairs=500)
    assert len(first.left) == 500 and np.array_equal(first.left, second.left)
    assert (labels[first.left] != labels[first.right]).all() and (first.left < first.right).all()
    assert first(base) == pytest.approx(1.0)
    assert np.isnan(CrossClassRetention(base[:2], labels[:2])(base[:2]))


def test_cross_class_retention_never_lists_every_pair_of_a_large_split(monkeypatch):
    from bioviz.evaluation.metrics import CrossClassRetention

    # 60,000 names would mean 1.8e9 pairs (tens of GB as index arrays): they must be sampled.
    monkeypatch.setattr(np, "triu_indices", lambda *a, **k: pytest.fail("listed every pair"))
    labels = np.arange(60_000) % 50
    base = np.random.default_rng(2).normal(size=(60_000, 4)).astype(np.float32)
    probe = CrossClassRetention(base, labels, max_pairs=10_000)
    assert len(probe.left) == 10_000 and probe(base) == pytest.approx(1.0)
