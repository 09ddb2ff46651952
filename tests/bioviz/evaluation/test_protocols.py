"""The evaluation protocols built from the tiny mini.obo ontology."""

from __future__ import annotations

import numpy as np
import pytest

from bioviz.evaluation import protocols
from bioviz.ontology import level_view, load_source, make_split, synonym_view
from bioviz.ontology.model import normalise_name


@pytest.fixture(scope="module")
def mini(tmp_path_factory):
    import os
    os.environ.setdefault("BIOVIZ_HOME", str(tmp_path_factory.mktemp("home")))
    from pathlib import Path
    onto = load_source(str(Path(__file__).parents[2] / "data" / "mini.obo"))
    view = level_view(onto, depth=1)
    return onto, view, make_split(view, shots=2, seed=0)


def test_ranking_problem_is_test_against_train(mini):
    _, view, split = mini
    problem = protocols.ranking_problem(view, split)
    assert problem.queries == tuple(view.names[i] for i in split.test)
    assert problem.references == tuple(view.names[i] for i in split.train)
    assert list(problem.reference_labels) == list(view.labels[split.train])
    assert not problem.exclude_self


def test_hypernym_problem_uses_class_concept_names(mini):
    _, view, split = mini
    problem = protocols.hypernym_problem(view, split)
    assert problem.references == ("heart disease", "cardiac disease", "cardiopathy", "lung disease", "pulmonary disease")
    assert list(problem.reference_labels) == [0, 0, 0, 1, 1]
    assert not set(problem.references) & set(view.names)


def test_synonym_problems_parts(mini):
    onto, view, split = mini
    parts = protocols.synonym_problems(view, split)
    assert set(parts) == {"train", "test"}
    assert parts["train"].exclude_self and parts["train"].queries == parts["train"].references
    sview = synonym_view(onto)
    ssplit = make_split(sview, shots=1, seed=0, zero_shot_classes=2)
    parts = protocols.synonym_problems(sview, ssplit)
    assert set(parts) == {"train", "test", "zero_shot"}
    assert set(parts["zero_shot"].query_labels) == set(ssplit.zero_shot_classes)


def test_leaf_to_parent(mini):
    onto, view, _ = mini
    problem = protocols.leaf_to_parent_problem(onto, view.root)
    queries = list(problem.queries)
    assert "atrial fibrillation" in queries and "arrhythmia" not in queries  # arrhythmia has a child
    candidates = sorted(set(problem.reference_labels))
    inner_names = {problem.references[i] for i in range(len(problem.references))}
    assert {"arrhythmia", "heart disease", "cardiac disease", "disorder"} <= inner_names
    assert "pneumonia" not in inner_names
    # Atrial fibrillation has two parents (arrhythmia, heart disease): both relevant.
    row = problem.relevance[queries.index("atrial fibrillation")].toarray()[0]
    relevant_names = {problem.references[i] for i in range(len(problem.references)) if row[problem.reference_labels[i]]}
    assert relevant_names == {"arrhythmia", "irregular heartbeat", "heart disease", "cardiac disease", "cardiopathy"}
    assert problem.relevance.shape == (len(queries), len(candidates))
    assert np.all(np.diff(problem.reference_groups) >= 0)
    assert len(protocols.leaf_to_parent_problem(onto, view.root, max_queries=2).queries) == 2


def concepts_of(onto, name):
    return {c.id for c in onto.lookup(name)}


def test_hierarchy_pairs_distances_are_right(mini):
    onto, view, split = mini
    seen = [view.names[i] for i in np.concatenate([split.train, split.validation])]
    sample = protocols.hierarchy_pairs(onto, view.root, seen, per_distance=50, seed=1)
    counts = {d: int((sample.distances == d).sum()) for d in range(4)}
    assert all(counts[d] > 0 for d in range(4)), counts
    graph = onto.graph
    excluded = {normalise_name(n) for n in seen}
    for a, b, d in zip(sample.first, sample.second, sample.distances):
        assert normalise_name(a) not in excluded and normalise_name(b) not in excluded
        ca, cb = concepts_of(onto, a), concepts_of(onto, b)
        if d == 0:
            assert ca & cb
        elif d == 2:
            assert any(graph.has_edge(x, y) or graph.has_edge(y, x) for x in ca for y in cb)
        elif d == 1:
            assert any(set(graph.predecessors(x)) & set(graph.predecessors(y)) for x in ca for y in cb)
        else:
            assert not any(graph.has_edge(x, y) or graph.has_edge(y, x) for x in ca for y in cb)
    again = protocols.hierarchy_pairs(onto, view.root, seen, per_distance=50, seed=1)
    assert again.first == sample.first and again.second == sample.second  # fixed seed


def test_drop_queries(mini):
    onto, view, split = mini
    problem = protocols.ranking_problem(view, split)
    dropped = protocols.drop_queries(problem, [problem.queries[0].upper()])  # compared normalised
    assert dropped.queries == problem.queries[1:] and dropped.references == problem.references
    assert list(dropped.query_labels) == list(problem.query_labels[1:])
    assert protocols.drop_queries(problem, ["not a name"]) is problem
    train = protocols.synonym_problems(view, split)["train"]
    smaller = protocols.drop_queries(train, [train.queries[0]])
    assert smaller.exclude_self and smaller.queries == smaller.references == train.queries[1:]
    leaf = protocols.leaf_to_parent_problem(onto, view.root)
    fewer = protocols.drop_queries(leaf, ["atrial fibrillation"])
    assert fewer.relevance.shape == (len(leaf.queries) - 1, leaf.relevance.shape[1])
