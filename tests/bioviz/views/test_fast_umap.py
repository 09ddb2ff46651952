"""bioviz.views.fast_umap: faiss neighbour graph (exact and IVF), UMAP from it, numba cache."""

import numpy as np
import pytest

from bioviz.views import fast_umap


def clustered(n=400, dim=24, clusters=8, seed=0):
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(clusters, dim)) * 3
    labels = rng.integers(0, clusters, size=n)
    return (centres[labels] + rng.normal(size=(n, dim))).astype(np.float32), labels


def brute_force(vectors, k):
    unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    distances = 1.0 - unit @ unit.T
    order = np.argsort(distances, axis=1, kind="stable")[:, :k]
    return order, np.take_along_axis(distances, order, axis=1)


def test_exact_graph_equals_brute_force():
    vectors, _ = clustered(300)
    indices, distances = fast_umap.knn_graph(vectors, 10)
    expected_i, expected_d = brute_force(vectors, 10)
    assert indices.shape == distances.shape == (300, 10) and indices.dtype == np.int64
    assert np.array_equal(indices[:, 0], np.arange(300)) and np.all(distances[:, 0] == 0)
    assert np.allclose(distances, expected_d, atol=1e-5)
    # same neighbour sets (ties may be ordered differently)
    assert np.mean([set(a) == set(b) for a, b in zip(indices, expected_i)]) > 0.99


def test_duplicates_still_put_each_row_first():
    vectors, _ = clustered(50)
    vectors = np.vstack([vectors, vectors[:5]])  # rows 50..54 repeat rows 0..4
    indices, distances = fast_umap.knn_graph(vectors, 6)
    assert np.array_equal(indices[:, 0], np.arange(55))
    assert all(row not in indices[row, 1:] for row in range(55))
    assert 50 in indices[0] and distances[0, 1] == pytest.approx(0.0, abs=1e-6)


def test_approximate_index_beyond_the_exact_size_finds_most_neighbours():
    vectors, _ = clustered(2000, dim=32, clusters=20)
    indices, _ = fast_umap.knn_graph(vectors, 10, exact_max=500)  # IVF index
    expected, _ = brute_force(vectors, 10)
    recall = np.mean([len(set(a) & set(b)) / 10 for a, b in zip(indices, expected)])
    assert np.array_equal(indices[:, 0], np.arange(2000)) and recall > 0.9


def test_layout_shape_and_trustworthiness_close_to_plain_umap():
    import umap
    from sklearn.manifold import trustworthiness

    vectors, _ = clustered(400)
    fast = fast_umap.umap_layout(vectors, n_neighbors=10, seed=0)
    plain = umap.UMAP(n_neighbors=10, metric="cosine", init="pca", random_state=0, n_jobs=1).fit_transform(vectors)
    assert fast.shape == (400, 2) and fast.dtype == np.float32 and np.isfinite(fast).all()
    trust = [trustworthiness(vectors, coords, n_neighbors=10, metric="cosine") for coords in (fast, plain)]
    assert trust[0] >= trust[1] - 0.01


def test_numba_cache_is_switched_on_for_umap_functions(monkeypatch):
    from numba.core.caching import NullCache
    from umap import umap_

    monkeypatch.setattr(fast_umap, "_cache_enabled", False)
    fast_umap.enable_numba_cache()
    # umap-learn declares it without cache=True; compiled code now goes to numba's disk cache
    assert not isinstance(umap_.smooth_knn_dist._cache, NullCache)
    assert fast_umap.start_warm_up() is fast_umap.start_warm_up()  # one warm-up per process
    fast_umap.start_warm_up().join(timeout=600)
