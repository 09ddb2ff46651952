"""Large views' UMAP: the landmark path, its progress, cuML's selection, the cache key per method."""

import sys
import types

import numpy as np
import pytest

from bioviz.space import Space, l2_normalise
from bioviz.views import fast_umap
from bioviz.views.projection import ProjectionParams, cache_path, project, stratified_sample, umap_method


def clustered_space(n_per_class=150, n_classes=4, dim=24, seed=0):
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(n_classes, dim)) * 3
    labels = np.repeat(np.arange(n_classes), n_per_class)
    vectors = l2_normalise(centres[labels] + rng.normal(size=(len(labels), dim)))
    return Space(tuple(f"name {i}" for i in range(len(labels))), vectors.astype(np.float32), "toy"), labels


@pytest.fixture
def low_threshold(monkeypatch):
    """Views above 200 points take the landmark path, with 120 landmarks; no GPU."""
    monkeypatch.setattr(fast_umap, "LANDMARK_THRESHOLD", 200)
    monkeypatch.setattr(fast_umap, "LANDMARKS", 120)
    monkeypatch.setattr(fast_umap, "_cuml_present", lambda: False)


def test_landmark_path_lays_out_every_point_reproducibly_and_reports_progress(tmp_home, low_threshold):
    space, labels = clustered_space()
    params = ProjectionParams(method="umap", n_neighbors=10)
    assert umap_method(params, len(space)) == {"name": "landmarks", "landmarks": 120, "place_k": fast_umap.PLACE_K}
    calls = []
    coords = project(space, params, labels=labels, use_cache=False, progress=lambda *call: calls.append(call))
    assert coords.shape == (600, 2) and coords.dtype == np.float32 and np.isfinite(coords).all()
    again = project(space, params, labels=labels, use_cache=False)
    assert np.array_equal(coords, again)  # same seed, same layout
    done = [d for d, _, _ in calls]
    assert done == sorted(done) and done[-1] == calls[-1][1] and len({t for _, t, _ in calls}) == 1
    messages = " | ".join(m for _, _, m in calls)
    assert "epoch 1 of" in messages and "placing" in messages and "left" in messages
    # landmarks were sampled per class: each class has its own, and its points sit together
    landmarks = stratified_sample(labels, 120, params.seed)
    assert set(labels[landmarks]) == {0, 1, 2, 3}
    centres = np.array([coords[labels == c].mean(axis=0) for c in range(4)])
    nearest = np.argmin(((coords[:, None, :] - centres[None]) ** 2).sum(axis=2), axis=1)
    assert np.mean(nearest == labels) > 0.95


def test_placed_points_land_among_their_own_landmarks():
    rng = np.random.default_rng(1)
    landmarks = l2_normalise(np.repeat(np.eye(3, 8) * 5, 20, axis=0) + rng.normal(size=(60, 8)) * 0.3)
    layout = np.repeat(np.array([[0.0, 0.0], [10.0, 0.0], [0.0, 10.0]]), 20, axis=0) + rng.normal(size=(60, 2))
    points = l2_normalise(np.repeat(np.eye(3, 8) * 5, 30, axis=0) + rng.normal(size=(90, 8)) * 0.3)
    chunks = []
    placed = fast_umap.place_points(points, landmarks, layout, k=10, chunk=40,
                                    on_chunk=lambda done, total: chunks.append((done, total)))
    assert placed.shape == (90, 2) and chunks == [(40, 90), (80, 90), (90, 90)]
    expected = np.repeat(np.array([[0.0, 0.0], [10.0, 0.0], [0.0, 10.0]]), 30, axis=0)
    assert np.abs(placed - expected).max() < 3



def test_placement_through_the_ivf_index_lands_where_the_exact_search_does():
    """Above ``exact_max`` landmarks the placement searches an IVF index (1/64 of its lists probed)."""
    rng = np.random.default_rng(2)
    centres, spots = rng.normal(size=(6, 16)) * 3, np.arange(12.0).reshape(6, 2) * 10
    landmarks = l2_normalise(np.repeat(centres, 400, axis=0) + rng.normal(size=(2400, 16)))
    layout = np.repeat(spots, 400, axis=0) + rng.normal(size=(2400, 2))
    points = l2_normalise(np.repeat(centres, 50, axis=0) + rng.normal(size=(300, 16)))
    exact = fast_umap.place_points(points, landmarks, layout, k=10)
    approximate = fast_umap.place_points(points, landmarks, layout, k=10, exact_max=1000)
    assert approximate.shape == exact.shape and np.isfinite(approximate).all()
    assert np.abs(approximate - np.repeat(spots, 50, axis=0)).max() < 3
    assert np.abs(approximate - exact).max() < 2


