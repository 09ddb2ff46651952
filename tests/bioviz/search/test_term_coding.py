"""Coding a term list (bioviz.search.term_coding): concepts from name hits, exact codes, agreement, bounds."""

import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from bioviz.errors import BiovizError
from bioviz.models.vector_cache import VectorCache
from bioviz.ontology import level_view, load_source
from bioviz.search import coding_confidence
from bioviz.search.coding_confidence import Confidence, confidence_for
from bioviz.search.hybrid import DEFAULT_RANKING
from bioviz.search.index import NeighbourIndex
from bioviz.search.neighbours import QueryInfo, candidate_index
from bioviz.search.term_coding import (MAX_TERM_CHARS, CodingModel, agreement, check_terms, code_term_list,
                                       code_terms, export_frame, read_term_table, terms_from_column,
                                       terms_from_text)
from bioviz.space import Space, l2_normalise


# --- a hand-made level: vectors placed so the answer is known --------------------------------


def _unit(*values):
    return l2_normalise(np.array([values], dtype=np.float32))[0]


@pytest.fixture
def toy():
    """Concept C1 has twelve names near the query direction x; C2 and C3 one name each, further away."""
    names, concepts, vectors = [], [], []
    for i in range(12):
        names.append(f"c1 name {i}")
        concepts.append("C1")
        vectors.append(_unit(1.0, 0.01 * i, 0.0))
    names += ["c2 name", "c3 name"]
    concepts += ["C2", "C3"]
    vectors += [_unit(1.0, 0.5, 0.0), _unit(0.0, 1.0, 1.0)]
    view = SimpleNamespace(names=names, name_concepts=concepts, labels=np.array([0] * 12 + [0, 1]),
                           classes=["K1", "K2"], class_labels=["class one", "class two"])
    index = NeighbourIndex(Space(tuple(names), np.stack(vectors), "toy"), concept_ids=concepts)
    return view, index


def test_name_hits_are_aggregated_to_concepts_with_the_best_score(toy):
    view, index = toy
    query = _unit(1.0, 0.0, 0.0)
    frame = code_terms(["x"], [QueryInfo("x")], [CodingModel("toy", index, query[None])], view, k=2)
    # C1's twelve names fill the first name fetch: the search fetches more until a second concept appears
    row = frame.iloc[0]
    assert len(frame) == 1 and row["code_a"] == "C1" and row["others_a"] == "C2"
    assert row["score_a"] == pytest.approx(1.0, abs=1e-4)  # its best name (c1 name 0), not a mean
    second = float(_unit(1.0, 0.5, 0.0) @ query)
    assert row["margin_a"] == pytest.approx(1.0 - second, abs=1e-3)  # the gap to C2's best name
    assert row["class_a"] == "class one" and row["match"] == "nearest"


def test_two_models_are_each_ranked_by_their_own_scores(toy):
    view, index = toy
    # model B places C3's name on the query and C1's names away from it
    vectors_b = index.vectors.copy()
    vectors_b[:12] = [_unit(0.0, 1.0, 0.01 * i) for i in range(12)]
    vectors_b[13] = _unit(1.0, 0.0, 0.2)
    index_b = NeighbourIndex(Space(index.space.names, vectors_b, "moved"), concept_ids=index.concept_ids)
    query = _unit(1.0, 0.0, 0.0)
    models = [CodingModel("toy", index, query[None]), CodingModel("moved", index_b, query[None])]
    frame = code_terms(["x"], [QueryInfo("x")], models, view, k=1)
    row = frame.iloc[0]
    assert len(frame) == 1 and (row["code_a"], row["code_b"]) == ("C1", "C3")  # one row: each model's first
    assert row["score_b"] == pytest.approx(float(_unit(1.0, 0.0, 0.2)[0]), abs=1e-4)
    assert row["others_a"] == row["others_b"] == ""  # k=1: no other codes
    assert not row["agree"] and row["overlap"] == 0
    assert agreement(frame) == {"terms": 1, "exact": 0, "low_confidence": 0, "same_top1": 0, "mean_overlap": 0.0}


