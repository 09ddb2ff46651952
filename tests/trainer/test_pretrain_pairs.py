"""Pretraining pairs from the tiny OBO: objectives, dedup, stratified sampling, the leakage rule."""

from __future__ import annotations

import dataclasses
import random
from pathlib import Path

import networkx as nx
import pytest
from hypothesis import given, strategies as st

from bioviz.errors import BiovizError
from bioviz.ontology import load_source
from bioviz.ontology.level_spec import LevelSpec
from bioviz.ontology.model import normalise_name
from bioviz.ontology.splits import SplitSpec
from trainer.pretrain.dataset import build_pairs, negatives_allowed
from trainer.pretrain.leakage import held_out, parse_level
from trainer.pretrain.negatives import add_negatives
from trainer.pretrain.pairs import Pair, dedupe, extract_pairs
from trainer.pretrain.selection import hold_out_validation, quotas, stratified_sample

OBJECTIVES = ["synonyms", "definitions", "hierarchy"]


@pytest.fixture
def mini(data_dir, tmp_home):
    source = str(data_dir / "mini.obo")
    return source, load_source(source)


def _texts(pair: Pair) -> set[str]:
    return {normalise_name(t) for t in (pair.anchor, pair.positive, *pair.names)}


def test_synonym_pairs_are_two_names_of_one_concept(mini):
    source, ontology = mini
    pairs = extract_pairs(ontology, source, ["synonyms"])["synonyms"]
    assert ("myocardial infarction", "heart attack") in {(p.anchor, p.positive) for p in pairs}
    for pair in pairs:
        names = {normalise_name(n) for n in ontology.concepts[pair.concepts[0]].names}
        assert {normalise_name(pair.anchor), normalise_name(pair.positive)} <= names
        assert pair.kind == "synonym" and pair.source == source
    assert not any("old term" in _texts(p) for p in pairs)  # obsolete terms are not concepts


def test_definitions_and_generated_descriptions(mini):
    source, ontology = mini
    pairs = extract_pairs(ontology, source, ["definitions"])["definitions"]
    by_anchor = {}
    for pair in pairs:
        by_anchor.setdefault(pair.anchor, []).append(pair)
    # every name of a defined concept is paired with its definition (BioLORD samples definitions per name)
    death = "Death of heart muscle tissue from loss of blood supply."
    assert [p.positive for p in by_anchor["heart attack"]] == [death]
    assert by_anchor["heart attack"][0].kind == "definition"
    # no definition: "a kind of <parent name>" (a leaf) or "<parent name> which has subtype <child name>"
    pneumonia = by_anchor["pneumonia"][0]
    assert pneumonia.kind == "description"
    assert pneumonia.positive in {"a kind of lung disease", "a kind of pulmonary disease"}
    arrhythmia = by_anchor["arrhythmia"][0].positive
    assert arrhythmia.split(" which has subtype ")[1] in {"atrial fibrillation", "AF"}
    # a parent that is a top concept ("disorder") says nothing: lung disease gets no description
    assert "lung disease" not in by_anchor and "pulmonary disease" not in by_anchor


def test_hierarchy_pairs_follow_is_a_edges_below_the_top(mini):
    source, ontology = mini
    pairs = extract_pairs(ontology, source, ["hierarchy"])["hierarchy"]
    edges = {(p.concepts[1], p.concepts[0]) for p in pairs}
    expected = {(a, b) for a, b in ontology.graph.edges() if a != "MINI:0000001"}
    assert edges == expected
    assert not any(normalise_name("disorder") in _texts(p) for p in pairs)


def test_extraction_is_seeded(mini):
    source, ontology = mini
    assert extract_pairs(ontology, source, OBJECTIVES, seed=3) == extract_pairs(ontology, source, OBJECTIVES, seed=3)


def test_the_same_file_in_another_folder_gives_the_same_pairs(mini, tmp_path):
    # the path was part of the seed: a fresh clone elsewhere drew other descriptions and synonym
    # pairs, so a pretraining test passed in one checkout and trained no step in another
    source, ontology = mini
    elsewhere = tmp_path / "some" / "other" / "checkout" / "mini.obo"
    elsewhere.parent.mkdir(parents=True)
    elsewhere.write_bytes(Path(source).read_bytes())
    drawn_here = extract_pairs(ontology, source, OBJECTIVES, seed=3)
    drawn_there = extract_pairs(load_source(str(elsewhere)), str(elsewhere), OBJECTIVES, seed=3)
    assert [[(p.anchor, p.positive, p.concepts) for p in drawn_here[o]] for o in OBJECTIVES] == \
        [[(p.anchor, p.positive, p.concepts) for p in drawn_there[o]] for o in OBJECTIVES]


