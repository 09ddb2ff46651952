"""The granularity cross-encoder: its pairs, its training command and its place in term coding."""

import json
import random

import pytest

from bioviz.ontology import load_source
from bioviz.ontology.model import normalise_name
from bioviz.search.rerank import OntologyReranker, Reranker, cross_rerank
from trainer.cli import main
from trainer.reranker import labelled_pairs


@pytest.fixture
def mini(data_dir):
    return load_source(str(data_dir / "mini.obo"))


def _concepts_named(ontology, text):
    return {c.id for c in ontology.concepts.values() if normalise_name(text) in map(normalise_name, c.names)}


def test_matches_are_synonyms_and_non_matches_are_one_hierarchy_step_away(mini):
    rows = labelled_pairs(mini, random.Random(0), max_concepts=100)
    graph = mini.graph
    assert {label for *_, label in rows} == {0, 1}
    for anchor, other, label in rows:
        mine, others = _concepts_named(mini, anchor), _concepts_named(mini, other)
        if label == 1:
            assert mine & others and normalise_name(anchor) != normalise_name(other)
        else:
            near = {n for c in mine for n in (*graph.predecessors(c), *graph.successors(c),
                                               *(s for p in graph.predecessors(c) for s in graph.successors(p)))}
            assert others & (near - mine)


def test_excluded_names_never_appear_in_a_pair(mini):
    excluded = {normalise_name("heart attack"), normalise_name("cardiac disease")}
    rows = labelled_pairs(mini, random.Random(0), max_concepts=100, excluded=excluded)
    assert rows and not {normalise_name(t) for a, b, _ in rows for t in (a, b)} & excluded


def test_the_window_is_reordered_by_score_plus_weighted_probability_and_exact_ones_stay_first():
    top = [("exact", 1.0), ("child", 0.80), ("gold", 0.79), ("far", 0.5), ("beyond", 0.4)]
    moved = cross_rerank(top, probabilities=[0.0, 0.1, 0.9, 0.2], exact={"exact"}, weight=0.1)
    assert [c for c, _ in moved] == ["exact", "gold", "child", "far", "beyond"]
    assert dict(moved) == dict(top)  # the scores shown are the ranking's
    assert cross_rerank(top, probabilities=[0.0, 0.1, 0.9, 0.2], exact={"exact"}, weight=0.0) == top


def test_a_cross_encoder_reranker_needs_its_model_and_only_it_takes_one():
    from bioviz.errors import BiovizError

    with pytest.raises(BiovizError, match="model directory"):
        Reranker("cross-encoder")
    with pytest.raises(BiovizError, match="model directory"):
        Reranker("ancestor", 0.01, model="somewhere")
    assert Reranker("cross-encoder", model="x", weight=0.2).label == "cross-encoder (weight 0.2)"


def test_bad_input_is_refused_in_one_line_before_any_work(tmp_path, capsys):
    full = tmp_path / "full"
    full.mkdir()
    (full / "x").write_text("kept", encoding="utf-8")
    assert main(["reranker", "--sources", "hpo", "--out", str(full)]) == 2
    assert "not a new or empty directory" in capsys.readouterr().err
    assert (full / "x").read_text(encoding="utf-8") == "kept"
    assert main(["reranker", "--sources", "hpo", "--exclude-names", str(tmp_path / "nope.txt"),
                 "--out", str(tmp_path / "new")]) == 2
    assert "no such file" in capsys.readouterr().err and not (tmp_path / "new").exists()


@pytest.mark.slow
def test_a_trained_cross_encoder_loads_and_reorders_term_coding_candidates(data_dir, tmp_path, mini, capsys):
    out = tmp_path / "ce"
    assert main(["reranker", "--sources", str(data_dir / "mini.obo"), "--max-concepts", "20", "--batch-size", "4",
                 "--out", str(out), "--json"]) == 0
    record = json.loads(capsys.readouterr().out)
    assert record["rows"] > 0 and json.loads((out / "reranker.json").read_text())["rows"] == record["rows"]
    assert (out / "model.safetensors").stat().st_size < 60 * 2**20  # float16
    assert not (tmp_path / "ce.partial").exists()
    regrain = OntologyReranker(Reranker("cross-encoder", model=str(out), weight=10.0), mini)
    top = [("MINI:0000010", 0.9), ("MINI:0000011", 0.89), ("MINI:0000012", 0.5)]
    moved = regrain(top, exact=(), term="heart attack")
    assert sorted(moved) == sorted(top) and len(moved) == 3
    assert regrain(top, exact={"MINI:0000010"}, term="heart attack") == top  # an exact first is never moved