def test_a_low_score_or_a_close_second_concept_flags_the_term(toy, monkeypatch):
    view, index = toy
    query = _unit(1.0, 0.0, 0.0)
    one = [CodingModel("toy", index, query[None])]
    flag = code_terms(["x"], [QueryInfo("x")], one, view, k=2).loc[0, "low_confidence"]
    assert not flag  # no thresholds for "toy" or the default model under dense here: nothing is low
    monkeypatch.setitem(coding_confidence.THRESHOLDS, ("toy", "dense"), Confidence(1.5, 0.0))
    assert code_terms(["x"], [QueryInfo("x")], one, view, k=2).loc[0, "low_confidence"]  # score 1.0 < 1.5
    monkeypatch.setitem(coding_confidence.THRESHOLDS, ("toy", "dense"), Confidence(0.0, 0.2))
    assert code_terms(["x"], [QueryInfo("x")], one, view, k=2).loc[0, "low_confidence"]  # margin ~0.11 < 0.2
    monkeypatch.setitem(coding_confidence.THRESHOLDS, ("toy", "dense"), Confidence(0.0, 0.05))
    assert not code_terms(["x"], [QueryInfo("x")], one, view, k=2).loc[0, "low_confidence"]


def test_the_thresholds_are_those_the_dev_benchmarks_chose():
    results = Path(__file__).resolve().parents[3] / "benchmarks" / "results"
    chosen = json.loads((results / "coding_confidence.json").read_text())
    expected = {(r["model"], r["ranking"]): Confidence(r["min_score"], r["min_margin"]) for r in chosen["rows"]}
    # the default model and ranking were re-chosen on the pooled everyday and coding dev sets (issue 40)
    flags = json.loads((results / "review_flags.json").read_text())
    expected[(flags["model"], flags["ranking"])] = Confidence(flags["min_score"], flags["min_margin"])
    assert expected == coding_confidence.THRESHOLDS
    assert {rule: review for rule, review in flags["rule_review"].items()} \
        == {rule: review for rule, review in coding_confidence.RULE_REVIEW.items() if rule in flags["rule_review"]}
    pooled = flags["chosen"]["pooled"]
    figures = coding_confidence.REVIEW_FIGURES
    assert (figures.precision, list(figures.precision_ci), figures.recall, list(figures.recall_ci), figures.terms) \
        == (pooled["precision"], pooled["precision_ci"], pooled["recall"], pooled["recall_ci"], pooled["items"])
    # a model without thresholds of its own (a trained run) is judged by the default model's
    assert confidence_for("my-run", DEFAULT_RANKING) == confidence_for("med-minilm", DEFAULT_RANKING)


def test_k_and_model_count_are_checked(toy):
    view, index = toy
    one = [CodingModel("toy", index, _unit(1.0, 0.0, 0.0)[None])]
    with pytest.raises(BiovizError, match="k must be between"):
        code_terms(["x"], [QueryInfo("x")], one, view, k=0)
    with pytest.raises(BiovizError, match="one or two models"):
        code_terms(["x"], [QueryInfo("x")], one * 3, view, k=1)
    with pytest.raises(BiovizError, match="vectors"):
        code_terms(["x", "y"], [QueryInfo("x"), QueryInfo("y")], one, view, k=1)


# --- the mini ontology, with char-tfidf ---------------------------------------------------------


@pytest.fixture
def mini(data_dir, shared_home, monkeypatch):
    # the session's home: char-tfidf is fitted once there, not once per test
    monkeypatch.setenv("BIOVIZ_HOME", str(shared_home))
    ontology = load_source(str(data_dir / "mini.obo"))
    view = level_view(ontology, depth=1)
    return ontology, view, candidate_index(view, "char-tfidf")


def test_an_exact_code_or_name_resolves_to_its_concept(mini):
    ontology, view, index = mini
    terms = ["mini:0000022", "Heart  Attack", "wheezy chest"]
    frame = code_term_list(terms, view, ontology, [("char-tfidf", index)], k=3)
    first = frame.set_index("term")
    assert first.loc["mini:0000022", "code_a"] == "MINI:0000022" and first.loc["mini:0000022", "match"] == "exact"
    assert first.loc["mini:0000022", "name_a"] == "asthma" and first.loc["mini:0000022", "score_a"] == 1.0
    assert first.loc["Heart  Attack", "code_a"] == "MINI:0000011"  # a synonym of myocardial infarction
    assert first.loc["Heart  Attack", "class_a"] == "heart disease"
    assert first.loc["wheezy chest", "match"] == "nearest"
    assert not first.loc["mini:0000022", "low_confidence"]  # an exact match is never flagged
    # an exact concept is not listed twice: the rest of its top k are other concepts
    for term, row in first.iterrows():
        others = row["others_a"].split("; ")
        assert len(others) == 2 and row["code_a"] not in others, term
    assert agreement(frame)["exact"] == 2


