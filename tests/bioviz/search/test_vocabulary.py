"""bioviz.search.vocabulary on tiny ontologies: how source terms reach a target's concepts (by id, by an ICD-10-CM
code's WHO category, by name), held-out concepts, the curated abbreviations, a user's synonyms file and its faults,
and the bundled terms' cache file. No package is read: the bundled terms are stubbed."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from bioviz.errors import BiovizError
from bioviz.ontology.model import Concept, Ontology
from tests.support.ontologies import flat_ontology as ontology
from bioviz.ontology.obo import load_obo
from bioviz.search import vocabulary as vocabulary_module
from bioviz.search.bundled_rows import SHARED_ENV
from bioviz.search.clinical_text import looks_like_abbreviation, term_key
from bioviz.search.vocabulary import (ABBREVIATION, ABBREVIATIONS_FILE, CLINICAL, HPO, ICD10, ICD10CM, KINDS, LAY,
                                      MAX_TARGETS, NAME, ClinicalVocabulary, VocabularyTerm, curated_abbreviations,
                                      read_user_synonyms, terms_from_bytes, terms_to_bytes)

T = VocabularyTerm
DATA = Path(__file__).resolve().parents[2] / "data"


@pytest.fixture(scope="module")
def who() -> Ontology:
    """A few WHO ICD-10 categories and subcategories (``icd10``: the system ICD-10)."""
    return ontology("icd10", [
        Concept("I10", "Essential (primary) hypertension"),
        Concept("I80", "Phlebitis and thrombophlebitis"),
        Concept("I82", "Other venous embolism and thrombosis"),
        Concept("R06", "Abnormalities of breathing"),
        Concept("R06.0", "Dyspnoea"),
        Concept("N20", "Calculus of kidney and ureter"),
        Concept("N20.0", "Calculus of kidney"),
    ])


@pytest.fixture(scope="module")
def clinic() -> Ontology:
    """tests/data/clinic.obo: eight findings under one root (its source label: ``clinic``)."""
    return load_obo(DATA / "clinic.obo")


DVT_NAME = "Acute embolism and thrombosis of unspecified deep veins of lower extremity"
CM_TERMS = [
    T(DVT_NAME, "I82.40", DVT_NAME, ICD10CM, "code title", NAME),
    T("Deep vein thrombosis NOS", "I82.40", DVT_NAME, ICD10CM, "inclusion term", CLINICAL),
    T("DVT NOS", "I82.40", DVT_NAME, ICD10CM, "inclusion term", ABBREVIATION),
    T("Shortness of breath", "R06.02", "Shortness of breath", ICD10CM, "code title", NAME),
    T("Stone in kidney", "N20.0", "Calculus of kidney", ICD10CM, "inclusion term", CLINICAL),
    T("high blood pressure", "I10", "Essential (primary) hypertension", ICD10CM, "includes note", CLINICAL),
    T("COVID-19", "U07.1", "COVID-19", ICD10CM, "code title", NAME),  # no WHO category here
]
HPO_TERMS = [
    T("Dyspnea", "HP:0002094", "Dyspnea", HPO, "name", NAME),
    T("Trouble breathing", "HP:0002094", "Dyspnea", HPO, "layperson synonym", LAY),
    T("Hypertension", "HP:0000822", "Hypertension", HPO, "name", NAME),
    T("High blood pressure", "HP:0000822", "Hypertension", HPO, "layperson synonym", LAY),
    T("Vesicoureteral reflux", "HP:0000076", "Vesicoureteral reflux", HPO, "name", NAME),
    T("VUR", "HP:0000076", "Vesicoureteral reflux", HPO, "abbreviation", ABBREVIATION),
]


def targets(vocabulary: ClinicalVocabulary, text: str) -> dict[str, set[str]]:
    """Target concept → how source terms with ``text``'s key reached it (``""``, ``code``, ``name``)."""
    out: dict[str, set[str]] = {}
    for match in vocabulary.lookup(text):
        out.setdefault(match.concept_id, set()).add(match.via)
    return out


