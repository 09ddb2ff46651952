"""bioviz.views.hierarchy: the drawn subtree, node scores, search, nearest names, hypernym ranking."""

import numpy as np
import pytest

from bioviz.errors import BiovizError, UnknownConceptError
from bioviz.views.hierarchy import (drawn_part, hypernym_candidates, hypernym_ranking, level_tree, nearest, node_scores, search_nodes)
from bioviz.ontology import level_view, load_source, synonym_view


@pytest.fixture
def onto(data_dir, tmp_home):
    return load_source(str(data_dir / "views_table.tsv"))


def test_tree_down_to_depth_2_sums_names_bottom_up(onto):
    view = level_view(onto, 2)
    tree = level_tree(onto, view)
    nodes = tree.nodes.set_index("id")
    assert len(tree) == 1 + 4 + 8
    assert nodes.loc["R", "parent"] == "" and nodes.loc["C1", "parent"] == "R" and nodes.loc["C11", "parent"] == "C1"
    assert nodes.loc["R", "names"] == len(view.names)
    assert nodes.loc["C1", "names"] == nodes.loc["C11", "names"] + nodes.loc["C12", "names"]
    assert nodes.loc["C11", "class_index"] == view.classes.index("C11") and nodes.loc["C1", "class_index"] == -1
    assert tree.class_rows("C2") == sorted([view.classes.index("C21"), view.classes.index("C22")])
    # Parents come before children (plotly needs it for branchvalues="total").
    order = list(tree.nodes["id"])
    assert all(order.index(p) < order.index(c) for c, p in zip(tree.nodes["id"], tree.nodes["parent"]) if p)
    with pytest.raises(UnknownConceptError):
        tree.class_rows("C111")


def test_synonym_views_have_no_levels(onto):
    with pytest.raises(BiovizError, match="synonym sets"):
        level_tree(onto, synonym_view(onto))


def test_node_scores_weight_classes_by_names(onto):
    view = level_view(onto, 2)
    tree = level_tree(onto, view)
    scores = np.zeros(len(view.classes))
    scores[view.classes.index("C11")] = 1.0  # 10 names
    scores[view.classes.index("C12")] = np.nan
    values = dict(zip(tree.nodes["id"], node_scores(tree, scores, view.class_sizes())))
    assert values["C11"] == 1.0 and np.isnan(values["C12"])
    assert values["C1"] == pytest.approx(1.0)  # C12 left out, not counted as 0
    sizes = view.class_sizes()
    expected = 10 / (sizes.sum() - sizes[view.classes.index("C12")])
    assert values["R"] == pytest.approx(expected)


def test_search_and_nearest(onto):
    tree = level_tree(onto, level_view(onto, 2))
    assert search_nodes(tree, "C21")[0] == "C21"
    assert search_nodes(tree, "fracture") == ["C31"]
    assert search_nodes(tree, "  ") == []
    vectors = np.eye(4, dtype=np.float32)
    rows, scores = nearest(vectors, np.array([0.9, 0.1, 0, 0]), k=2, exclude=[0])
    assert rows.tolist() == [1, 2]  # ties keep row order
    assert np.all(np.diff(scores) <= 0) and 0 not in rows.tolist()


def test_hypernym_ranking_marks_correct_class_and_appends_first_hit(onto):
    view = level_view(onto, 1)
    names, classes = hypernym_candidates(view)
    assert "infection" in names and "infectious disease" in names
    # Vectors that put every hypernym of class C1 last.
    c1 = view.classes.index("C1")
    hyp = np.array([[0.0, 1.0] if c == c1 else [1.0, 0.0] for c in classes], dtype=np.float32)
    frame = hypernym_ranking(np.array([1.0, 0.0]), hyp, hypernym_names=names, hypernym_classes=classes, true_class=c1,
                             view=view, k=2)
    assert len(frame) == 3 and not frame["correct"][:2].any() and frame["correct"].iloc[-1]
    assert frame["rank"].iloc[-1] == len(names) - int((classes == c1).sum()) + 1
    top = hypernym_ranking(np.array([0.0, 1.0]), hyp, hypernym_names=names, hypernym_classes=classes, true_class=c1,
                           view=view, k=2)
    assert len(top) == 2 and top["correct"].all() and set(top["class"]) == {"C1"}


def test_a_small_tree_is_drawn_whole(onto):
    tree = level_tree(onto, level_view(onto, 2))
    part = drawn_part(tree, None, 3, max_nodes=len(tree))
    assert part.tree is tree and not part.cut and list(part.rows) == list(range(len(tree))) and part.opened == "R"


def test_a_large_tree_is_drawn_a_part_at_a_time(onto):
    tree = level_tree(onto, level_view(onto, 2))  # 13 nodes: R, 4 children, 8 grandchildren
    part = drawn_part(tree, "R", 3, max_nodes=6)
    assert part.cut and part.total == 13 and part.levels == 2  # the grandchildren do not fit: one level less
    assert list(part.tree.nodes["id"]) == ["R", "C1", "C2", "C3", "C4"]
    assert list(part.rows) == [0, 1, 2, 3, 4] and part.tree.root == "R"
    # A leaf opens at its parent, with the path from the root (the figure's path bar)
    leaf = drawn_part(tree, "C11", 3, max_nodes=6)
    assert leaf.opened == "C1" and list(leaf.tree.nodes["id"]) == ["R", "C1", "C11", "C12"]
    ids = list(tree.nodes["id"])
    assert [ids[r] for r in leaf.rows] == ["R", "C1", "C11", "C12"]
    # More children than fit: the largest are kept
    narrow = drawn_part(tree, "R", 2, max_nodes=3)
    sizes = dict(zip(tree.nodes["id"], tree.nodes["names"]))
    kept = list(narrow.tree.nodes["id"])[1:]
    assert len(narrow.tree) == 3 and min(sizes[c] for c in kept) >= max(
        sizes[c] for c in ("C1", "C2", "C3", "C4") if c not in kept)
    with pytest.raises(UnknownConceptError):
        drawn_part(tree, "nowhere", 2)
