"""bioviz.search.vocabulary_vectors: the "similar term" rule on a tiny vocabulary, with vectors written here (no
model is loaded except char-tfidf fitted on a few names, for the encoding and its in-memory reuse)."""

from __future__ import annotations

import numpy as np
import pytest

from bioviz.models import char_tfidf
from bioviz.ontology.model import Concept
from bioviz.search import vocabulary_vectors as module
from bioviz.search.lexicon import QueryExpansion
from bioviz.search.neighbours import QueryInfo
from bioviz.search.query_reading import SIMILAR, QueryReading, Sense
from bioviz.search.vocabulary import CLINICAL, HPO, ICD10CM, LAY, NAME, ClinicalVocabulary, VocabularyTerm
from bioviz.search.vocabulary_vectors import (VocabularyVectors, scored_terms, similar_reading, vocabulary_vectors,
                                              with_similar_terms)
from tests.support.ontologies import flat_ontology

T = VocabularyTerm


@pytest.fixture(scope="module")
def vocabulary() -> ClinicalVocabulary:
    who = flat_ontology("icd10", [Concept("L65", "Other nonscarring hair loss"), Concept("N20", "Calculus of kidney"),
                                  Concept("R06.0", "Dyspnoea")])
    return ClinicalVocabulary.for_ontology(who, [
        T("Loss of hair", "L65.9", "Nonscarring hair loss, unspecified", ICD10CM, "inclusion term", CLINICAL),
        T("Stone in kidney", "N20.0", "Calculus of kidney", ICD10CM, "inclusion term", CLINICAL),
        T("Calculus of kidney", "N20.0", "Calculus of kidney", ICD10CM, "code title", NAME),
        T("Dyspnoea", "HP:0002094", "Dyspnoea", HPO, "name", NAME),
        T("Trouble breathing", "HP:0002094", "Dyspnoea", HPO, "layperson synonym", LAY),
    ])


def test_the_scored_terms_are_other_sources_words_not_the_levels_names_nor_cm_titles(vocabulary):
    # HPO's "Dyspnoea" carried it there by name, but it is the level's own name: the ranking scores it already
    assert set(scored_terms(vocabulary)) == {"Loss of hair", "Stone in kidney", "Trouble breathing"}


def _vectors(vocabulary) -> VocabularyVectors:
    terms = tuple(sorted(scored_terms(vocabulary)))
    found = scored_terms(vocabulary)
    return VocabularyVectors(terms, tuple(tuple(found[t]) for t in terms), np.eye(len(terms), 4, dtype=np.float32))


def test_the_nearest_term_places_its_concept_only_when_close_and_ahead_of_the_levels_names(vocabulary):
    vectors = _vectors(vocabulary)
    hair = np.zeros(4, dtype=np.float32)
    hair[list(vectors.terms).index("Loss of hair")] = 1.0
    reading = similar_reading("hair loss", hair, 0.5, vectors, names=vocabulary.names)
    assert reading is not None and reading.rule == SIMILAR and reading.placed == (("L65",),)
    assert "nearest listed term 'Loss of hair'" in reading.note and "ICD-10-CM's inclusion terms (L65.9)" in reading.note
    assert similar_reading("hair loss", hair * 0.7, 0.5, vectors) is None  # cosine 0.7 < MIN_COSINE
    assert similar_reading("hair loss", hair, 0.97, vectors) is None  # a level name nearly as near: no lead


def test_a_text_another_rule_placed_or_the_ontology_names_is_not_read_again_and_char_tfidf_never(vocabulary):
    placed = QueryExpansion("kidney stones", (), QueryReading("kidney stones", "vocabulary", (
        Sense("Stone in kidney", ("N20",), ("Calculus of kidney",), "x", 1),)))
    named = QueryExpansion("Dyspnoea")
    infos = [QueryInfo("kidney stones"), QueryInfo("Dyspnoea", row=0, concept_ids=("R06.0",))]
    vectors = np.ones((2, 4), dtype=np.float32) / 2
    out = with_similar_terms([placed, named], infos, vectors, np.zeros((3, 4)), vocabulary=vocabulary,
                             model="minilm")
    assert out == [placed, named]  # nothing left to read: no model loaded, nothing encoded
    unread = [QueryExpansion("hair loss")]
    assert with_similar_terms(unread, [QueryInfo("hair loss")], vectors[:1], np.zeros((3, 4)),
                              vocabulary=vocabulary, model="char-tfidf") == unread  # spelling cosines: not read


def test_the_terms_are_encoded_once_per_vocabulary_and_model(vocabulary, tmp_home, monkeypatch):
    monkeypatch.setattr(char_tfidf, "default_corpus", lambda: ["loss of hair", "stone in kidney", "dyspnoea",
                                                               "trouble breathing", "calculus of kidney"])
    monkeypatch.setattr(module, "_encoded", {})
    calls = []
    real = module.encode_cached
    monkeypatch.setattr(module, "encode_cached", lambda *a, **k: calls.append(1) or real(*a, **k))
    first = vocabulary_vectors(vocabulary, "char-tfidf")
    again = vocabulary_vectors(vocabulary, "char-tfidf")
    assert again is first and len(calls) == 1 and len(first) == 3
    assert np.allclose(np.linalg.norm(first.vectors, axis=1), 1.0)