def test_the_targets_own_names_and_their_alternates_are_indexed_but_not_the_root(who):
    vocabulary = ClinicalVocabulary.for_ontology(who)
    assert targets(vocabulary, "essential hypertension") == {"I10": {""}}  # "(primary)" left out
    assert targets(vocabulary, "Essential primary hypertension") == {"I10": {""}}
    assert targets(vocabulary, "kidney calculus") == {"N20.0": {""}}
    assert vocabulary.lookup("root concept") == [] and vocabulary.names["ROOT"] == "root concept"
    assert vocabulary.source == "icd10" and len(vocabulary) > 0 and vocabulary.substitutions == {}
    first = vocabulary.lookup("Dyspnoea")[0]
    assert first.term.system == ICD10 and first.provenance == "ICD-10's names (R06.0)"


def test_icd10cm_terms_name_the_who_concept_of_their_codes_longest_prefix(who):
    vocabulary = ClinicalVocabulary.for_ontology(who, CM_TERMS)
    assert targets(vocabulary, "DVT") == {"I82": {"code"}}  # I82.40 → I82: WHO has no I82.4
    assert targets(vocabulary, "deep vein thrombosis") == {"I82": {"code"}}
    assert targets(vocabulary, "shortness of breath") == {"R06.0": {"code"}}  # R06.02 → R06.0
    assert targets(vocabulary, "kidney stones") == {"N20.0": {"code"}}
    assert targets(vocabulary, "high blood pressure") == {"I10": {"code"}}
    assert vocabulary.lookup("COVID-19") == []  # U07 is not in this WHO: the term is dropped, not guessed
    match = vocabulary.lookup("DVT")[0]
    assert match.provenance == "ICD-10-CM's inclusion terms (I82.40)"  # the CM code, not the WHO one
    assert "dvt" in vocabulary.abbreviations and "deep thrombosis vein" not in vocabulary.abbreviations
    assert {m.concept_id for m in vocabulary.by_initials["sob"]} == {"R06.0"}
    assert "dvt" in vocabulary.by_initials  # from "Deep vein thrombosis NOS", not from the listed "DVT NOS"
    assert all(m.term.kind != ABBREVIATION for m in vocabulary.by_initials["dvt"])


def test_terms_of_the_targets_own_system_name_their_concepts_by_id(who):
    cm = ontology("icd10cm", [Concept("I82.40", DVT_NAME), Concept("R06.02", "Shortness of breath")])
    vocabulary = ClinicalVocabulary.for_ontology(cm, CM_TERMS)
    assert targets(vocabulary, "DVT") == {"I82.40": {""}}
    assert targets(vocabulary, "kidney stones") == {}  # N20.0 is not a concept of this level
    hpo = ontology("hpo", [Concept("HP:0000076", "Vesicoureteral reflux")])
    assert targets(ClinicalVocabulary.for_ontology(hpo, HPO_TERMS), "VUR") == {"HP:0000076": {""}}


def test_hpo_concepts_are_carried_by_name_onto_who_and_onto_a_users_obo(who, clinic):
    on_who = ClinicalVocabulary.for_ontology(who, [*CM_TERMS, *HPO_TERMS])
    # HPO's "Dyspnea" is WHO's "Dyspnoea" (British spelling): its lay synonym comes along
    assert targets(on_who, "trouble breathing") == {"R06.0": {"name"}}
    match = on_who.lookup("trouble breathing")[0]
    assert match.provenance == "HPO's layperson synonyms (HP:0002094), whose 'Dyspnea' is named here"
    assert targets(on_who, "VUR") == {}  # no concept of this WHO is named "Vesicoureteral reflux"
    on_clinic = ClinicalVocabulary.for_ontology(clinic, HPO_TERMS)
    assert targets(on_clinic, "High blood pressure") == {"CLIN:0000012": {"name"}}  # clinic's "hypertension"
    assert targets(on_clinic, "trouble breathing") == {"CLIN:0000021": {"name"}}  # clinic's "dyspnoea"


