"""bioviz.search.query_reading on tiny vocabularies: which rule reads a query, the senses it places, and the note
that names where they came from. No model and no bundled package: the source terms are written here."""

from __future__ import annotations

from pathlib import Path

import pytest

from bioviz.ontology.model import Concept
from tests.support.ontologies import flat_ontology as ontology
from bioviz.ontology.obo import load_obo
from bioviz.search.query_reading import (ABBREVIATION_RULE, AMBIGUOUS, DENSE, MAX_PLACED, REWRITTEN, RULES,
                                         VOCABULARY, read_query, substitution_pairs, word_substitutions)
from bioviz.search.vocabulary import (ABBREVIATION, HPO, ICD10CM, LAY, NAME, ClinicalVocabulary, VocabularyTerm,
                                      read_user_synonyms)

T = VocabularyTerm
DATA = Path(__file__).resolve().parents[2] / "data"


@pytest.fixture(scope="module")
def clinic_vocabulary() -> ClinicalVocabulary:
    """tests/data/clinic.obo with a few HPO- and ICD-10-CM-like terms (carried by name) and the user's synonyms file."""
    clinic = load_obo(DATA / "clinic.obo")
    hpo = [T("Wheezing", "HP:A", "Wheezing", HPO, "name", NAME),
           T("QQ", "HP:A", "Wheezing", HPO, "abbreviation", ABBREVIATION),
           T("Chronic cough", "HP:B", "Chronic cough", HPO, "name", NAME),
           T("QQ", "HP:B", "Chronic cough", HPO, "abbreviation", ABBREVIATION),
           T("Hacking cough", "HP:B", "Chronic cough", HPO, "layperson synonym", LAY),
           T("Hypertension", "HP:0000822", "Hypertension", HPO, "name", NAME),
           T("High blood pressure", "HP:0000822", "Hypertension", HPO, "layperson synonym", LAY),
           T("Vesicoureteral reflux", "HP:0000076", "Vesicoureteral reflux", HPO, "name", NAME),  # not on clinic
           T("VUR", "HP:0000076", "Vesicoureteral reflux", HPO, "abbreviation", ABBREVIATION)]
    cm = [T("Wheezing", "R06.2", "Wheezing", ICD10CM, "code title", NAME),
          T("QQ NOS", "R06.2", "Wheezing", ICD10CM, "inclusion term", ABBREVIATION)]
    user = read_user_synonyms((DATA / "clinic_synonyms.tsv").read_bytes(), clinic, label="clinic_synonyms.tsv")
    return ClinicalVocabulary.for_ontology(clinic, [*hpo, *cm, *user.terms])


@pytest.fixture(scope="module")
def findings() -> ClinicalVocabulary:
    """A flat level: fractures (HPO's lay pairs teach broken → fracture), two CC and two MS concepts, a vague name."""
    level = ontology("findings", [
        Concept("F:1", "Femur fracture"), Concept("F:2", "Wrist fracture"), Concept("F:3", "Fracture of hip"),
        Concept("C:1", "Chronic cough"), Concept("C:2", "Cardiac concussion"),
        Concept("M:1", "Multiple sclerosis"), Concept("M:2", "Mitral stenosis"),
        Concept("X:1", "Purple quivering rash"),
        *[Concept(f"V:{i}", f"vague thing {i}", ("odd feeling",)) for i in range(MAX_PLACED + 1)]])
    terms = [T("Broken femur", "HP:1", "Femur fracture", HPO, "layperson synonym", LAY),
             T("Femur fracture", "HP:1", "Femur fracture", HPO, "name", NAME),
             T("Broken wrist", "HP:2", "Wrist fracture", HPO, "layperson synonym", LAY),
             T("Wrist fracture", "HP:2", "Wrist fracture", HPO, "name", NAME),
             # an abbreviation a source lists beside the long form it abbreviates (as ICD-10-CM's "DVT NOS")
             T("Purple quivering rash", "X01.1", "Purple quivering rash", ICD10CM, "inclusion term", NAME),
             T("PQR NOS", "X01.1", "Purple quivering rash", ICD10CM, "inclusion term", ABBREVIATION)]
    return ClinicalVocabulary.for_ontology(level, terms)


def test_an_abbreviation_a_source_lists_is_expanded_to_its_concept(findings):
    reading = read_query("PQR", findings)
    assert reading.rule == ABBREVIATION_RULE and not reading.ambiguous
    assert reading.placed == (("X:1",),) and reading.forms == ("purple quivering rash",)
    assert reading.note == ("PQR → purple quivering rash (X:1 Purple quivering rash), "
                            "from ICD-10-CM's inclusion terms (X01.1), whose 'Purple quivering rash' is named here")


