"""AppTest of the clinical vocabulary on Neighbours and Code terms: the rule line, an ambiguous abbreviation's senses,
the placed rows, the user's own synonyms file per source (upload or server path) and its one-line errors.

A tiny vocabulary stands in for the bundled one (ICD-10-CM and HPO: 10-20 s to read): a few HPO-like terms carried
onto tests/data/clinic.obo by name, with bioviz's own list of clinical abbreviations (``DVT``) as the app has it.
"""

from __future__ import annotations

import pytest

from tests.pages.routed_app import DATA

NEIGHBOURS, CODE_TERMS = "app_pages/4_Neighbours.py", "app_pages/7_Code_terms.py"
CLINIC = str(DATA / "clinic.obo")


@pytest.fixture
def small_vocabulary(app_home, monkeypatch):
    """The bundled vocabulary replaced by a few terms (and the bundled synonym lexicon by an empty one)."""
    from bioviz.search import lexicon, vocabulary
    from bioviz.search.vocabulary import ABBREVIATION, LAY, NAME, VocabularyTerm

    terms = [VocabularyTerm("Hypertension", "HP:0000822", "Hypertension", "HPO", "name", NAME),
             VocabularyTerm("High blood pressure", "HP:0000822", "Hypertension", "HPO", "layperson synonym", LAY),
             VocabularyTerm("CVX", "HP:0000822", "Hypertension", "HPO", "abbreviation", ABBREVIATION),
             VocabularyTerm("Wheezing", "HP:0030828", "Wheezing", "HPO", "name", NAME),
             VocabularyTerm("CVX", "HP:0030828", "Wheezing", "HPO", "abbreviation", ABBREVIATION)]
    monkeypatch.setattr(vocabulary, "bundled_terms", lambda progress=None: terms)
    monkeypatch.setattr(vocabulary, "_indexed", {})  # no index of another test's terms
    monkeypatch.setitem(lexicon._loaded, lexicon.lexicon_path().name, lexicon.Lexicon([]))
    return terms


def _neighbours(open_app, query: str, **params):
    return open_app(NEIGHBOURS, {"source": CLINIC, "depth": "1", "model_a": "minilm", "two": "0", "k": "3",
                                 "query": query, **params})


def _infos(at) -> str:
    return " ".join(i.value for i in at.info)


def _upload(at, data: bytes, name: str = "mine.tsv"):
    uploader = next(u for u in at.file_uploader if u.label.startswith("Your synonyms"))
    uploader.set_value((name, data, "text/tab-separated-values")).run()
    assert not at.exception, at.exception
    return at


def test_an_abbreviation_places_its_concept_first_and_the_rule_line_says_so(small_vocabulary, open_app):
    at = _neighbours(open_app, "DVT", two="1", model_b="med-minilm").run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    line = _infos(at)
    assert "First answer from the clinical vocabulary (abbreviation)" in line
    assert "DVT → deep vein thrombosis (CLIN:0000011 deep vein thrombosis)" in line and "from bioviz" in line
    assert len(at.table) == 2  # both models: the same placed concept first, marked
    for table in at.table:
        frame = table.value
        assert frame["Code"].iloc[0] == "CLIN:0000011"  # its other name next, then the model's ranking
        assert list(frame["Placed by"]) == ["abbreviation" if c == "CLIN:0000011" else "" for c in frame["Code"]]
    at.toggle(key="nb_expand").set_value(False).run()  # off: nothing placed, no rule line, no column
    assert not at.exception and "clinical vocabulary" not in _infos(at)
    assert "Placed by" not in at.table[0].value.columns


def test_a_lay_phrase_is_placed_by_the_vocabulary_rule(small_vocabulary, open_app):
    at = _neighbours(open_app, "high blood pressure").run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert "First answer from the clinical vocabulary (vocabulary)" in _infos(at)
    assert "HPO's layperson synonyms (HP:0000822)" in _infos(at)
    frame = at.table[0].value
    assert frame["Code"].iloc[0] == "CLIN:0000012" and frame["Placed by"].iloc[0] == "vocabulary"


