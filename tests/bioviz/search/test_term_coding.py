"""Coding a term list (bioviz.search.term_coding): concepts from name hits, exact codes, agreement, bounds."""

from types import SimpleNamespace

import numpy as np
import pytest

from bioviz.errors import BiovizError
from bioviz.models.vector_cache import VectorCache
from bioviz.ontology import level_view, load_source
from bioviz.search import term_coding
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
    assert list(frame["concept_id"]) == ["C1", "C2"]
    assert frame.loc[0, "score_a"] == pytest.approx(1.0, abs=1e-4)  # its best name (c1 name 0), not a mean
    assert frame.loc[1, "score_a"] == pytest.approx(float(_unit(1.0, 0.5, 0.0) @ query), abs=1e-4)
    assert list(frame["class_label"]) == ["class one", "class one"] and set(frame["match"]) == {"nearest"}
    assert list(frame["rank"]) == [1, 2] and list(frame["rank_a"]) == [1, 2]


def test_two_models_agreement_and_scores_outside_the_other_top_k(toy):
    view, index = toy
    # model B places C3's name on the query and C1's names away from it
    vectors_b = index.vectors.copy()
    vectors_b[:12] = [_unit(0.0, 1.0, 0.01 * i) for i in range(12)]
    vectors_b[13] = _unit(1.0, 0.0, 0.2)
    index_b = NeighbourIndex(Space(index.space.names, vectors_b, "moved"), concept_ids=index.concept_ids)
    query = _unit(1.0, 0.0, 0.0)
    models = [CodingModel("toy", index, query[None]), CodingModel("moved", index_b, query[None])]
    frame = code_terms(["x"], [QueryInfo("x")], models, view, k=1)
    assert set(frame["concept_id"]) == {"C1", "C3"}  # the union of both top-1 lists
    by_concept = frame.set_index("concept_id")
    assert by_concept.loc["C1", "rank_a"] == 1 and by_concept.loc["C3", "rank_b"] == 1
    assert by_concept["rank_a"].isna()["C3"] and by_concept["rank_b"].isna()["C1"]
    # each concept still has its score under the model that did not rank it
    assert by_concept.loc["C3", "score_a"] == pytest.approx(0.0, abs=1e-4)
    assert by_concept.loc["C1", "score_b"] == pytest.approx(0.0, abs=1e-4)
    assert by_concept.loc["C3", "score_b"] == pytest.approx(float(_unit(1.0, 0.0, 0.2)[0]), abs=1e-4)
    assert not frame["same_top1"].any() and set(frame["overlap"]) == {0}
    assert agreement(frame) == {"terms": 1, "exact": 0, "same_top1": 0, "mean_overlap": 0.0}


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
    first = frame[frame["rank"] == 1].set_index("term")
    assert first.loc["mini:0000022", "concept_id"] == "MINI:0000022" and first.loc["mini:0000022", "match"] == "exact"
    assert first.loc["mini:0000022", "concept_name"] == "asthma" and first.loc["mini:0000022", "score_a"] == 1.0
    assert first.loc["Heart  Attack", "concept_id"] == "MINI:0000011"  # a synonym of myocardial infarction
    assert first.loc["Heart  Attack", "class_label"] == "heart disease"
    assert first.loc["wheezy chest", "match"] == "nearest"
    # an exact concept is not listed twice: the rest of its top k are other concepts
    for term, rows in frame.groupby("term"):
        assert rows["concept_id"].is_unique and len(rows) == 3, term
    assert agreement(frame)["exact"] == 2


def test_terms_are_encoded_in_one_batch_per_model_and_not_cached(mini, monkeypatch):
    ontology, view, index = mini
    calls = []
    real = term_coding.embed

    def counting(texts, model, **kwargs):
        calls.append((model, list(texts), kwargs.get("use_cache")))
        return real(texts, model, **kwargs)

    monkeypatch.setattr(term_coding, "embed", counting)
    before = sum(r["vectors"] for r in VectorCache().stats())
    seen = []
    frame = code_term_list(["lung infect", "MINI:0000012", "irregular beat"], view, ontology,
                           [("char-tfidf", index), ("char-tfidf", index)], k=2,
                           progress=lambda done, total: seen.append((done, total)))
    assert [c[0] for c in calls] == ["char-tfidf", "char-tfidf"]  # one call per model, all terms in it
    assert calls[0][1] == ["lung infect", "arrhythmia", "irregular beat"]  # the code is ranked as its concept's name
    assert calls[0][2] is False and sum(r["vectors"] for r in VectorCache().stats()) == before
    assert seen[-1] == (9, 9) and (6, 9) in seen  # both models' encoding, then the coding
    assert frame["same_top1"].all() and set(frame["overlap"]) == {2}  # one model twice: full agreement
    assert list(export_frame(frame).columns[7:11]) == ["rank (char-tfidf (A))", "score (char-tfidf (A))",
                                                        "rank (char-tfidf (B))", "score (char-tfidf (B))"]


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
