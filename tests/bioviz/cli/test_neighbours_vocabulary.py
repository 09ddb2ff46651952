"""``neighbours`` and ``code`` with the clinical vocabulary and ``--synonyms-file`` on tests/data/clinic.obo.

Cheap throughout: the bundled vocabulary and synonym lexicon are stubbed empty (no package is read), and char-tfidf
is fitted on clinic.obo's names only, in this test's own home (the session's full fit is neither needed nor
touched: the model's fingerprint is its fit's hash, so nothing cached under it reaches another test).
"""

from __future__ import annotations

import json

import pandas as pd
import pytest

from bioviz.cli import main
from bioviz.ontology.obo import load_obo


@pytest.fixture
def clinic(data_dir, tmp_home, monkeypatch):
    """clinic.obo's path, with the bundled vocabulary and lexicon empty and char-tfidf fitted on its names."""
    from bioviz.models import char_tfidf
    from bioviz.search import lexicon, vocabulary

    path = data_dir / "clinic.obo"
    names = [text for concept in load_obo(path).concepts.values() for text in concept.names]
    monkeypatch.setattr(char_tfidf, "default_corpus", lambda: list(names))
    monkeypatch.setattr(vocabulary, "bundled_terms", lambda progress=None: [])
    monkeypatch.setattr(vocabulary, "_indexed", {})  # no index of the real bundled terms, none left behind
    monkeypatch.setitem(lexicon._loaded, lexicon.lexicon_path().name, lexicon.Lexicon([]))
    return path


def run_cli(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def neighbours(capsys, clinic, query, *extra):
    code, out, err = run_cli(capsys, "neighbours", query, "--source", str(clinic), "--model", "char-tfidf",
                             "-k", "3", "--quiet", "--json", *extra)
    assert code == 0, err
    return json.loads(out)


def test_a_users_made_up_term_places_its_concept_first_and_says_from_where(capsys, clinic, data_dir):
    synonyms = str(data_dir / "clinic_synonyms.tsv")
    before = neighbours(capsys, clinic, "cardio puffs")
    assert before["first_answer_from"] == "dense" and before["reading"] is None
    assert before["neighbours"][0]["concept_id"] != "CLIN:0000021"  # char-tfidf reads "cardio": cardiovascular
    result = neighbours(capsys, clinic, "cardio puffs", "--synonyms-file", synonyms)
    first = result["neighbours"][0]
    assert first["concept_id"] == "CLIN:0000021" and first["placed"]  # dyspnoea, as the user's file says
    assert {r["concept_id"] for r in result["neighbours"][:2]} == {"CLIN:0000021"}  # both its names first
    assert not any(r["placed"] for r in result["neighbours"][2:])
    assert result["first_answer_from"] == "vocabulary"
    reading = result["reading"]
    assert reading["rule"] == "vocabulary" and reading["rewrite"] is None
    assert reading["note"] == ("cardio puffs → CLIN:0000021 dyspnoea, "
                               "from clinic_synonyms.tsv's synonyms files (CLIN:0000021)")
    assert reading["senses"] == [{"long_form": "cardio puffs", "concepts": ["CLIN:0000021"], "names": ["dyspnoea"],
                                  "from": "clinic_synonyms.tsv's synonyms files (CLIN:0000021)"}]
    assert result["expansion"] == reading["note"]


def test_an_abbreviation_of_the_users_file_and_of_bioviz_list(capsys, clinic, data_dir):
    result = neighbours(capsys, clinic, "ZQX", "--synonyms-file", str(data_dir / "clinic_synonyms.tsv"))
    assert result["first_answer_from"] == "abbreviation" and result["neighbours"][0]["concept_id"] == "CLIN:0000022"
    assert result["reading"]["senses"][0]["long_form"] == "chronic cough"
    # no file needed for a listed abbreviation whose long form is a name of the level
    result = neighbours(capsys, clinic, "DVT")
    assert result["first_answer_from"] == "abbreviation" and result["neighbours"][0]["concept_id"] == "CLIN:0000011"
    assert "bioviz's clinical abbreviations" in result["reading"]["note"]
    # --no-expand: the model's ranking alone
    result = neighbours(capsys, clinic, "DVT", "--no-expand")
    assert result["first_answer_from"] == "dense" and result["reading"] is None


@pytest.mark.parametrize("content, message", [
    (None, "no synonyms file at "),
    (b"term\tconcept_id\nthe wobbles\tX:1\n", "no row of the synonyms file names a concept of clinic"),
    (b"the wobbles\tCLIN:0000023\tmore\n", "synonyms file line 1: 3 tab-separated fields"),
    (b"fi\xe8vre\tCLIN:0000021\n", "the synonyms file is not UTF-8 text"),
    (b"the wobbles\tCLIN:0000023\n--no-expand", "--no-expand turns off"),
])
def test_a_missing_or_bad_synonyms_file_exits_2_with_one_line(capsys, clinic, tmp_path, content, message):
    path = tmp_path / "synonyms.tsv"
    extra = []
    if content is not None:
        content, *extra = content.split(b"\n--")  # a flag to pass with the file (a file that is fine by itself)
        path.write_bytes(content + b"\n")
        extra = [f"--{flag.decode()}" for flag in extra]
    for command in ("neighbours", "code"):
        argv = [command, "fever", "--source", str(clinic), "--model", "char-tfidf", "--quiet",
                "--synonyms-file", str(path), *extra]
        if command == "code":
            terms = tmp_path / "terms.txt"
            terms.write_text("fever\n", encoding="utf-8")
            argv[1] = str(terms)
        code, out, err = run_cli(capsys, *argv)
        assert code == 2 and out == "" and message in err and err.count("\n") == 1, (command, err)


def test_code_names_the_rule_in_the_match_column_and_where_from_in_the_reading(capsys, clinic, data_dir, tmp_path):
    terms = tmp_path / "terms.txt"
    terms.write_text("cardio puffs\nZQX\nwheezing\npurple elephant\n", encoding="utf-8")
    code, out, err = run_cli(capsys, "code", str(terms), "--source", str(clinic), "--model", "char-tfidf",
                             "-k", "2", "--quiet", "--json", "--synonyms-file", str(data_dir / "clinic_synonyms.tsv"))
    assert code == 0, err
    rows = pd.DataFrame(json.loads(out)["codes"]).set_index("term")
    assert rows.loc["cardio puffs", "match"] == "vocabulary"
    assert rows.loc["cardio puffs", "code (char-tfidf)"] == "CLIN:0000021"
    assert rows.loc["cardio puffs", "reading"] == ("cardio puffs → CLIN:0000021 dyspnoea, "
                                                   "from clinic_synonyms.tsv's synonyms files (CLIN:0000021)")
    assert not rows.loc["cardio puffs", "low_confidence"]  # a vocabulary rule's answer is not flagged
    assert tuple(rows.loc["ZQX", ["match", "code (char-tfidf)"]]) == ("abbreviation", "CLIN:0000022")
    assert rows.loc["ZQX", "reading"].startswith("ZQX → chronic cough (CLIN:0000022 chronic cough), from ")
    assert tuple(rows.loc["wheezing", ["match", "reading"]]) == ("exact", "")  # a name of the level: exact first
    assert tuple(rows.loc["purple elephant", ["match", "reading"]]) == ("nearest", "")