def test_dedupe_drops_repeats_after_normalisation_and_self_pairs():
    def pair(a, b, objective="synonyms"):
        return Pair(a, b, objective, "s", "synonym", ("X",), (a, b))

    pairs = [pair("Heart attack", "MI"), pair("heart  attack", "mi"), pair("MI", "mi"),
             pair("Heart attack", "MI", "hierarchy")]
    assert dedupe(pairs) == [pairs[0], pairs[3]]


@given(st.dictionaries(st.sampled_from("abcdef"), st.integers(0, 50), min_size=1), st.integers(0, 200))
def test_quotas_are_equal_shares_and_never_exceed_a_stratum(sizes, total):
    shares = quotas(sizes, total)
    assert sum(shares.values()) == min(total, sum(sizes.values()))
    assert all(0 <= shares[k] <= sizes[k] for k in sizes)
    # a stratum below its fair share is taken whole; the others differ by at most one
    full = [k for k in sizes if shares[k] < sizes[k]]
    assert max((shares[k] for k in full), default=0) - min((shares[k] for k in full), default=0) <= 1


def test_stratified_sample_balances_sources_and_objectives():
    pairs = [Pair(f"a{i}", f"b{i}", obj, src, "synonym", (f"C{i}",), ()) for src, obj, n in
             [("s1", "synonyms", 100), ("s1", "hierarchy", 5), ("s2", "synonyms", 100)] for i in range(n)]
    sample = stratified_sample(pairs, 45, seed=1)
    counts = {(s, o): sum(p.source == s and p.objective == o for p in sample) for s, o in
              [("s1", "synonyms"), ("s1", "hierarchy"), ("s2", "synonyms")]}
    assert counts == {("s1", "synonyms"): 20, ("s1", "hierarchy"): 5, ("s2", "synonyms"): 20}
    assert sample == stratified_sample(pairs, 45, seed=1) != stratified_sample(pairs, 45, seed=2)
    assert len(stratified_sample(pairs, None, seed=1)) == len(pairs)


def test_validation_pairs_share_no_text_or_concept_with_training_pairs():
    rng = random.Random(0)
    words = [f"w{i}" for i in range(40)]
    pairs = dedupe(Pair(*rng.sample(words, 2), "synonyms", "s", "synonym", (f"C{rng.randrange(30)}",), ())
                   for _ in range(200))
    train, validation, dropped = hold_out_validation(pairs, 10, seed=0)
    assert len(validation) == 10 and len(train) + len(validation) + dropped == len(pairs)
    seen = {normalise_name(t) for p in validation for t in (p.anchor, p.positive)}
    assert not any({normalise_name(p.anchor), normalise_name(p.positive)} & seen for p in train)
    assert not {p.concepts[0] for p in train} & {p.concepts[0] for p in validation}


def test_parse_level_keeps_colons_of_the_root():
    assert parse_level("hpo:HP:0000118:2") == LevelSpec("hpo", root="HP:0000118", depth=2)
    assert parse_level("icd10::1") == LevelSpec("icd10", depth=1)
    for bad in ("icd10", "icd10:1", "icd10::0", "icd10::x"):
        with pytest.raises(BiovizError, match="SOURCE:ROOT:DEPTH"):
            parse_level(bad)


def test_validation_and_test_names_of_the_level_never_reach_a_pair(mini):
    source, ontology = mini
    split = SplitSpec(shots=1, seed=0, test_per_class=1)
    held = held_out(LevelSpec(source, depth=1), split, ontology)
    view = LevelSpec(source, depth=1).load(ontology)
    drawn = split.make(view)
    unseen = {normalise_name(view.names[r]) for r in [*drawn.validation, *drawn.test]}
    assert unseen and unseen <= held.names
    everything = build_pairs([source], OBJECTIVES, validation_pairs=0)
    assert any(_texts(p) & unseen for p in everything.train)  # without the rule they would leak
    kept = build_pairs([source], OBJECTIVES, held=[held], validation_pairs=0)
    assert not any(_texts(p) & unseen for p in kept.train)
    assert kept.excluded["total"] == len(everything.train) - len(kept.train) > 0
    assert kept.excluded["levels"][0]["split"] == {"shots": 1, "seed": 0, "test_per_class": 1, "zero_shot_classes": 0}
    assert kept.excluded["levels"][0]["test_names"] == len(drawn.test)