def test_the_cache_key_tells_the_methods_apart(tmp_home, low_threshold, monkeypatch):
    import hashlib
    import json
    from dataclasses import asdict

    from bioviz.views.projection import CACHE_SCHEMA, _rows_fingerprint, space_fingerprint

    space, labels = clustered_space()
    params, rows = ProjectionParams(method="umap"), np.arange(len(space))
    assert umap_method(params, len(stratified_sample(labels, 200, 0))) == {"name": "plain"}
    assert umap_method(ProjectionParams(method="pca"), len(space)) is None
    landmark_key = cache_path(space, rows, params)
    monkeypatch.setattr(fast_umap, "LANDMARK_THRESHOLD", 10_000)
    plain_key = cache_path(space, rows, params)
    assert plain_key != landmark_key
    # plain umap-learn keeps the key it always had: layouts cached before are still found
    payload = json.dumps({"schema": CACHE_SCHEMA, "space": space_fingerprint(space), "rows": _rows_fingerprint(rows),
                          "params": asdict(params)}, sort_keys=True)
    assert plain_key.stem == hashlib.sha256(payload.encode()).hexdigest()[:24]
    monkeypatch.setattr(fast_umap, "LANDMARK_THRESHOLD", 200)
    monkeypatch.setattr(fast_umap, "LANDMARKS", 150)  # another landmark count: another layout
    assert cache_path(space, rows, params) not in (plain_key, landmark_key)


@pytest.fixture
def fake_cuml(monkeypatch):
    """A stand-in ``cuml.manifold.UMAP`` that records its settings and returns fixed coordinates."""
    made = []

    class UMAP:
        def __init__(self, **settings):
            made.append(settings)

        def fit_transform(self, vectors):
            return np.arange(len(vectors) * 2, dtype=np.float64).reshape(-1, 2)

    cuml = types.ModuleType("cuml")
    cuml.manifold = types.ModuleType("cuml.manifold")
    cuml.manifold.UMAP = UMAP
    monkeypatch.setitem(sys.modules, "cuml", cuml)
    monkeypatch.setitem(sys.modules, "cuml.manifold", cuml.manifold)
    fast_umap._cuml_present.cache_clear()
    yield made
    fast_umap._cuml_present.cache_clear()


def test_cuml_is_used_when_present_with_a_gpu(tmp_home, fake_cuml, monkeypatch):
    monkeypatch.setattr(fast_umap, "_cuda_device", lambda: True)
    space, labels = clustered_space(n_per_class=10)
    params = ProjectionParams(method="umap", n_neighbors=12, min_dist=0.2, seed=3)
    assert umap_method(params, len(space)) == {"name": "cuml"}
    plain_key = cache_path(space, np.arange(len(space)), params)
    coords = project(space, params, labels=labels)
    assert coords.dtype == np.float32 and np.array_equal(coords[:, 0], np.arange(0, 80, 2))
    assert fake_cuml == [{"n_neighbors": 12, "n_components": 2, "min_dist": 0.2, "metric": "cosine",
                          "random_state": 3, "output_type": "numpy"}]
    fast_umap._cuml_present.cache_clear()
    monkeypatch.setattr(fast_umap, "_cuda_device", lambda: False)  # cuML installed, no GPU: the CPU paths
    assert umap_method(params, len(space)) == {"name": "plain"}
    assert cache_path(space, np.arange(len(space)), params) != plain_key


def test_no_cuml_means_the_cpu_paths():
    fast_umap._cuml_present.cache_clear()
    assert fast_umap.cuml_available() is False  # not installed here


def test_a_pair_of_large_views_fills_the_bar_in_order(tmp_home, low_threshold):
    from bioviz.views.projection import project_pair

    space_a, labels = clustered_space(n_per_class=60)
    space_b = Space(space_a.names, space_a.vectors[:, ::-1].copy(), "reversed")
    calls = []
    pair = project_pair(space_a, space_b, labels, ProjectionParams(method="umap", n_neighbors=8),
                        progress=lambda fraction, message: calls.append((fraction, message)))
    fractions = [f for f, _ in calls]
    assert pair.coords_a.shape == pair.coords_b.shape == (240, 2)
    assert fractions == sorted(fractions) and fractions[0] == 0.0 and fractions[-1] == 1.0
    assert any("toy: layout of 120 landmarks: epoch" in m for _, m in calls)
    assert any("reversed: placing points" in m for _, m in calls)