def test_an_ambiguous_abbreviation_lists_every_sense(small_vocabulary, open_app):
    at = _neighbours(open_app, "CVX", k="5").run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert "ambiguous abbreviation" in _infos(at) and "2 senses" in _infos(at)
    senses, ranking = at.table[0].value, at.table[1].value  # the senses, then the ranking
    assert list(senses.columns) == ["Sense", "Long form", "Concepts", "From"]
    assert sorted(senses["Concepts"]) == ["CLIN:0000012 hypertension", "CLIN:0000023 wheezing"]
    assert all("HPO's abbreviations" in source for source in senses["From"])
    # each sense's concept placed (every name of it), in the senses' order, before the model's ranking; marked
    placed = [by == "ambiguous abbreviation" for by in ranking["Placed by"]]
    assert placed == sorted(placed, reverse=True) and set(ranking["Placed by"]) == {"ambiguous abbreviation", ""}
    assert list(dict.fromkeys(ranking["Code"][placed])) == [c.split()[0] for c in senses["Concepts"]]
    assert any("ambiguous abbreviation, 2 senses" in m.value for m in at.markdown)  # beside the ranking's title


def test_a_users_synonyms_file_makes_a_made_up_term_find_its_concept_first(small_vocabulary, open_app):
    at = _neighbours(open_app, "the wobbles").run()
    assert not at.exception and not at.error
    assert "clinical vocabulary" not in _infos(at)  # a made-up term: the model's ranking alone, said so
    assert any("First answer from the model's ranking (dense)" in c.value for c in at.caption)
    _upload(at, (DATA / "clinic_synonyms.tsv").read_bytes(), "clinic_synonyms.tsv")
    assert not at.error, [e.value for e in at.error]
    assert any("clinic_synonyms.tsv" in c.value and "3 synonyms read" in c.value for c in at.sidebar.caption)
    assert "First answer from the clinical vocabulary (vocabulary)" in _infos(at)
    assert "clinic_synonyms.tsv's synonyms files (CLIN:0000023)" in _infos(at)
    frame = at.table[0].value
    assert frame["Code"].iloc[0] == "CLIN:0000023" and frame["Placed by"].iloc[0] == "vocabulary"


@pytest.mark.slow  # four trips to the home page and back, another level encoded: about 6 s
def test_a_synonyms_file_is_kept_per_source(small_vocabulary, open_app):
    at = _neighbours(open_app, "the wobbles").run()
    _upload(at, (DATA / "clinic_synonyms.tsv").read_bytes(), "clinic_synonyms.tsv")
    # another source (chosen on the home page) has none of it; the clinic's comes back with it
    for source, kept in ((DATA / "mini.obo", False), (DATA / "clinic.obo", True)):
        at.switch_page("app_pages/0_Home.py").run()
        at.text_input(key="server_path").input(str(source)).run()
        at.button(key="use_path").click().run()
        at.switch_page(NEIGHBOURS).run()
        assert not at.exception and not at.error, [e.value for e in at.error]
        assert any("In use" in c.value and "clinic_synonyms.tsv" in c.value for c in at.sidebar.caption) == kept
    assert at.table[0].value["Code"].iloc[0] == "CLIN:0000023"


def test_a_malformed_synonyms_file_is_one_error_line_and_nothing_else_breaks(small_vocabulary, open_app):
    at = _neighbours(open_app, "DVT", k="4").run()
    _upload(at, b"deep clot\tCLIN:0000011\tan extra field\n", "broken.tsv")
    assert len(at.error) == 1 and "\n" not in at.error[0].value
    assert "broken.tsv" in at.error[0].value and "line 1: 3 tab-separated fields" in at.error[0].value
    assert "First answer from the clinical vocabulary (abbreviation)" in _infos(at)  # the page goes on
    assert at.table[0].value["Code"].iloc[0] == "CLIN:0000011"
    _upload(at, b"\xff\xfe not utf-8", "latin.tsv")
    assert len(at.error) == 1 and "not UTF-8" in at.error[0].value


def test_a_server_path_is_read_only_inside_the_shared_data_folders(small_vocabulary, open_app):
    at = _neighbours(open_app, "cardio puffs").run()
    at.text_input(key="_synonyms_path").input("/etc/passwd").run()
    next(b for b in at.sidebar.button if b.label == "Use this file").click().run()
    assert not at.exception and len(at.error) == 1
    assert "is not in a data folder this server shares" in at.error[0].value
    at.text_input(key="_synonyms_path").input(str(DATA / "clinic_synonyms.tsv")).run()
    next(b for b in at.sidebar.button if b.label == "Use this file").click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert at.table[0].value["Code"].iloc[0] == "CLIN:0000021"  # "cardio puffs" names dyspnoea in the file
    next(b for b in at.sidebar.button if b.label == "Stop using it").click().run()
    assert not at.exception and "clinical vocabulary" not in _infos(at)


