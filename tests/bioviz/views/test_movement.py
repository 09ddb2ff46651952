"""bioviz.views.movement: displacement between aligned layouts, same-class precision, movers and parts."""

import numpy as np
import pytest

from bioviz.ontology.levels import LevelView
from bioviz.views.movement import (arrow_rows, layout_displacement, measure_movement, movers_table, nearest_names,
                                   part_summary, same_class_precision, training_movement)
from bioviz.space import Space


def tiny_view() -> LevelView:
    names = [f"name {i}" for i in range(8)]
    return LevelView(source="toy 1", root="R", depth=1, mode="level", classes=["A", "B"],
                     class_labels=["Class A", "Class B"], names=names,
                     labels=np.array([0, 0, 0, 0, 1, 1, 1, 1]), name_concepts=[f"C{i}" for i in range(8)],
                     hypernym_names={"A": ["Class A"], "B": ["Class B"]})


def unit(rows):
    rows = np.asarray(rows, dtype=np.float32)
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def test_displacement_is_in_units_of_the_baseline_radius():
    a = np.array([[1.0, 0.0], [-1.0, 0.0], [0.0, 1.0], [0.0, -1.0]])  # RMS radius 1
    b = a.copy()
    b[0] += [0.0, 3.0]
    assert layout_displacement(a, b).tolist() == [3.0, 0.0, 0.0, 0.0]
    assert layout_displacement(a * 10, b * 10).tolist() == [3.0, 0.0, 0.0, 0.0]  # scale-free


def test_nearest_names_leave_the_row_itself_out_even_for_duplicates():
    vectors = unit([[1, 0], [1, 0], [0, 1], [0.1, 1]])  # rows 0 and 1 are identical
    near = nearest_names(vectors, 2)
    assert near.shape == (4, 2)
    assert all(i not in near[i] for i in range(4))
    assert near[0, 0] == 1 and near[1, 0] == 0
    assert nearest_names(vectors[:1], 5).shape == (1, 0)


def test_same_class_precision_is_out_of_what_the_class_allows():
    labels = np.array([0, 0, 1, 1, 1, 2])
    near = np.array([[1, 2], [0, 3], [3, 4], [2, 0], [0, 5], [0, 1]])
    precision = same_class_precision(near, labels)
    # class 0 has one other name: finding it is a perfect score; class 2 has none
    assert precision[:5].tolist() == [1.0, 1.0, 1.0, 0.5, 0.0]
    assert np.isnan(precision[5])


def test_training_that_gathers_classes_shows_as_a_gain_and_a_move():
    view = tiny_view()
    rng = np.random.default_rng(0)
    mixed = unit(rng.normal(size=(8, 6)))  # baseline: classes mixed
    centres = np.eye(6)[view.labels]
    gathered = unit(centres + 0.05 * rng.normal(size=(8, 6)))  # compared: each class together
    rows = np.arange(8)
    coords_a = rng.normal(size=(8, 2))
    coords_b = coords_a.copy()
    coords_b[5] += [4.0, 0.0]
    movement = measure_movement(mixed, gathered, view.labels, rows=rows, coords_a=coords_a, coords_b=coords_b, k=3)
    assert movement.k == 3
    assert np.allclose(movement.precision_b, 1.0)
    assert movement.change.mean() > 0.3
    assert int(np.argmax(movement.displacement)) == 5
    parts = np.array(["train", "train", "test", "zero-shot", "train", "test", "zero-shot", "unused"], dtype=object)
    table = movers_table(view, movement, parts)
    assert list(table.columns) == ["name", "concept", "class", "class_label", "part", "precision_a", "precision_b",
                                   "change", "kept", "displacement"]
    assert table["change"].abs().is_monotonic_decreasing  # the largest neighbourhood change first
    assert set(table["part"]) == {"train", "test", "zero-shot", "unused"}
    summary = part_summary(table)
    assert summary["part"].tolist() == ["train", "test", "zero-shot", "unused"]  # split order, not alphabetical
    assert summary["names"].tolist() == [3, 2, 2, 1]
    assert summary.loc[summary["part"] == "zero-shot", "precision_b"].item() == pytest.approx(1.0)


def test_arrows_go_to_the_furthest_moved_names_of_a_class_or_of_all():
    view = tiny_view()
    vectors = unit(np.eye(8))
    coords_a = np.zeros((8, 2))
    coords_a[:, 0] = np.arange(8)
    coords_b = coords_a.copy()
    coords_b[:, 1] = [0, 5, 1, 0, 2, 0, 9, 3]
    rows = np.arange(8)
    movement = measure_movement(vectors, vectors, view.labels, rows=rows, coords_a=coords_a, coords_b=coords_b, k=2)
    assert arrow_rows(movement, view.labels, count=3).tolist() == [6, 1, 7]
    assert arrow_rows(movement, view.labels, class_index=0, count=2).tolist() == [1, 2]
    assert len(arrow_rows(movement, view.labels, count=0)) == 0


def test_two_models_must_embed_the_same_names():
    view = tiny_view()
    with pytest.raises(ValueError, match="different name lists"):
        measure_movement(np.ones((8, 3)), np.ones((7, 3)), view.labels, rows=np.arange(8), coords_a=np.zeros((8, 2)),
                         coords_b=np.zeros((8, 2)))


def test_a_large_layout_is_measured_on_a_class_stratified_sample_with_progress():
    rng = np.random.default_rng(1)
    labels = np.repeat([0, 1, 2], [300, 60, 6])
    vectors = unit(rng.normal(size=(len(labels), 8)))
    coords = rng.normal(size=(len(labels), 2))
    seen = []
    movement = measure_movement(vectors, vectors, labels, rows=np.arange(len(labels)), coords_a=coords,
                                coords_b=coords, k=5,
                                max_names=100, progress=lambda fraction, message: seen.append((fraction, message)))
    assert len(movement.rows) == 100 and set(labels[movement.rows]) == {0, 1, 2}  # every class kept
    assert np.all(np.diff(movement.rows) > 0) and np.allclose(movement.displacement, 0)
    assert np.allclose(movement.kept, 1.0)  # the same vectors: the same neighbours
    fractions = [f for f, _ in seen]
    assert fractions == sorted(fractions) and fractions[-1] == 1.0
    assert "baseline" in seen[0][1] and "compared" in seen[-1][1]


def test_training_movement_aligns_the_compared_layout_and_returns_the_measured_names_coordinates():
    rng = np.random.default_rng(2)
    labels = np.repeat([0, 1, 2], [40, 30, 10])
    names = tuple(f"name {i}" for i in range(len(labels)))
    space = Space(names, unit(rng.normal(size=(len(labels), 8))), "toy")
    rows = rng.permutation(len(labels))[:60]  # a layout's rows in any order
    coords_a = rng.normal(size=(60, 2))
    turn = np.array([[0.0, -1.0], [1.0, 0.0]])
    coords_b = coords_a @ turn * 3 + [5.0, -2.0]  # the same layout, turned, scaled and shifted
    movement, moved_a, moved_b = training_movement(space, space, labels, rows, coords_a=coords_a,
                                                   coords_b=coords_b, k=3, max_names=30)
    assert len(movement.rows) == 30 and set(movement.rows) <= set(rows)
    assert np.allclose(movement.displacement, 0, atol=1e-5)  # aligned before measuring
    at = [list(rows).index(r) for r in movement.rows]
    assert np.allclose(moved_a, coords_a[at]) and np.allclose(moved_b, coords_a[at], atol=1e-4)
