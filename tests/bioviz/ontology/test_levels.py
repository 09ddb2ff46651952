"""Level views: cycles, shortcuts, dead ends, ambiguity, depth errors (higher-level-semantics §4.1)."""

import networkx as nx
import pytest

from bioviz.errors import LevelError, UnknownConceptError
from bioviz.ontology.levels import consistent_taxonomy, cyclic_edges, level_view, shortcut_edges, synonym_view
from bioviz.ontology.model import Concept, Ontology


def make_ontology(edges, names=None):
    nodes = {n for e in edges for n in e}
    names = names or {}
    concepts = {n: Concept(n, *names.get(n, (f"name {n}",))) for n in nodes}
    return Ontology("test", "1", concepts, nx.DiGraph(edges), "R")


def test_cyclic_edges_break_every_cycle():
    graph = nx.DiGraph([("R", "a"), ("a", "b"), ("b", "c"), ("c", "a"), ("c", "c")])
    removed = cyclic_edges(graph)
    assert ("c", "c") in removed
    graph.remove_edges_from(removed)
    assert nx.is_directed_acyclic_graph(graph)
    assert graph.has_edge("R", "a")


def test_shortcut_edges_are_the_ones_jumping_levels():
    graph = nx.DiGraph([("R", "a"), ("a", "b"), ("b", "c"), ("R", "c"), ("a", "x"), ("R", "y")])
    assert shortcut_edges(graph) == [("R", "c")]


def test_consistent_taxonomy_reports_both_kinds():
    graph = nx.DiGraph([("R", "a"), ("a", "b"), ("R", "b"), ("b", "a")])
    cleaned, cycles, shortcuts = consistent_taxonomy(graph)
    assert cycles and nx.is_directed_acyclic_graph(cleaned)
    assert graph.has_edge("b", "a"), "the input graph is not modified"


def test_level_view_groups_descendant_names_and_keeps_hypernyms_apart():
    onto = make_ontology(
        [("R", "A"), ("R", "B"), ("A", "a1"), ("a1", "a2"), ("B", "b1"), ("R", "dead")],
        {"A": ("class A",), "a1": ("alpha", ("alpha one",)), "a2": ("alpha two",), "b1": ("beta",)},
    )
    view = level_view(onto, depth=1)
    assert view.classes == ["A", "B"], "the dead-end concept has no names below it"
    assert view.empty_classes == ["dead"]
    by_class = {c: [n for n, lab in zip(view.names, view.labels) if view.classes[lab] == c] for c in view.classes}
    assert sorted(by_class["A"]) == ["alpha", "alpha one", "alpha two"]
    assert by_class["B"] == ["beta"]
    assert view.hypernym_names["A"] == ["class A"]
    assert "class A" not in view.names


def test_ambiguous_names_are_dropped_by_default_and_kept_on_request():
    onto = make_ontology(
        [("R", "A"), ("R", "B"), ("A", "x"), ("B", "y"), ("A", "z"), ("B", "w")],
        {"x": ("shared",), "y": ("Shared",), "z": ("zeta",), "w": ("omega",)},
    )
    dropped = level_view(onto, depth=1)
    assert "shared" not in [n.lower() for n in dropped.names]
    assert dropped.ambiguous == ["shared"]
    assert dropped.stats()["ambiguous_dropped"] == 1
    kept = level_view(onto, depth=1, keep_ambiguous=True)
    assert sum(n.lower() == "shared" for n in kept.names) == 2
    assert kept.stats()["ambiguous_dropped"] == 0


def test_shortcut_does_not_make_a_name_ambiguous(data_dir, tmp_home):
    from bioviz.ontology import load_source

    view = level_view(load_source(str(data_dir / "mini.obo")), depth=2)
    # atrial fibrillation is_a arrhythmia and (shortcut) heart disease: one class at depth 2
    assert view.removed_shortcuts == [("MINI:0000010", "MINI:0000013")]
    assert "atrial fibrillation" in view.names


def test_depth_too_deep_and_bad_root_are_one_line_errors():
    onto = make_ontology([("R", "A"), ("A", "a1")])
    with pytest.raises(LevelError, match="too deep"):
        level_view(onto, depth=2)
    with pytest.raises(LevelError, match="too deep under A: it has only direct children"):
        level_view(onto, depth=1, root="A")
    with pytest.raises(LevelError, match="a1 has no descendants"):
        level_view(onto, depth=1, root="a1")
    with pytest.raises(LevelError, match="at least 1"):
        level_view(onto, depth=0)
    with pytest.raises(UnknownConceptError, match="unknown concept id 'nope'"):
        level_view(onto, depth=1, root="nope")


def test_stats_follow_the_papers_tables():
    onto = make_ontology([("R", "A"), ("R", "B"), ("A", "a1"), ("A", "a2"), ("A", "a3"), ("B", "b1")])
    stats = level_view(onto, depth=1).stats()
    assert stats["classes"] == 2 and stats["names"] == 4
    assert stats["names_per_class"] == {"min": 1, "max": 3, "mean": 2.0, "stdev": 1.0}


def test_synonym_view_makes_each_concept_a_class():
    onto = make_ontology([("R", "A"), ("A", "a1")], {"a1": ("alpha", ("alfa", "ALPHA"))})
    view = synonym_view(onto, root="A", min_names=2)
    assert view.classes == ["a1"]
    assert sorted(view.names) == ["alfa", "alpha"], "case variants are one name"