def test_a_cm_code_title_carries_an_hpo_name_onto_who():
    # WHO's I10 is only "Essential (primary) hypertension": HPO's "Hypertension" meets it through CM's title of I10
    who = ontology("icd10", [Concept("I10", "Essential (primary) hypertension")])
    cm_title = T("Essential (primary) hypertension", "I10", "Hypertension", ICD10CM, "code title", NAME)
    cm_name = T("Hypertension", "I10", "Hypertension", ICD10CM, "inclusion term", CLINICAL)
    vocabulary = ClinicalVocabulary.for_ontology(who, [cm_title, cm_name, *HPO_TERMS])
    assert targets(vocabulary, "High blood pressure") == {"I10": {"name"}}


def test_a_name_shared_by_more_than_max_targets_concepts_carries_nothing():
    def many(n):
        return ontology("clinic", [Concept(f"C:{i}", f"finding {i}", ("thing",)) for i in range(n)])

    terms = [T("Thing", "HP:1", "Thing", HPO, "name", NAME),
             T("Thingummy", "HP:1", "Thing", HPO, "layperson synonym", LAY)]
    assert set(targets(ClinicalVocabulary.for_ontology(many(MAX_TARGETS), terms), "thingummy")) == \
        {f"C:{i}" for i in range(MAX_TARGETS)}
    assert targets(ClinicalVocabulary.for_ontology(many(MAX_TARGETS + 1), terms), "thingummy") == {}


def test_exclude_drops_a_concepts_source_terms_but_keeps_its_own_names(who):
    vocabulary = ClinicalVocabulary.for_ontology(who, [*CM_TERMS, *HPO_TERMS], exclude=frozenset({"I10", "R06.0"}))
    assert targets(vocabulary, "high blood pressure") == {}  # CM's includes note and HPO's lay synonym
    assert targets(vocabulary, "trouble breathing") == {} and targets(vocabulary, "shortness of breath") == {}
    assert targets(vocabulary, "essential hypertension") == {"I10": {""}}  # the level's own names stay
    assert targets(vocabulary, "dyspnoea") == {"R06.0": {""}}
    assert targets(vocabulary, "DVT") == {"I82": {"code"}}  # other concepts keep theirs
    assert all(m.concept_id not in ("I10", "R06.0") for ms in vocabulary.by_initials.values() for m in ms
               if m.term.system != ICD10)


def test_word_substitutions_are_learnt_from_placed_source_terms_only():
    fractures = ontology("clinic", [Concept("F:1", "Femur fracture"), Concept("F:2", "Wrist fracture")])
    lay = [T("Broken femur", "HP:1", "Femur fracture", HPO, "layperson synonym", LAY),
           T("Femur fracture", "HP:1", "Femur fracture", HPO, "name", NAME),
           T("Broken wrist", "HP:2", "Wrist fracture", HPO, "layperson synonym", LAY),
           T("Wrist fracture", "HP:2", "Wrist fracture", HPO, "name", NAME)]
    assert ClinicalVocabulary.for_ontology(fractures, lay).substitutions == {"broken": ("fracture",)}
    one = ontology("clinic", [Concept("F:1", "Femur fracture")])  # HP:2 reaches nothing here: one pair is too few
    assert ClinicalVocabulary.for_ontology(one, lay).substitutions == {}


def test_the_curated_abbreviations_parse_and_are_consistent():
    curated = curated_abbreviations()
    assert len(curated) >= 80
    assert curated["dvt"] == ("deep vein thrombosis",) and curated["ms"] == ("multiple sclerosis", "mitral stenosis")
    rows = [line.split("\t") for line in ABBREVIATIONS_FILE.read_text(encoding="utf-8").splitlines()
            if line.strip() and not line.startswith("#")]
    assert rows[0] == ["abbreviation", "long form"]
    for abbreviation, long_form in rows[1:]:
        # typed in capitals in the file, keyed in lower case, read as an abbreviation when typed so (DVT, T2DM);
        # a long form is text, never a code or blank
        assert abbreviation == abbreviation.strip().upper() and abbreviation.isalnum(), abbreviation
        assert looks_like_abbreviation(abbreviation), abbreviation
        assert long_form == long_form.strip() and term_key(long_form), abbreviation
        assert long_form in curated[abbreviation.casefold()]
    assert all(key == key.casefold() and len(forms) == len(set(forms)) for key, forms in curated.items())
    assert sum(map(len, curated.values())) == len(rows) - 1  # each row kept once, none lost


