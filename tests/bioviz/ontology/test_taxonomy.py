"""The near-linear taxonomy cleaning and level building give what the definitions say.

References written the slow, obvious way (an ancestor search per parent, a descendant
search per class) are compared with :mod:`bioviz.ontology.taxonomy` and
:func:`bioviz.ontology.levels.class_owners` on random graphs, cycles and multi-parent
concepts included.
"""

from __future__ import annotations

import networkx as nx
from hypothesis import given
from hypothesis import strategies as st

from bioviz.errors import LevelError
from bioviz.ontology.levels import class_owners, level_view
from bioviz.ontology.model import Concept, Ontology
from bioviz.ontology.taxonomy import consistent_taxonomy, cyclic_edges, shortcut_edges

edges = st.lists(st.tuples(st.integers(0, 14), st.integers(0, 14)), max_size=45)


def graph_of(pairs, acyclic: bool) -> nx.DiGraph:
    graph = nx.DiGraph()
    graph.add_nodes_from(f"n{i:02d}" for i in range(15))
    graph.add_edges_from((f"n{min(a, b) if acyclic else a:02d}", f"n{max(a, b) if acyclic else b:02d}")
                         for a, b in pairs if not acyclic or a != b)
    return graph


def reference_shortcuts(graph: nx.DiGraph) -> list:
    """``u -> v`` where ``u`` is an ancestor of another parent of ``v`` (the definition)."""
    return sorted((u, v) for u, v in graph.edges
                  if any(u in nx.ancestors(graph, w) for w in graph.predecessors(v) if w != u))


@given(pairs=edges)
def test_shortcuts_are_the_edges_transitive_reduction_drops(pairs):
    graph = graph_of(pairs, acyclic=True)
    shortcuts = shortcut_edges(graph)
    assert shortcuts == reference_shortcuts(graph)
    assert set(graph.edges) - set(shortcuts) == set(nx.transitive_reduction(graph).edges)


@given(pairs=edges)
def test_cycle_removal_leaves_a_dag_and_keeps_every_other_edge(pairs):
    graph = graph_of(pairs, acyclic=False)
    cleaned, cycles, shortcuts = consistent_taxonomy(graph)
    assert nx.is_directed_acyclic_graph(cleaned)
    assert set(cleaned.edges) == set(graph.edges) - set(cycles) - set(shortcuts)
    acyclic = graph.copy()
    acyclic.remove_edges_from(cycles)
    assert cycles == cyclic_edges(graph) and shortcuts == reference_shortcuts(acyclic)


@given(pairs=edges, cut=st.integers(1, 3), exact=st.booleans())
def test_class_owners_are_the_classes_above_each_concept(pairs, cut, exact):
    graph = graph_of(pairs, acyclic=True)
    classes = sorted(graph)[::cut + 1]
    owners = class_owners(graph, classes, exact=exact)
    for node in graph:
        expected = {i for i, c in enumerate(classes) if node in nx.descendants(graph, c)}
        got = set(owners.get(node, ()))
        if exact or len(expected) < 2:
            assert got == expected
        else:
            assert len(got) == 2 and got <= expected, "two of them: enough to know the names are ambiguous"


def reference_level(onto: Ontology, depth: int, keep: bool) -> tuple:
    """Classes and names of a level view, one descendant search per class."""
    graph, _, _ = consistent_taxonomy(onto.graph)
    distance = nx.single_source_shortest_path_length(graph, onto.default_root)
    level = sorted(n for n, d in distance.items() if d == depth)
    members = {c: {d for d in nx.descendants(graph, c) if d not in level} for c in level}
    keys = {}
    for c, concepts in members.items():
        for concept in concepts:
            for text in onto.concepts[concept].names:
                keys.setdefault(text.casefold(), set()).add(c)
    ambiguous = sorted(k for k, owners in keys.items() if len(owners) > 1)
    by_class = {c: sorted({t.casefold() for m in members[c] for t in onto.concepts[m].names}
                          - (set() if keep else set(ambiguous))) for c in level}
    return {c: names for c, names in by_class.items() if names}, ambiguous


@given(pairs=edges, depth=st.integers(1, 3), keep=st.booleans(),
       names=st.lists(st.sampled_from(["a", "b", "c", "d"]), min_size=15, max_size=15))
def test_level_view_matches_a_descendant_search_per_class(pairs, depth, keep, names):
    graph = graph_of([(0, b) for b in (1, 2, 3)] + pairs, acyclic=True)
    concepts = {n: Concept(n, f"{n} {names[i]}", (names[i],)) for i, n in enumerate(sorted(graph))}
    onto = Ontology("t", "1", concepts, graph, "n00")
    expected, ambiguous = reference_level(onto, depth, keep)
    try:
        view = level_view(onto, depth=depth, keep_ambiguous=keep)
    except LevelError:  # right exactly when the reference finds no names
        assert not expected
        return
    got = {c: sorted(n.casefold() for n, label in zip(view.names, view.labels) if view.classes[label] == c)
           for c in view.classes}
    assert got == expected
    assert view.ambiguous == ambiguous
