"""Few-shot splits: determinism, disjointness, short classes, zero-shot classes."""

import networkx as nx
import numpy as np
import pytest

from bioviz.errors import SplitError
from bioviz.ontology.levels import level_view
from bioviz.ontology.model import Concept, Ontology
from bioviz.ontology.splits import make_split


@pytest.fixture
def view():
    edges = [("R", f"C{c}") for c in range(4)]
    edges += [(f"C{c}", f"C{c}-{i}") for c in range(4) for i in range(12 if c else 3)]
    concepts = {n: Concept(n, f"name of {n}") for e in edges for n in e}
    return level_view(Ontology("t", "1", concepts, nx.DiGraph(edges), "R"), depth=1)


def test_same_seed_same_split_other_seed_other_split(view):
    a, b, c = make_split(view, shots=3, seed=7), make_split(view, shots=3, seed=7), make_split(view, shots=3, seed=8)
    for part in ("train", "validation", "test"):
        assert np.array_equal(getattr(a, part), getattr(b, part))
    assert not np.array_equal(a.train, c.train)


def test_parts_are_disjoint_and_sized_per_class(view):
    split = make_split(view, shots=3, seed=1, test_per_class=2)
    parts = [set(split.train), set(split.validation), set(split.test)]
    assert not (parts[0] & parts[1] or parts[0] & parts[2] or parts[1] & parts[2])
    for c in range(1, 4):
        assert sum(view.labels[split.train] == c) == 3
        assert sum(view.labels[split.validation] == c) == 3
        assert sum(view.labels[split.test] == c) == 2


def test_small_classes_are_reported_not_dropped(view):
    split = make_split(view, shots=3, seed=0)
    assert split.short_classes == {"C0": 3}
    assert sum(view.labels[split.train] == 0) == 2, "1 test name, then what is left goes to training"


def test_zero_shot_classes_are_held_out_entirely(view):
    split = make_split(view, shots=2, seed=3, zero_shot_classes=1)
    held = split.zero_shot_classes[0]
    assert set(view.labels[split.zero_shot]) == {held}
    assert held not in set(view.labels[split.train]) | set(view.labels[split.test])


def test_all_remaining_names_train_without_shots(view):
    split = make_split(view, shots=None, seed=0)
    assert len(split.train) + len(split.validation) + len(split.test) == len(view.names)


def test_impossible_settings_are_refused(view):
    with pytest.raises(SplitError):
        make_split(view, shots=0)
    with pytest.raises(SplitError, match="zero-shot"):
        make_split(view, shots=2, zero_shot_classes=4)
