"""Progressive answers: exact matches first, then char-tfidf over every name merged with the dense ranking
over the names encoded so far (bioviz.search.progressive), read through an EncodingSession."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np

from bioviz.models.encoding_session import EncodingSession, PartialVectors
from bioviz.models.vector_cache import VectorCache
from bioviz.search.hybrid import SparseNames
from bioviz.search.neighbours import QueryInfo, resolve_query
from bioviz.search.progressive import (LexicalRanking, PartialAnswer, fuse, partial_coding,
                                       partial_neighbours)

NAMES = ["Hesitancy of micturition", "Urinary hesitancy", "Retention of urine", "Poor urinary stream",
         "Fracture of femur", "Broken hip", "Heart attack", "Myocardial infarction"]
CONCEPTS = ["R39.11", "R39.11", "R33", "R39.12", "S72", "S72.0", "I21", "I21"]
LABELS = [0, 0, 0, 0, 1, 1, 2, 2]


def level():
    return SimpleNamespace(names=NAMES, name_concepts=CONCEPTS, labels=np.asarray(LABELS),
                           classes=["R", "S", "I"], class_labels=["Symptoms", "Injuries", "Circulatory"],
                           class_of=lambda text: None)  # no row lookup: find_query scans the names


def unit(rows):
    rows = np.asarray(rows, dtype=np.float32)
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def partial_of(rows, vectors):
    return PartialVectors(len(NAMES), np.asarray(rows, dtype=np.int64), unit(vectors))


def test_fuse_rewards_names_found_by_both_rankings_and_skips():
    assert fuse([np.array([3, 1, 2]), np.array([2, 4])], 4) == [2, 3, 1, 4]
    assert fuse([np.array([3, 1]), np.array([1])], 2, skip={1}) == [3]
    # a ranking over a tenth of the names: its first is worth a tenth rank of the full ranking
    assert fuse([np.array([3, 1]), np.array([5])], 3, scales=[1.0, 10.0]) == [3, 1, 5]


def test_an_exact_match_comes_first_whatever_is_encoded(tmp_home):
    view = level()
    sparse = SparseNames.build(view.names, view.names)
    query = QueryInfo("urinary  HESITANCY", typed="urinary  HESITANCY")  # a name, but for case and spacing
    # only the heart names are encoded, and the query vector points at them: dense alone would rank them first
    partial = partial_of([6, 7], [[1, 0], [0.9, 0.1]])
    answer = partial_neighbours(view, partial, query, query_vector=unit([[1, 0]])[0],
                                lexical=LexicalRanking.by_tfidf(sparse, query.text), k=4)
    assert answer.rows[0]["concept_id"] == "R39.11" and answer.rows[0]["via"] == "exact"
    # the concept's other name first; the query's own name is no neighbour of it
    assert answer.rows[0]["name"] == "Hesitancy of micturition"
    assert "Urinary hesitancy" not in [r["name"] for r in answer.rows]
    assert not answer.complete and answer.marker == "partial: 2 of 8 names encoded, refining"


def test_a_name_not_yet_encoded_is_found_by_char_tfidf(tmp_home):
    view = level()
    sparse = SparseNames.build(view.names, view.names)
    query = QueryInfo("fracture of the femur")
    partial = partial_of([6, 7], [[1, 0], [0.9, 0.1]])  # femur (row 4) not encoded
    answer = partial_neighbours(view, partial, query, query_vector=unit([[1, 0]])[0],
                                lexical=LexicalRanking.by_tfidf(sparse, query.text), k=3)
    femur = next(r for r in answer.rows if r["name"] == "Fracture of femur")
    assert femur["via"] == "lexical" and math.isnan(femur["score"])


def test_the_query_name_is_left_out_and_dense_names_carry_their_cosine(tmp_home):
    view = level()
    sparse = SparseNames.build(view.names, view.names)
    query = resolve_query("Heart attack", view)
    partial = partial_of(range(8), np.eye(8)[:, :8] + 0.01)
    answer = partial_neighbours(view, partial, query, query_vector=partial.vectors[7],
                                lexical=LexicalRanking.by_tfidf(sparse, query.text), k=3)
    assert "Heart attack" not in [r["name"] for r in answer.rows]
    assert answer.rows[0]["name"] == "Myocardial infarction" and answer.rows[0]["score"] > 0.9
    assert answer.complete and answer.marker == "complete: all 8 names encoded"


def test_restrict_class_keeps_the_class(tmp_home):
    view = level()
    sparse = SparseNames.build(view.names, view.names)
    query = QueryInfo("urinary", class_id="R")
    answer = partial_neighbours(view, PartialVectors.empty(8), query, query_vector=None,
                                lexical=LexicalRanking.by_tfidf(sparse, "hip fracture"), k=5, restrict_class="S")
    assert answer.rows and all(r["class_id"] == "S" for r in answer.rows)


def test_name_search_stands_in_for_char_tfidf():
    from bioviz.search.name_search import NameSearch

    view = level()
    lexical = LexicalRanking.by_name_search(NameSearch(view.names, view.name_concepts), view.names, "hesit urin")
    assert lexical.kind == "name search" and NAMES.index("Urinary hesitancy") in lexical.rows.tolist()


def test_partial_coding_gives_exact_codes_then_merged_ones(tmp_home):
    view = level()
    sparse = SparseNames.build(view.names, view.names)
    terms = ["R39.11", "broken hip bone"]
    infos = [resolve_query(t, view) for t in terms]
    partial = partial_of([6], [[1, 0]])
    coding = partial_coding(terms, infos, view, partial, term_vectors=unit([[1, 0], [1, 0]]),
                            lexicals=[LexicalRanking.by_tfidf(sparse, i.text) for i in infos], k=2)
    first, second = coding.rows
    assert (first["code"], first["match"], first["score"]) == ("R39.11", "exact", 1.0)
    assert "S72.0" in (second["code"], second["others"])  # "Broken hip" is not encoded: found by its spelling
    assert coding.marker == "partial: 1 of 8 names encoded, refining"


class _Encoder:
    fingerprint, label = "fp-test", "test"


def test_the_session_reads_the_rows_stored_so_far_incrementally(tmp_home):
    names = [f"name {i}" for i in range(3000)]
    session = EncodingSession(_Encoder(), tuple(names))
    assert session.partial().done == 0 and not session.ready()
    cache = VectorCache()
    cache.put("fp-test", names[:1000], unit(np.ones((1000, 4))))
    first = session.partial()
    assert first.done == 1000 and sorted(first.rows.tolist()) == list(range(1000))
    assert session.partial(first) is first  # nothing stored since: nothing read
    cache.put("fp-test", names[1000:1500], unit(np.ones((500, 4))))
    second = session.partial(first)
    assert second.done == 1500 and not second.complete and second.vectors.shape == (1500, 4)
    cache.put_block("fp-test", names, unit(np.ones((3000, 4))))
    assert session.ready() and session.partial(second).complete
    assert isinstance(PartialAnswer((), 1, 1), PartialAnswer)


def test_a_background_encoding_is_shared_followed_and_its_error_told_once(tmp_home, monkeypatch):
    from bioviz.errors import BiovizError
    from bioviz.models.cached_encoding import DELAY_ENV
    from bioviz.models.encoding_session import background_encoding, encode_in_background

    monkeypatch.setenv(DELAY_ENV, "0.01")
    names = [f"kind {i} of class {i % 4} disorder" for i in range(400)]
    session = EncodingSession.of("char-tfidf", names, owner="a command")
    job = encode_in_background(session)
    assert encode_in_background(session) is job and background_encoding(session) is job  # one thread per level
    seen = []
    while not job.wait(0.2):
        partial = session.partial(seen[-1] if seen else None)
        seen.append(partial)
    assert job.error is None and session.ready() and session.partial().complete
    assert seen and seen[0].done < 400 and [p.done for p in seen] == sorted(p.done for p in seen)

    def broken(self, **_):
        raise BiovizError("the model cannot be read")

    monkeypatch.setattr(EncodingSession, "encode", broken)
    other = EncodingSession.of("char-tfidf", names[:300], owner="a command")
    failed = encode_in_background(other)
    failed.wait(30)
    assert isinstance(failed.error, BiovizError)
    assert encode_in_background(other) is failed  # told once to whoever asks next...
    again = encode_in_background(other)
    assert again is not failed  # ...then started again
    assert again.wait(30) and isinstance(again.error, BiovizError)  # (still broken: nothing left running)


def test_char_tfidf_rows_built_in_a_child_process_are_those_built_here(tmp_home, caplog):
    from bioviz.search.progressive import sparse_names_aside

    aside = sparse_names_aside(NAMES)
    assert not [r for r in caplog.records if "child process failed" in r.getMessage()]  # not the fallback
    assert list((tmp_home / "models").glob("level-tfidf-*.npz"))  # the child wrote the fit where this process reads it
    here = SparseNames.build(NAMES, NAMES)
    assert np.allclose(aside.scores(["urinary hesitancy"]), here.scores(["urinary hesitancy"]))


def test_an_expanded_form_ranks_as_the_full_ranking_does(tmp_home):
    from bioviz.search.progressive import QueryForm

    view = level()
    sparse = SparseNames.build(view.names, view.names)
    query = QueryInfo("cardiac infarct")  # free text: no name of the level equals it
    partial = partial_of([0, 2, 4], [[1, 0], [0.8, 0.2], [0, 1]])  # the heart names are not encoded yet
    plain = partial_neighbours(view, partial, query, query_vector=unit([[1, 0]])[0],
                               lexical=LexicalRanking.by_tfidf(sparse, query.text), k=3)
    assert plain.rows[0]["via"] != "exact"
    # its lexicon form "Myocardial infarction" names a concept of the level: its names come first, and each
    # encoded name keeps its best cosine against the query and the form
    form = QueryForm("Myocardial infarction", unit([[0, 1]])[0], LexicalRanking.by_tfidf(sparse, "Myocardial infarction"))
    answer = partial_neighbours(view, partial, query, query_vector=unit([[1, 0]])[0],
                                lexical=LexicalRanking.by_tfidf(sparse, query.text), k=4, forms=[form])
    assert [r["name"] for r in answer.rows[:2]] == ["Heart attack", "Myocardial infarction"]
    assert {r["via"] for r in answer.rows[:2]} == {"exact"}
    femur = next(r for r in answer.rows if r["name"] == "Fracture of femur")
    assert femur["score"] > 0.99  # its cosine against the form (1), not against the query (0)
    assert answer.order[:len(answer.rows)] == tuple(r["row"] for r in answer.rows)


def test_rank_changes_compare_two_partial_rankings():
    from bioviz.search.progressive import with_rank_changes

    def answer(rows):
        return PartialAnswer(tuple({"rank": i, "row": r} for i, r in enumerate(rows[:2], start=1)), 1, 8,
                             order=tuple(rows))

    a, b = answer([5, 3, 7]), answer([3, 7, 1])
    compared = with_rank_changes(a, b)
    assert [(r["other_rank"], r["rank_change"]) for r in compared.rows] == [(None, None), (1, -1)]
    assert [r["rank_change"] for r in with_rank_changes(b, a).rows] == [1, 1]