def test_a_users_abbreviation_and_lay_term_are_read_with_the_file_named(clinic_vocabulary):
    reading = read_query("ZQX", clinic_vocabulary)
    assert reading.rule == ABBREVIATION_RULE and reading.placed == (("CLIN:0000022",),)
    assert reading.note == ("ZQX → chronic cough (CLIN:0000022 chronic cough), "
                            "from clinic_synonyms.tsv's synonyms files (CLIN:0000022)")
    reading = read_query("Cardio puffs", clinic_vocabulary)
    assert reading.rule == VOCABULARY and reading.placed == (("CLIN:0000021",),)
    assert reading.note == ("Cardio puffs → CLIN:0000021 dyspnoea, "
                            "from clinic_synonyms.tsv's synonyms files (CLIN:0000021)")


def test_an_abbreviation_no_source_lists_is_read_from_initials(clinic_vocabulary):
    reading = read_query("RBP", clinic_vocabulary)  # clinic's "raised blood pressure"
    assert reading.rule == ABBREVIATION_RULE and reading.guessed
    assert reading.placed == (("CLIN:0000012",),) and reading.forms == ("raised blood pressure",)  # one sense: placed
    assert reading.note == ("RBP → raised blood pressure (CLIN:0000012 hypertension), "
                            "from clinic's synonyms (CLIN:0000012)")


def test_bioviz_abbreviations_come_first_and_the_note_says_so(clinic_vocabulary):
    for typed in ("SOB", "sob"):  # a listed abbreviation of three letters or more is read in lower case too
        reading = read_query(typed, clinic_vocabulary)
        assert reading.rule == ABBREVIATION_RULE and reading.placed == (("CLIN:0000021",),)
        assert reading.note == (f"{typed} → shortness of breath (CLIN:0000021 dyspnoea), "
                                "from bioviz's clinical abbreviations, then clinic's synonyms (CLIN:0000021)")
    assert read_query("DVT", clinic_vocabulary).placed == (("CLIN:0000011",),)
    assert read_query("HTN", clinic_vocabulary).forms == ("hypertension",)
    # a listed abbreviation that is also an English word is read as a word in lower case
    assert read_query("cad", clinic_vocabulary).rule == DENSE
    # a long form the level lacks (MS: neither sense is a clinic concept) places nothing
    assert read_query("MS", clinic_vocabulary).rule == DENSE


def test_an_ambiguous_abbreviation_lists_every_sense_in_order(findings, clinic_vocabulary):
    reading = read_query("MS", findings)  # bioviz's list: its usual reading first
    assert reading.rule == AMBIGUOUS and reading.ambiguous and not reading.guessed
    assert [s.long_form for s in reading.senses] == ["multiple sclerosis", "mitral stenosis"]
    assert reading.placed == (("M:1",), ("M:2",)) and reading.forms == ("multiple sclerosis", "mitral stenosis")
    assert reading.note.startswith("MS is an ambiguous abbreviation, 2 senses (in their usual order): "
                                   "multiple sclerosis (M:1 Multiple sclerosis); mitral stenosis (M:2 Mitral stenosis)")
    # listed by sources for two concepts: the sense more source terms support first (not the alphabet's order)
    reading = read_query("QQ", clinic_vocabulary)
    assert reading.rule == AMBIGUOUS and [s.long_form for s in reading.senses] == ["wheezing", "chronic cough"]
    assert [s.support for s in reading.senses] == [2, 1]  # HPO's QQ and ICD-10-CM's QQ NOS
    assert reading.placed == (("CLIN:0000023",), ("CLIN:0000022",))
    assert "wheezing (CLIN:0000023 wheezing); chronic cough (CLIN:0000022 chronic cough)" in reading.note


def test_several_senses_guessed_from_initials_are_listed_but_not_placed(findings):
    reading = read_query("CC", findings)
    assert reading.rule == AMBIGUOUS and reading.guessed
    assert {s.long_form for s in reading.senses} == {"chronic cough", "cardiac concussion"}
    assert reading.placed == () and reading.forms == ()  # the model's ranking decides
    assert "guessed from its letters, none listed by a source" in reading.note