def test_curated_abbreviations_read_a_file_of_comments_header_and_blank_lines(tmp_path):
    path = tmp_path / "abbreviations.tsv"
    path.write_text("# a comment\nabbreviation\tlong form\n\nXY\tfirst sense \nXY\tsecond sense\nAB\tone\n",
                    encoding="utf-8")
    assert curated_abbreviations(path) == {"xy": ("first sense", "second sense"), "ab": ("one",)}


# A user's synonyms file (tests/data/clinic_synonyms.tsv: a header, ids typed in lower case too)

def test_a_users_synonyms_file_is_read_with_its_header_and_ids_in_another_case(clinic, data_dir):
    user = read_user_synonyms((data_dir / "clinic_synonyms.tsv").read_bytes(), clinic, label="clinic_synonyms.tsv")
    assert user.rows == 3 and user.skipped == () and user.summary == "3 synonyms read"
    assert [(t.term, t.concept_id, t.concept_name, t.kind) for t in user.terms] == [
        ("cardio puffs", "CLIN:0000021", "dyspnoea", LAY),  # clin:0000021 as the ontology spells it
        ("ZQX", "CLIN:0000022", "chronic cough", ABBREVIATION),  # capitals: an abbreviation
        ("the wobbles", "CLIN:0000023", "wheezing", LAY)]
    assert {(t.system, t.origin) for t in user.terms} == {("clinic_synonyms.tsv", "synonyms file")}
    # no header, a BOM, CRLF line ends and blank lines are fine too
    plain = read_user_synonyms("\ufeffcardio puffs\tCLIN:0000021\r\n\r\nthe wobbles\tclin:0000023\r\n".encode(), clinic)
    assert [t.concept_id for t in plain.terms] == ["CLIN:0000021", "CLIN:0000023"] and plain.rows == 2


def test_a_users_synonyms_name_their_concepts_on_that_ontology(clinic, data_dir):
    user = read_user_synonyms((data_dir / "clinic_synonyms.tsv").read_bytes(), clinic, label="clinic_synonyms.tsv")
    vocabulary = ClinicalVocabulary.for_ontology(clinic, user.terms)
    assert targets(vocabulary, "Cardio puffs") == {"CLIN:0000021": {""}}
    assert targets(vocabulary, "wobbles") == {"CLIN:0000023": {""}}  # "the" is no content word
    assert "zqx" in vocabulary.abbreviations
    assert vocabulary.lookup("ZQX")[0].provenance == "clinic_synonyms.tsv's synonyms files (CLIN:0000022)"


def test_some_unknown_ids_are_skipped_and_summarised(clinic):
    data = "term\tconcept_id\nthe wobbles\tCLIN:0000023\nmystery\tCLIN:9999999\n\tCLIN:0000021\nfoo\tnope\n"
    user = read_user_synonyms(data.encode(), clinic)
    assert [t.term for t in user.terms] == ["the wobbles"] and user.rows == 4
    # the file's own line numbers: the header is line 1
    assert user.skipped == ("line 3: unknown concept id 'CLIN:9999999'", "line 4: an empty term",
                            "line 5: unknown concept id 'nope'")
    assert user.summary == "1 synonym read (3 rows skipped: line 3: unknown concept id 'CLIN:9999999' ...)"
    one = read_user_synonyms(b"the wobbles\tCLIN:0000023\nmystery\tX:1\n", clinic)
    assert one.summary == "1 synonym read (1 rows skipped: line 2: unknown concept id 'X:1')"


def one_line_error(data: bytes, ontology: Ontology) -> str:
    with pytest.raises(BiovizError) as error:
        read_user_synonyms(data, ontology)
    message = str(error.value)
    assert "\n" not in message and message
    return message


def test_a_synonyms_file_that_is_not_utf8_is_refused_in_one_line(clinic):
    message = one_line_error("fièvre\tCLIN:0000021\n".encode("latin-1"), clinic)
    assert message == "the synonyms file is not UTF-8 text (byte 2)"  # the offset of the first bad byte