def test_code_terms_shows_the_match_and_reading_and_flags_by_rule(small_vocabulary, open_app):
    at = open_app(CODE_TERMS, {"source": CLINIC, "depth": "1", "model_a": "minilm", "two": "0"}).run()
    assert not at.exception and not at.error
    _upload(at, (DATA / "clinic_synonyms.tsv").read_bytes(), "clinic_synonyms.tsv")
    at.text_area(key="ct_text").set_value("DVT\nCVX\nhigh blood pressure\nthe wobbles\nwheezing")
    next(b for b in at.button if b.label == "Code the terms").click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    table = at.dataframe[0].value.set_index("Term")
    assert {"Match", "Review"} <= set(table.columns) and "Reading" not in table.columns  # the grid fits the page
    # the readings, long notes, in their own table under the grid: only the terms the vocabulary read
    readings = next(d.value for d in at.dataframe if "Reading" in d.value.columns).set_index("Term")
    assert table.loc["DVT", "Code"] == "CLIN:0000011" and table.loc["DVT", "Match"] == "abbreviation"
    assert table.loc["high blood pressure", "Match"] == "vocabulary"
    assert table.loc["the wobbles", "Code"] == "CLIN:0000023" and "clinic_synonyms.tsv" in readings.loc["the wobbles", "Reading"]
    assert table.loc["wheezing", "Match"] == "exact" and "wheezing" not in readings.index
    assert table.loc["CVX", "Match"] == "ambiguous abbreviation" and table.loc["CVX", "Review"]  # always flagged
    assert not table.loc["DVT", "Review"] and not table.loc["high blood pressure", "Review"]  # placed: never
    assert any("always flagged" in c.value and "ambiguous abbreviation" in c.value for c in at.caption)


def test_a_partial_answer_reads_the_query_once_the_bundled_terms_are_built(small_vocabulary, monkeypatch):
    import time

    from bioviz.ontology import LevelSpec
    from bioviz.search.lexicon import DEFAULT_EXPANSION
    from bioviz.search.neighbours import resolve_query
    from ui import cache, clinical_vocabulary, progressive

    spec = LevelSpec(CLINIC, depth=1)
    ontology = spec.ontology()
    info = resolve_query("DVT", spec.load(), ontology)
    monkeypatch.setattr(cache, "level_ontology", lambda level: ontology)  # no Streamlit cache outside a page run
    monkeypatch.setattr(clinical_vocabulary, "user_synonyms", lambda level: None)
    monkeypatch.setattr(clinical_vocabulary, "synonyms_digest", lambda level: "")
    monkeypatch.setattr(progressive, "lexicon_ready", lambda: False)
    monkeypatch.setattr(progressive, "bundled_ready", lambda: False)  # a first build would compete with the encoding
    assert progressive.query_expansion(info, DEFAULT_EXPANSION, spec) is None
    monkeypatch.setattr(progressive, "bundled_ready", lambda: True)
    deadline = time.monotonic() + 30
    while (expanded := progressive.query_expansion(info, DEFAULT_EXPANSION, spec)) is None \
            and time.monotonic() < deadline:  # read in the expansion thread: the poll does not wait for it
        time.sleep(0.05)
    assert expanded is not None and expanded.rule == "abbreviation" and expanded.placed == (("CLIN:0000011",),)
    assert "deep vein thrombosis" in expanded.forms


def test_a_scripted_oversized_synonyms_upload_is_refused_before_it_is_read(small_vocabulary, open_app):
    from bioviz.search.vocabulary import MAX_SYNONYMS_BYTES

    at = _neighbours(open_app, "DVT").run()
    assert next(u for u in at.file_uploader if u.label.startswith("Your synonyms")).proto.max_upload_size_mb == 5
    _upload(at, b"deep clot\tCLIN:0000011\n" * (MAX_SYNONYMS_BYTES // 23 + 1), "huge.tsv")  # past the browser's check
    assert len(at.error) == 1 and "huge.tsv is 5.0 MiB; the limit is 5 MiB" in at.error[0].value
    assert not any("In use" in c.value for c in at.sidebar.caption) and len(at.table) == 1