def test_terms_are_encoded_in_one_batch_per_model_and_not_cached(mini, monkeypatch):
    ontology, view, index = mini
    from bioviz.search import vectors_query  # term coding encodes through it (a vectors file answers from names)

    calls = []
    real = vectors_query.embed

    def counting(texts, model, **kwargs):
        calls.append((model, list(texts), kwargs.get("use_cache")))
        return real(texts, model, **kwargs)

    monkeypatch.setattr(vectors_query, "embed", counting)
    before = sum(r["vectors"] for r in VectorCache().stats())
    seen = []
    frame = code_term_list(["lung infect", "MINI:0000012", "irregular beat"], view, ontology,
                           [("char-tfidf", index), ("char-tfidf", index)], k=2,
                           progress=lambda done, total: seen.append((done, total)))
    assert [c[0] for c in calls] == ["char-tfidf", "char-tfidf"]  # one call per model, all terms in it
    assert calls[0][1] == ["lung infect", "arrhythmia", "irregular beat"]  # the code is ranked as its concept's name
    assert calls[0][2] is False and sum(r["vectors"] for r in VectorCache().stats()) == before
    assert seen[-1] == (9, 9) and (6, 9) in seen  # both models' encoding, then the coding
    assert frame["agree"].all() and set(frame["overlap"]) == {2}  # one model twice: full agreement
    assert list(export_frame(frame).columns) == [
        "term", "match", "reading", *(f"{key} (char-tfidf ({x}))" for x in "AB"
                           for key in ("code", "name", "class", "score", "margin", "other codes")),
        "agree", "overlap", "low_confidence", "ranking"]


# --- input: pasted lines, uploaded tables, bounds -----------------------------------------------


def test_pasted_terms_are_stripped_deduplicated_and_bounded():
    assert terms_from_text(" asthma \n\n heart attack\nasthma\r\n") == ["asthma", "heart attack"]
    with pytest.raises(BiovizError, match="no terms to code"):
        terms_from_text(" \n \n")
    with pytest.raises(BiovizError, match="at most 3"):
        terms_from_text("a\nb\nc\nd", max_terms=3)
    with pytest.raises(BiovizError, match=f"at most {MAX_TERM_CHARS}"):
        check_terms(["x" * (MAX_TERM_CHARS + 1)])


@pytest.mark.parametrize("name, data", [
    ("terms.csv", b"id,term\n1,asthma\n2,\"heart attack, acute\"\n"),
    ("terms.tsv", b"id\tterm\n1\tasthma\n2\theart attack, acute\n"),
    ("terms.txt", b"id;term\n1;asthma\n2;heart attack, acute\n"),
    ("terms.csv", "\ufeffid,term\n1,asthma\n2,\"heart attack, acute\"\n".encode()),  # Excel's UTF-8 BOM
])
def test_an_uploaded_table_gives_the_terms_of_the_chosen_column(name, data):
    frame = read_term_table(data, name)
    assert list(frame.columns) == ["id", "term"]
    assert terms_from_column(frame, "term") == ["asthma", "heart attack, acute"]
    assert terms_from_column(frame, "id") == ["1", "2"]  # every cell is text


def test_bad_uploads_get_one_line_errors():
    with pytest.raises(BiovizError, match="not UTF-8") as error:
        read_term_table("term\nSjögren\n".encode("latin-1"), "terms.csv")
    assert "\n" not in str(error.value)
    with pytest.raises(BiovizError, match="at most 1 MiB"):
        read_term_table(b"term\n" + b"x\n" * 2**20, "terms.csv", max_bytes=2**20)
    with pytest.raises(BiovizError, match="empty"):
        read_term_table(b"  \n", "terms.csv")
    with pytest.raises(BiovizError, match="not a CSV table") as error:
        read_term_table(b"a,b\n1,2\n1,2,3\n", "terms.csv")
    assert "\n" not in str(error.value)
    with pytest.raises(BiovizError, match="more fields than the header"):
        read_term_table(b"term\nheart attack, acute\n", "terms.csv")
    frame = read_term_table(b"term,other\n,x\n", "terms.csv")
    with pytest.raises(BiovizError, match="no column 'Term'"):
        terms_from_column(frame, "Term")
    with pytest.raises(BiovizError, match="column 'term': no terms"):
        terms_from_column(frame, "term")
