"""Hybrid ranking (bioviz.search.hybrid): the Ranking value, normalised matches, char-tfidf on a level, and its use
in term coding and neighbour rankings over tests/data/mini.obo with char-tfidf (no transformer loaded)."""

import numpy as np
import pytest

from bioviz.errors import BiovizError
from bioviz.ontology import LevelSpec
from bioviz.search.hybrid import (DEFAULT_RANKING, HYBRID_WEIGHT, NameMatcher, Ranking, SparseNames, match_key,
                                  name_scores, ranking_of)
from bioviz.search.neighbours import candidate_index, query_vector, rank_neighbours, resolve_query, sparse_names
from bioviz.search.term_coding import code_term_list, export_frame


@pytest.fixture(autouse=True)
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("BIOVIZ_HOME", str(tmp_path))


@pytest.fixture
def level(data_dir):
    spec = LevelSpec(str(data_dir / "mini.obo"), synonyms=True)
    ontology = spec.ontology()
    return spec.load(ontology), ontology


def test_ranking_values_labels_and_bounds():
    assert Ranking("hybrid", 0.2).label == "hybrid w=0.2" and Ranking().label == "dense"
    assert ranking_of("dense") == Ranking("dense") and ranking_of("hybrid").weight == HYBRID_WEIGHT
    assert ranking_of(None).kind == DEFAULT_RANKING.kind
    with pytest.raises(BiovizError, match="unknown ranking"):
        Ranking("sparse")
    with pytest.raises(BiovizError, match="between 0 and"):
        Ranking("hybrid", -1)
    with pytest.raises(BiovizError, match="between 0 and"):
        Ranking("hybrid", float("nan"))


def test_match_key_ignores_case_spacing_and_punctuation():
    assert match_key("Heart-Attack.") == match_key(" heart  attack") == "heart attack"
    matcher = NameMatcher(["heart attack", "MI", "asthma"], ["C1", "C1", "C2"])
    assert matcher.concepts("Heart attack!") == ("C1",) and matcher.concepts("m.i.") == ()
    assert matcher.concepts("mi", "asthma") == ("C1", "C2")


def test_sparse_scores_rank_spelling_overlap(level):
    view, _ = level
    sparse = SparseNames.build(view.names, view.names)
    scores = sparse.scores(["pneumonai", "asthma"])
    assert scores.shape == (2, len(view.names))
    assert view.names[int(np.argmax(scores[0]))] == "pneumonia"
    assert scores[1, view.names.index("asthma")] == pytest.approx(1.0, abs=1e-5)
    dense = np.zeros((2, 3), dtype=np.float32)
    assert name_scores(dense, np.zeros((len(view.names), 3)), Ranking("hybrid", 0.5), sparse=sparse,
                       texts=["pneumonai", "asthma"]).max() == pytest.approx(0.5, abs=1e-5)
    with pytest.raises(BiovizError, match="char-tfidf rows"):
        name_scores(dense, np.zeros((len(view.names), 3)), Ranking("hybrid", 0.5))


def test_hybrid_coding_puts_a_punctuation_variant_first_and_marks_the_ranking(level):
    view, ontology = level
    index = candidate_index(view, "char-tfidf")
    terms = ["Heart-attack!", "pneumonai"]
    dense = code_term_list(terms, view, ontology, [("char-tfidf", index)], k=3)
    hybrid = code_term_list(terms, view, ontology, [("char-tfidf", index)], k=3, ranking=Ranking("hybrid", 0.5))
    first = hybrid.set_index("term")
    assert first.loc["Heart-attack!", "code_a"] == "MINI:0000011" and first.loc["Heart-attack!", "match"] == "exact"
    assert first.loc["pneumonai", "code_a"] == "MINI:0000021"
    assert (dense[dense["term"] == "Heart-attack!"]["match"] == "nearest").all()  # dense: only exact names
    assert set(export_frame(hybrid)["ranking"]) == {"hybrid w=0.5"} and set(export_frame(dense)["ranking"]) == {"dense"}


def test_hybrid_neighbours_lift_the_matching_concept_and_rank_under_both_models(level):
    view, _ = level
    index = candidate_index(view, "char-tfidf")
    ranking = Ranking("hybrid", 0.5)
    sparse = sparse_names(view, index, ranking)
    query = resolve_query("Heart attack.", view)
    vector = query_vector(query.text, "char-tfidf")
    rows = rank_neighbours(index, vector, query, k=4, other=(index, vector), ranking=ranking, sparse=sparse)
    names = [r["name"] for r in rows]
    concept = [n for n, c in zip(view.names, view.name_concepts) if c == "MINI:0000011"]
    assert len(concept) >= 2 and set(names[:len(concept)]) == set(concept)  # the matched concept's names first
    assert all(r["other_rank"] == r["rank"] for r in rows)  # the same model twice
    assert rows[0]["score"] >= 0 and sparse_names(view, index, Ranking()) is None
