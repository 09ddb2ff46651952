"""bioviz.views.similarity: term lists (typed, examples, classes, concept families), matrices, orders."""

import numpy as np
import pytest

from bioviz.errors import BiovizError
from bioviz.ontology import level_view, load_source
from bioviz.views.similarity import (class_terms, cluster_order, compare_terms, concept_family_terms, cosine_matrix,
                                     example_sets, find_concept, group_order, load_example, parse_terms, view_groups,
                                     with_class_groups, TermList)
from bioviz.space import l2_normalise


@pytest.fixture
def onto(data_dir, tmp_home):
    return load_source(str(data_dir / "views_table.tsv"))


def test_parse_terms_groups_dedupes_and_skips_comments():
    terms = parse_terms("# a comment\nHeart attack\nheart  ATTACK\nmyocardial infarction; MI\n\n\nfracture of hip, unspecified\n")
    assert terms.terms == ("Heart attack", "myocardial infarction", "MI", "fracture of hip, unspecified")
    assert terms.groups == ("group 1", "group 1", "group 1", "group 2")
    # Without blank lines there is no grouping to show.
    assert parse_terms("a\nb").groups == ("", "")


def test_biolord_appendix_b_example_has_four_groups_of_three():
    assert "biolord_appendix_b" in example_sets()
    terms = load_example("biolord_appendix_b")
    assert len(terms) == 12
    assert terms.terms[0] == "cat fur" and terms.terms[-1] == "disease caused by reoviridae"
    assert [terms.groups.count(g) for g in dict.fromkeys(terms.groups)] == [3, 3, 3, 3]
    with pytest.raises(BiovizError, match="unknown example set"):
        load_example("nope")


def test_class_terms_and_concept_family(onto):
    view = level_view(onto, 1)
    terms = class_terms(view, "C2", limit=5)
    assert len(terms) == 5 and all(view.class_of(t) == view.classes.index("C2") for t in terms.terms)
    assert set(view_groups(view, terms.terms)) == {"C2"}
    assert view_groups(view, ["not in the view"]) == ("",)
    with pytest.raises(BiovizError):
        class_terms(view, "NOPE")
    family = concept_family_terms(onto, "C211")
    assert family.terms[:3] == ("myocardial infarction", "heart attack", "cardiac infarction")
    assert "angina pectoris" in family.terms and family.groups[family.terms.index("angina")] == "C212"


def test_cluster_order_puts_blocks_together():
    rng = np.random.default_rng(0)
    centres = rng.normal(size=(3, 20)) * 3
    labels = np.array([0, 1, 2, 0, 1, 2, 0, 1, 2])
    sim = cosine_matrix(l2_normalise(centres[labels] + rng.normal(size=(9, 20)) * 0.1))
    order = cluster_order(sim)
    assert sorted(order.tolist()) == list(range(9))
    ordered = labels[order]
    assert sum(ordered[i] != ordered[i + 1] for i in range(8)) == 2  # three contiguous blocks
    assert group_order(["b", "a", "", "b", "a"]).tolist() == [0, 3, 1, 4, 2]


def test_compare_terms_matrices_difference_and_errors():
    terms = TermList(("x", "y", "z"), ("g1", "g2", "g1"), "test")
    a = l2_normalise(np.array([[1, 0], [0, 1], [1, 1]], dtype=float))
    b = l2_normalise(np.array([[1, 0], [1, 0.1], [0, 1]], dtype=float))
    comparison = compare_terms(terms, a, b, model_a="A", model_b="B", order="group")
    assert comparison.terms == ("x", "z", "y")
    np.testing.assert_allclose(np.diag(comparison.a), 1.0)
    np.testing.assert_allclose(comparison.difference, comparison.b - comparison.a)
    table = comparison.long_table()
    assert len(table) == 3 and set(table.columns) >= {"term_1", "term_2", "similarity_a", "similarity_b", "difference"}
    with pytest.raises(BiovizError, match="at least two"):
        compare_terms(TermList(("x",), ("",), "t"), a[:1], b[:1], model_a="A", model_b="B")
    with pytest.raises(BiovizError, match="unknown order"):
        compare_terms(terms, a, b, model_a="A", model_b="B", order="random")


def test_find_concept_by_id_then_by_name(onto):
    some_id, concept = next(iter(onto.concepts.items()))
    assert find_concept(onto, f"  {some_id} ") == some_id
    assert find_concept(onto, concept.name.upper()) == onto.search(concept.name, limit=1)[0].id
    with pytest.raises(BiovizError, match="no concept with id or name 'no such thing'"):
        find_concept(onto, "no such thing")


def test_with_class_groups_regroups_by_the_view_class(onto):
    view = level_view(onto, 1)
    terms = TermList((view.names[0], "not a name of the level"), ("group 1", "group 1"), "typed")
    regrouped = with_class_groups(terms, view)
    assert regrouped.terms == terms.terms and regrouped.origin == "typed"
    assert regrouped.groups == (view.classes[view.class_of(view.names[0])], "")


def test_find_classes_lists_a_bounded_number_exact_id_first(onto):
    from bioviz.ontology import level_view
    from bioviz.views.similarity import find_classes

    view = level_view(onto, 2)  # classes C11, C12, C21, C22, C31, ...
    assert find_classes(view, "", limit=3) == view.classes[:3]
    assert find_classes(view, "  FRACTURE ") == ["C31"]  # by label, any case
    assert find_classes(view, "c2") == ["C21", "C22"]
    assert find_classes(view, "c21") == ["C21"]
    assert find_classes(view, "disease", limit=1) == [c for c, label in zip(view.classes, view.class_labels)
                                                      if "disease" in label][:1]
    assert find_classes(view, "no such class") == []