def test_zero_shot_class_concepts_are_excluded_entirely(mini):
    source, ontology = mini
    split = SplitSpec(shots=1, seed=0, test_per_class=0, zero_shot_classes=1)
    level = LevelSpec(source, depth=1)
    view = level.load(ontology)
    zero_class = view.classes[split.make(view).zero_shot_classes[0]]
    held = held_out(level, split, ontology)
    below = {c for c in ontology.concepts if zero_class in ontology.path_to_root(c)} | {zero_class}
    below |= {c for c in ontology.concepts if any(zero_class == p for p in ontology.parents(c))}
    assert below <= held.concepts
    kept = build_pairs([source], OBJECTIVES, held=[held], validation_pairs=0)
    assert kept.train and not any(set(p.concepts) & held.concepts for p in kept.train)


def test_unknown_objective_and_missing_source_are_one_line(mini, tmp_path):
    source, _ = mini
    with pytest.raises(BiovizError, match="unknown objective 'typo'"):
        build_pairs([source], ["synonyms", "typo"])
    with pytest.raises(BiovizError, match="unknown source") as caught:
        build_pairs([str(tmp_path / "missing.obo")], ["synonyms"])
    assert "\n" not in str(caught.value)
    bare = tmp_path / "bare.obo"
    bare.write_text("format-version: 1.2\n\n[Term]\nid: X:1\nname: alpha\n\n[Term]\nid: X:2\nname: beta\n"
                    "is_a: X:1\n", encoding="utf-8")
    with pytest.raises(BiovizError, match="only 0 training pairs .* nothing to pretrain on"):
        build_pairs([str(bare)], ["synonyms"])


def _concept_names(ontology, concept_id):
    return {normalise_name(n) for n in ontology.concepts[concept_id].names}


def test_sibling_negatives_are_siblings_never_the_anchor_concept_and_seeded(mini):
    source, ontology = mini
    extracted = extract_pairs(ontology, source, OBJECTIVES)
    pairs = [p for objective in OBJECTIVES for p in extracted[objective]]
    with_negatives = add_negatives(pairs, {source: ontology}, mode="siblings", seed=0)
    assert [dataclasses.replace(p, negative=None, negative_concept=None) for p in with_negatives] == pairs
    graph = ontology.graph
    given = [p for p in with_negatives if p.negative is not None]
    assert {p.objective for p in given} == {"synonyms", "hierarchy"}  # definitions get none
    for pair in given:
        negative = pair.negative_concept
        assert pair.negative == ontology.concepts[negative].name
        anchor = pair.concepts[0]
        # a sibling of the anchor (synonyms) or of the parent (hierarchy): they share a parent
        of = anchor if pair.objective == "synonyms" else pair.concepts[1]
        assert set(graph.predecessors(negative)) & set(graph.predecessors(of)) and negative != of
        assert negative != anchor and not _concept_names(ontology, negative) & _concept_names(ontology, anchor)
        assert normalise_name(pair.negative) not in {normalise_name(pair.anchor), normalise_name(pair.positive)}
        if pair.objective == "hierarchy":
            assert negative not in nx.ancestors(graph, anchor)  # never one of the anchor's own parents
    # AF is under arrhythmia and heart disease: lung disease is heart disease's sibling but
    # cardiopulmonary syndrome's own parent, so that pair has no negative rather than a false one
    cardio = next(p for p in with_negatives if p.objective == "hierarchy"
                  and p.anchor == "cardiopulmonary syndrome" and p.positive == "heart disease")
    assert cardio.negative is None
    # seeded per pair: the same negative whatever the order or the company of the pair
    assert add_negatives(pairs[::-1], {source: ontology}, mode="siblings", seed=0) == with_negatives[::-1]
    assert add_negatives(pairs[:3], {source: ontology}, mode="siblings", seed=0) == with_negatives[:3]
    assert add_negatives(pairs, {source: ontology}, mode="none") == pairs


def test_negatives_obey_the_leakage_rule_and_the_validation_slice(mini):
    source, ontology = mini
    split = SplitSpec(shots=1, seed=0, test_per_class=1)
    held = held_out(LevelSpec(source, depth=1), split, ontology)
    free = build_pairs([source], OBJECTIVES, validation_pairs=0, hard_negatives="siblings")
    assert any(normalise_name(p.negative) in held.names for p in free.train if p.negative)  # it would leak
    kept = build_pairs([source], OBJECTIVES, held=[held], validation_pairs=0, hard_negatives="siblings")
    negatives = [p.negative for p in kept.train if p.negative is not None]
    assert negatives and not {normalise_name(n) for n in negatives} & held.names
    assert sum(kept.counts()["hard_negatives"].values()) == len(negatives)
    allowed = negatives_allowed([], [Pair("asthma", "reactive airway disease", "synonyms", source, "synonym",
                                          ("MINI:0000022",), ())])
    assert not allowed("Asthma", "MINI:0000099", source)  # a validation text
    assert not allowed("anything", "MINI:0000022", source)  # a validation anchor concept
    assert allowed("pneumonia", "MINI:0000021", source)
