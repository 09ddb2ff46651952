"""bioviz.views.projection: stratified cap, PCA/UMAP coordinates, disk cache, Procrustes alignment."""

import numpy as np
import pytest

from bioviz.views import projection
from bioviz.errors import BiovizError
from bioviz.views.projection import (ProjectionParams, align_pair, pair_is_cached, procrustes_align, project, project_pair,
                               project_sample, stratified_sample)
from bioviz.space import Space, l2_normalise


def clustered_space(n_per_class=40, n_classes=4, dim=32, noise=0.3, seed=0, model_id="toy"):
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(n_classes, dim)) * 2
    labels = np.repeat(np.arange(n_classes), n_per_class)
    vectors = l2_normalise(centres[labels] + rng.normal(size=(len(labels), dim)) * noise)
    names = tuple(f"name {i}" for i in range(len(labels)))
    return Space(names, vectors, model_id), labels


def test_stratified_sample_keeps_all_rows_under_the_cap():
    labels = np.array([0, 0, 1, 2, 2, 2])
    assert stratified_sample(labels, 10).tolist() == list(range(6))


def test_stratified_sample_respects_cap_and_keeps_every_class():
    labels = np.array([0] * 900 + [1] * 90 + [2] * 10)
    rows = stratified_sample(labels, 100, seed=1)
    assert len(rows) == 100 and len(np.unique(rows)) == 100
    counts = np.bincount(labels[rows], minlength=3)
    assert (counts > 0).all()
    assert counts[0] > counts[1] > 0  # proportional, with a floor for the small classes
    assert np.array_equal(rows, stratified_sample(labels, 100, seed=1))
    assert not np.array_equal(rows, stratified_sample(labels, 100, seed=2))


def test_params_reject_bad_values():
    for kwargs in ({"method": "tsne"}, {"n_components": 4}, {"n_neighbors": 1}, {"min_dist": 2.0},
                   {"max_points": 3}):
        with pytest.raises(BiovizError):
            ProjectionParams(**kwargs)
    assert "n_neighbors 15" in ProjectionParams().caption()
    assert ProjectionParams(method="pca").caption().startswith("PCA 2D")


def test_procrustes_recovers_a_rotated_scaled_shifted_copy():
    rng = np.random.default_rng(0)
    reference = rng.normal(size=(50, 2))
    angle = 0.9
    rotation = np.array([[np.cos(angle), -np.sin(angle)], [np.sin(angle), np.cos(angle)]])
    moving = (reference @ rotation) * 3.0 + np.array([5.0, -2.0])
    aligned, disparity = procrustes_align(reference, moving)
    assert disparity < 1e-8
    np.testing.assert_allclose(aligned, reference, atol=1e-4)
    other, unrelated = procrustes_align(reference, rng.normal(size=(50, 2)))
    assert unrelated > 0.5
    # an unrelated layout keeps the reference's size, it is not shrunk to a blob
    radius = [np.sqrt(((c - c.mean(axis=0)) ** 2).sum(axis=1).mean()) for c in (reference, other)]
    assert radius[1] == pytest.approx(radius[0], rel=1e-4)
    with pytest.raises(ValueError):
        procrustes_align(reference, moving[:10])


def test_pca_projection_is_cached_on_disk(tmp_home, monkeypatch):
    space, _ = clustered_space()
    params = ProjectionParams(method="pca")
    coords = project(space, params)
    assert coords.shape == (len(space), 2) and coords.dtype == np.float32
    files = list((tmp_home / "projections").glob("*.npz"))
    assert len(files) == 1

    def fail(*args, **kwargs):
        raise AssertionError("recomputed instead of reading the cache")

    monkeypatch.setattr(projection, "pca_coordinates", fail)
    np.testing.assert_array_equal(project(space, params), coords)
    # Another row subset or other parameters are other cache entries.
    with pytest.raises(AssertionError):
        project(space, ProjectionParams(method="pca", n_components=3))


def test_project_pair_aligns_and_rejects_different_names(tmp_home):
    space_a, labels = clustered_space(seed=0)
    # Same names, a rotated copy of the vectors: the aligned PCA layouts coincide.
    rng = np.random.default_rng(5)
    q, _ = np.linalg.qr(rng.normal(size=(32, 32)))
    space_b = Space(space_a.names, l2_normalise(space_a.vectors @ q), "rotated")
    params = ProjectionParams(method="pca", max_points=100)
    assert not pair_is_cached(space_a, space_b, labels, params)
    messages = []
    pair = project_pair(space_a, space_b, labels, params, progress=lambda f, m: messages.append(m))
    assert len(pair.rows) == 100 and pair.coords_a.shape == pair.coords_b.shape == (100, 2)
    assert pair.disparity < 1e-6
    assert len(messages) == 3 and "rotated" in messages[1]
    assert pair_is_cached(space_a, space_b, labels, params)
    # One space at a time (the app caches each layout): the pair's rows and layouts.
    rows, coords_a = project_sample(space_a, labels, params)
    assert np.array_equal(rows, pair.rows) and np.allclose(coords_a, pair.coords_a)
    again = align_pair(pair.rows, pair.coords_a, pair.coords_b, params)
    assert again.disparity < 1e-6
    other = Space(tuple(reversed(space_a.names)), space_a.vectors, "other")
    with pytest.raises(BiovizError, match="different names"):
        project_pair(space_a, other, labels, params)


@pytest.mark.slow
def test_umap_keeps_classes_apart(tmp_home):
    """UMAP (cosine) of well-separated classes: each point's nearest 2-D neighbour shares its class."""
    space, labels = clustered_space(n_per_class=30, noise=0.2)
    params = ProjectionParams(method="umap", n_neighbors=10)
    coords = project(space, params)
    assert coords.shape == (len(space), 2) and np.isfinite(coords).all()
    distances = np.linalg.norm(coords[:, None] - coords[None], axis=2)
    np.fill_diagonal(distances, np.inf)
    assert (labels[distances.argmin(axis=1)] == labels).mean() > 0.95
    # Tiny inputs fall back to PCA instead of failing.
    assert project(space.subset([0, 1, 2]), params, use_cache=False).shape == (3, 2)


def test_fingerprint_depends_on_content_and_is_memoised():
    space, _ = clustered_space()
    first = projection.space_fingerprint(space)
    assert projection.space_fingerprint(space) == first
    same = Space(space.names, space.vectors.copy(), space.model_id)
    assert projection.space_fingerprint(same) == first  # content, not identity
    other = Space(space.names, space.vectors[::-1].copy(), space.model_id)
    assert projection.space_fingerprint(other) != first
    renamed = Space(space.names, space.vectors.copy(), "a run renamed by its user")
    assert projection.space_fingerprint(renamed) == first  # a label is not what the coordinates depend on