def test_a_synonyms_file_over_the_size_bound_is_refused_before_it_is_read(clinic, monkeypatch):
    monkeypatch.setattr(vocabulary_module, "MAX_SYNONYMS_BYTES", 64)
    small = b"the wobbles\tCLIN:0000023\n"
    assert len(read_user_synonyms(small, clinic).terms) == 1
    message = one_line_error(small * 3 + b"\xff", clinic)  # too large is said before "not UTF-8"
    assert message.startswith("the synonyms file has ") and "MiB: at most" in message


def test_a_synonyms_file_of_three_columns_is_refused_naming_its_line(clinic):
    data = b"term\tconcept_id\nthe wobbles\tCLIN:0000023\nwheeze\tCLIN:0000023\textra\n"
    assert one_line_error(data, clinic) == \
        "synonyms file line 3: 3 tab-separated fields, expected 'term<TAB>concept_id'"
    assert one_line_error(b"no tab here\n", clinic).startswith("synonyms file line 1: 1 tab-separated fields")


def test_a_synonyms_file_naming_no_concept_or_empty_is_refused(clinic):
    message = one_line_error(b"term\tconcept_id\nmystery\tX:1\nenigma\tX:2\n", clinic)
    assert message == "no row of the synonyms file names a concept of clinic: line 2: unknown concept id 'X:1'"
    assert one_line_error(b"term\tconcept_id\n\n", clinic).startswith("the synonyms file has no rows")
    assert one_line_error(b"", clinic).startswith("the synonyms file has no rows")


def test_a_synonyms_file_of_too_many_rows_or_an_overlong_term(clinic, monkeypatch):
    monkeypatch.setattr(vocabulary_module, "MAX_SYNONYM_ROWS", 2)
    assert one_line_error(b"a\tCLIN:0000023\nb\tCLIN:0000023\nc\tCLIN:0000023\n", clinic) == \
        "the synonyms file has 3 rows: at most 2"
    user = read_user_synonyms(b"a\tCLIN:0000023\n" + b"x" * 301 + b"\tCLIN:0000023\n", clinic)
    assert user.skipped == ("line 2: a term over 300 characters",)


# The bundled terms' cache file (the packages are not read: their parsers are stubbed)

def test_terms_round_trip_through_bytes_and_damage_is_a_value_error():
    terms = [*CM_TERMS, *HPO_TERMS]
    assert terms_from_bytes(terms_to_bytes(terms)) == terms
    assert terms_to_bytes(terms) == terms_to_bytes(terms)  # no timestamp in the gzip header
    for damaged in (b"garbage", gzip.compress(b"[1, 2]"), gzip.compress(b'{"format": 1, "terms": [["a", "b"]]}'),
                    gzip.compress(b'{"format": 1, "terms": [["a", "b", "c", "d", "e", "not a kind"]]}'),
                    gzip.compress(b'{"format": 999, "terms": []}')):
        with pytest.raises(ValueError):
            terms_from_bytes(damaged)
    assert set(KINDS) == {NAME, CLINICAL, LAY, ABBREVIATION}


def test_hpo_terms_keep_names_exact_lay_and_abbreviation_synonyms(tmp_path):
    obo = tmp_path / "hp.obo"
    obo.write_text("""format-version: 1.2
ontology: hp

[Term]
id: HP:0000822
name: Hypertension
synonym: "High blood pressure" EXACT layperson []
synonym: "Elevated blood pressure" EXACT []
synonym: "Arterial hypertension" RELATED []
synonym: "HTN" EXACT abbreviation []
synonym: "Pressure up" BROAD layperson []

[Term]
id: HP:0000001
name: Obsolete thing
is_obsolete: true
""", encoding="utf-8")
    terms = vocabulary_module._hpo_terms(obo)
    assert [(t.term, t.origin, t.kind) for t in terms] == [
        ("Hypertension", "name", NAME), ("High blood pressure", "layperson synonym", LAY),
        ("Elevated blood pressure", "exact synonym", NAME), ("HTN", "abbreviation", ABBREVIATION)]
    assert {(t.concept_id, t.concept_name, t.system) for t in terms} == {("HP:0000822", "Hypertension", HPO)}


