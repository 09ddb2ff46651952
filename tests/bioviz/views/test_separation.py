"""bioviz.views.separation: per-class mAP and silhouette, baseline vs compared."""

import numpy as np
import pytest

from bioviz.errors import BiovizError
from bioviz.views.separation import compare_separation, per_class_scores
from bioviz.space import Space, l2_normalise


def spaces(noise_b=0.05, noise_a=8.0, n_per_class=20, seed=0):
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(3, 16)) * 3
    labels = np.repeat(np.arange(3), n_per_class)
    names = tuple(f"n{i}" for i in range(len(labels)))
    a = Space(names, l2_normalise(centres[labels] + rng.normal(size=(len(labels), 16)) * noise_a), "baseline")
    b = Space(names, l2_normalise(centres[labels] + rng.normal(size=(len(labels), 16)) * noise_b), "trained")
    return a, b, labels


@pytest.mark.parametrize("measure", ["map", "silhouette"])
def test_tight_classes_score_higher_than_noisy_ones(measure):
    a, b, labels = spaces()
    noisy = per_class_scores(a.vectors, labels, 3, measure)
    tight = per_class_scores(b.vectors, labels, 3, measure)
    assert (tight > noisy).all()
    if measure == "map":
        np.testing.assert_allclose(tight, 1.0)


def test_classes_without_names_are_nan():
    a, _, labels = spaces()
    scores = per_class_scores(a.vectors, labels, 5, "map")
    assert np.isnan(scores[3:]).all() and np.isfinite(scores[:3]).all()
    assert np.isnan(per_class_scores(a.vectors[:3], np.zeros(3, int), 1, "silhouette")).all()


def test_compare_separation_table_and_means():
    a, b, labels = spaces()
    result = compare_separation(a, b, labels, classes=["C0", "C1", "C2"], class_labels=["zero", "one", "two"],
                                measure="map", max_names=30)
    table = result.table
    assert list(table.columns) == ["class", "label", "names", "baseline", "trained", "gain"]
    assert result.sample_size == 30 and table["names"].sum() == 30
    np.testing.assert_allclose(table["gain"], table["trained"] - table["baseline"])
    assert (table["gain"] > 0).all()
    mean_a, mean_b = result.means
    assert mean_b > mean_a and (result.model_a, result.model_b) == ("baseline", "trained")


def test_compare_separation_rejects_bad_input():
    a, b, labels = spaces()
    with pytest.raises(BiovizError, match="unknown separation measure"):
        compare_separation(a, b, labels, classes=["a", "b", "c"], class_labels=["a", "b", "c"], measure="accuracy")
    with pytest.raises(BiovizError, match="different names"):
        compare_separation(a, a.subset(range(10)), labels, classes=["a", "b", "c"], class_labels=["a", "b", "c"])


def test_the_separation_so_far_scores_the_names_both_models_have_and_is_the_whole_figure_once_complete():
    from bioviz.models.encoding_session import PartialVectors
    from bioviz.views.separation import separation_so_far

    a, b, labels = spaces()
    kwargs = {"classes": ["C0", "C1", "C2"], "class_labels": ["zero", "one", "two"], "model_ids": ("a", "b")}
    everything = np.arange(len(labels))
    whole = separation_so_far(PartialVectors(len(labels), everything[::-1], a.vectors[::-1]),
                              PartialVectors(len(labels), everything, b.vectors), labels, **kwargs)
    expected = compare_separation(a, b, labels, classes=kwargs["classes"], class_labels=kwargs["class_labels"])
    np.testing.assert_allclose(whole.table["gain"], expected.table["gain"])  # rows matched, whatever their order
    # a has the first 30 names stored (classes 0 and half of 1), b every other name: 15 in common
    so_far = separation_so_far(PartialVectors(len(labels), everything[:30], a.vectors[:30]),
                               PartialVectors(len(labels), everything[::2], b.vectors[::2]), labels, **kwargs)
    assert so_far.sample_size == 15 and list(so_far.table["names"]) == [10, 5, 0]
    assert np.isnan(so_far.table["gain"][2]) and np.isfinite(so_far.table["gain"][:2]).all()
    assert separation_so_far(PartialVectors.empty(len(labels)), PartialVectors(len(labels), everything, b.vectors),
                             labels, **kwargs) is None