def test_a_phrase_the_vocabulary_names_is_placed(clinic_vocabulary):
    reading = read_query("High blood pressure", clinic_vocabulary)
    assert reading.rule == VOCABULARY and reading.placed == (("CLIN:0000012",),) and reading.forms == ()
    assert reading.note == ("High blood pressure → CLIN:0000012 hypertension, from HPO's layperson synonyms "
                            "(HP:0000822), whose 'Hypertension' is named here")
    # word order, plurals and case do not matter; the level's own synonyms are phrases too
    assert read_query("pressure, blood: high", clinic_vocabulary).placed == (("CLIN:0000012",),)
    assert read_query("Hacking coughs", clinic_vocabulary).placed == (("CLIN:0000022",),)
    assert read_query("deep venous thrombosis", clinic_vocabulary).placed == (("CLIN:0000011",),)
    # an abbreviation inside a phrase is no abbreviation reading
    assert read_query("DVT left leg", clinic_vocabulary).rule == DENSE


def test_a_phrase_naming_more_than_max_placed_concepts_places_none(findings):
    assert read_query("odd feeling", findings).rule == DENSE


def test_a_lay_word_the_sources_pair_with_a_clinical_one_is_rewritten(findings):
    assert findings.substitutions == {"broken": ("fracture",)}
    reading = read_query("broken hip", findings)
    assert reading.rule == REWRITTEN and reading.rewrite == "broken → fracture"
    assert reading.placed == (("F:3",),) and reading.forms == ("Fracture of hip",)
    assert reading.note == ("broken hip → F:3 Fracture of hip (read as 'Fracture of hip': broken → fracture), "
                            "from findings's names (F:3)")
    assert read_query("broken femur", findings).rule == VOCABULARY  # listed as it is: no rewrite needed


@pytest.mark.parametrize("text", ["purple elephant", "broken leg", "of the", "", "   ", "VUR", "PQ", "cough"])
def test_anything_else_is_left_to_the_dense_ranking(findings, clinic_vocabulary, text):
    for vocabulary in (findings, clinic_vocabulary):
        reading = read_query(text, vocabulary)
        assert reading.rule == DENSE and reading.senses == () and reading.placed == () and reading.forms == ()
        assert reading.note == "" and reading.rewrite == "" and not reading.ambiguous
    assert DENSE in RULES and RULES[-1] == DENSE  # the last rule: what no other rule reads


def test_word_substitutions_need_enough_pairs_and_skip_classifier_words():
    pairs = [("Broken humerus", "Humerus fracture"), ("Broken wrist", "Wrist fracture"),
             ("Other cough", "Chronic cough"), ("Other wheeze", "Chronic wheeze"),  # a classifier's word: never
             ("Sore throat", "Throat pain")]  # one pair: too few
    assert word_substitutions(pairs) == {"broken": ("fracture",)}
    assert word_substitutions(pairs, min_pairs=1) == {"broken": ("fracture",), "sore": ("pain",)}
    many = [(f"bad {organ}", f"{organ} {word}") for word in ("pain", "ache", "injury", "damage")
            for organ in ("knee", "hip")]
    assert word_substitutions(many) == {"bad": ("pain", "ache", "injury")}  # at most three, most paired first
    terms = [T("Hypertension", "I10", "Hypertension", ICD10CM, "code title", NAME),
             T("High blood pressure", "I10", "Hypertension", ICD10CM, "includes note", LAY)]
    assert substitution_pairs(terms) == [("High blood pressure", "Hypertension")]


@pytest.mark.slow  # reads the bundled packages' terms once per home (10-30 s) and indexes them for WHO ICD-10
def test_the_public_examples_on_who_icd10_with_the_bundled_vocabulary(shared_home, monkeypatch):
    from bioviz.ontology import load_source
    from bioviz.search.vocabulary import vocabulary_for

    monkeypatch.setenv("BIOVIZ_HOME", str(shared_home))
    vocabulary = vocabulary_for(load_source("icd10"))

    def first(text: str, rule: str) -> str:
        reading = read_query(text, vocabulary)
        assert reading.rule == rule, reading
        return reading.placed[0][0]

    assert first("high blood pressure", VOCABULARY) == "I10"
    assert first("DVT", ABBREVIATION_RULE).split(".")[0] in ("I80", "I82")
    assert first("SOB", ABBREVIATION_RULE) == "R06.0"
    assert first("broken hip", REWRITTEN).split(".")[0] == "S72"
    reading = read_query("MS", vocabulary)
    assert reading.rule == AMBIGUOUS
    assert [s.long_form for s in reading.senses][:2] == ["multiple sclerosis", "mitral stenosis"]
    assert reading.placed[:2] == (("G35",), ("I05.0",))
    assert "DVT → deep vein thrombosis (I8" in read_query("DVT", vocabulary).note