def test_an_inclusion_term_of_one_capitalised_token_is_an_abbreviation():
    assert [vocabulary_module._cm_kind(t) for t in ("DVT NOS", "COPD", "Deep vein thrombosis NOS", "Dvt")] == \
        [ABBREVIATION, ABBREVIATION, CLINICAL, CLINICAL]


@pytest.fixture
def stubbed_packages(tmp_home, monkeypatch):
    """The bundled parsers replaced by tiny lists; returns how often each ran."""
    monkeypatch.delenv(SHARED_ENV, raising=False)  # the tiny lists go to this home, not the session's cache
    calls = {"hpo": 0, "cm": 0}

    def hpo(path):
        calls["hpo"] += 1
        return list(HPO_TERMS)

    def cm():
        calls["cm"] += 1
        return list(CM_TERMS)

    monkeypatch.setattr(vocabulary_module, "_hpo_terms", hpo)
    monkeypatch.setattr(vocabulary_module, "_icd10cm_terms", cm)
    monkeypatch.setattr("bioviz.ontology.obo.hpo_path", lambda: tmp_home / "hp.obo")
    monkeypatch.setattr(vocabulary_module, "_bundled", {})
    monkeypatch.setattr(vocabulary_module, "_indexed", {})
    return calls


def test_the_bundled_terms_are_read_once_cached_in_the_home_and_a_damaged_file_rebuilt(stubbed_packages, tmp_home,
                                                                                      monkeypatch):
    assert not vocabulary_module.bundled_ready()
    steps = []
    terms = vocabulary_module.bundled_terms(progress=lambda done, total: steps.append((done, total)))
    assert terms == [*HPO_TERMS, *CM_TERMS] and steps == [(0, 2), (1, 2), (2, 2)]
    path = vocabulary_module.bundled_path()
    assert path.is_file() and path.parent == tmp_home / "vocabulary" and path.name.endswith(".json.gz")
    assert vocabulary_module.bundled_terms() is terms  # from memory
    monkeypatch.setattr(vocabulary_module, "_bundled", {})
    assert vocabulary_module.bundled_ready()  # on disk
    assert vocabulary_module.bundled_terms() == terms and stubbed_packages == {"hpo": 1, "cm": 1}  # from the file
    path.write_bytes(b"garbage")
    monkeypatch.setattr(vocabulary_module, "_bundled", {})
    assert vocabulary_module.bundled_terms() == terms and stubbed_packages == {"hpo": 2, "cm": 2}  # rebuilt
    assert list(path.parent.glob("*.corrupt-*"))


def test_vocabulary_for_is_indexed_once_per_ontology_and_users_file(stubbed_packages, who, clinic, data_dir):
    first = vocabulary_module.vocabulary_for(who)
    assert vocabulary_module.vocabulary_for(who) is first
    assert targets(first, "DVT") == {"I82": {"code"}}
    user = read_user_synonyms((data_dir / "clinic_synonyms.tsv").read_bytes(), clinic, label="mine.tsv")
    plain, with_user = vocabulary_module.vocabulary_for(clinic), vocabulary_module.vocabulary_for(clinic, user)
    assert plain is not with_user and vocabulary_module.vocabulary_for(clinic, user) is with_user
    assert targets(plain, "the wobbles") == {} and targets(with_user, "the wobbles") == {"CLIN:0000023": {""}}


def test_a_shared_bundled_cache_folder_serves_every_home(stubbed_packages, tmp_path, monkeypatch):
    shared = tmp_path / "shared"
    monkeypatch.setenv(SHARED_ENV, str(shared))
    terms = vocabulary_module.bundled_terms()
    assert vocabulary_module.bundled_path().parent == shared / "vocabulary" and stubbed_packages == {"hpo": 1, "cm": 1}
    monkeypatch.setenv("BIOVIZ_HOME", str(tmp_path / "another-home"))
    monkeypatch.setattr(vocabulary_module, "_bundled", {})
    assert vocabulary_module.bundled_terms() == terms and stubbed_packages == {"hpo": 1, "cm": 1}  # read, not built
    assert not (tmp_path / "another-home" / "vocabulary").exists()
