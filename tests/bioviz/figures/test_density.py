"""Class densities on a 2-D map (labelled maps) and axis ranges fitted to the bulk of a layout."""

import time

import numpy as np

from bioviz.figures.density import bulk_range, class_densities


def blobs(n_per_class: int, centres, sd: float = 0.5, seed: int = 0):
    rng = np.random.default_rng(seed)
    coords = np.vstack([rng.normal(c, sd, (n_per_class, 2)) for c in centres])
    labels = np.repeat(np.arange(len(centres)), n_per_class)
    return coords, labels


def test_each_class_peaks_at_its_centre_and_its_contour_holds_half_of_it():
    centres = [(0, 0), (6, 1), (2, 7)]
    coords, labels = blobs(400, centres)
    densities = class_densities(coords, labels, (-3, 9), (-3, 10))
    assert sorted(d.class_index for d in densities) == [0, 1, 2]
    for d in densities:
        assert np.hypot(*(np.asarray(d.peak) - centres[d.class_index])) < 0.5
        # the cells above the contour level hold about half of the class's (smoothed) density
        share = d.z[d.z >= d.level].sum() / d.z.sum()
        assert 0.45 <= share <= 0.6


def test_small_classes_and_points_outside_the_view_get_no_density():
    coords, labels = blobs(200, [(0, 0)])
    coords = np.r_[coords, [[50, 50]] * 5, [[0.1, 0.1]] * 3]
    labels = np.r_[labels, [1] * 5, [2] * 3]
    densities = class_densities(coords, labels, (-3, 3), (-3, 3))
    assert [d.class_index for d in densities] == [0]  # class 1 lies outside, class 2 has 3 names


def test_a_hundred_thousand_names_take_well_under_a_second():
    rng = np.random.default_rng(1)
    centres = rng.normal(scale=4, size=(23, 2))
    labels = rng.integers(0, 23, 100_000)
    coords = centres[labels] + rng.normal(scale=0.8, size=(100_000, 2))
    start = time.perf_counter()
    densities = class_densities(coords, labels, bulk_range(coords[:, 0]), bulk_range(coords[:, 1]))
    assert time.perf_counter() - start < 1.0 and len(densities) == 23
    assert sum(d.z.size for d in densities) < 23 * 80 * 80 / 4  # cropped grids, not the whole map per class


def test_bulk_range_leaves_far_outliers_out_and_keeps_a_nearby_cluster():
    rng = np.random.default_rng(2)
    cloud = rng.normal(0, 1, 5000)
    low, high = bulk_range(np.r_[cloud, [80.0, -60.0]])
    assert -5 < low < -2 and 2 < high < 5
    beside = np.r_[cloud, rng.normal(3.5, 0.1, 40)]  # a small class just beside the cloud stays in view
    assert bulk_range(beside)[1] > 3.6
    low, high = bulk_range(np.full(10, 3.0))  # one value: a range around it, not an empty one
    assert low < 3.0 < high
