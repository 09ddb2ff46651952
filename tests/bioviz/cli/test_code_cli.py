"""``python -m bioviz code``: a term file coded to a CSV, one-line errors with exit code 2."""

import json

import pandas as pd
import pytest

from bioviz.cli import main


@pytest.fixture
def home(shared_home, monkeypatch):
    # the session's home: char-tfidf is fitted once there, not once per test
    monkeypatch.setenv("BIOVIZ_HOME", str(shared_home))
    return shared_home


def run_cli(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.slow  # over 5 s in a full run (CI lists the times)
def test_a_csv_column_is_coded_under_two_models_into_a_csv(capsys, data_dir, home, tmp_path):
    terms = tmp_path / "visits.csv"
    terms.write_text("id,diagnosis\n1,heart attack\n2,MINI:0000022\n3,lung infect\n", encoding="utf-8")
    out = tmp_path / "coded.csv"
    code, stdout, _ = run_cli(capsys, "code", str(terms), "--column", "diagnosis", "--source",
                              str(data_dir / "mini.obo"), "--depth", "1", "--model", "char-tfidf", "--model-b",
                              "char-tfidf", "-k", "2", "--out", str(out), "--quiet", "--json")
    result = json.loads(stdout)
    assert code == 0 and result["terms"] == 3 and result["exact"] == 2 and result["same_top1"] == 3
    coded = pd.read_csv(out)
    assert list(coded["term"]) == ["heart attack", "MINI:0000022", "lung infect"]  # one row per term
    assert {"match", "code (char-tfidf (A))", "name (char-tfidf (A))", "score (char-tfidf (B))",
            "margin (char-tfidf (B))", "other codes (char-tfidf (B))", "agree", "overlap",
            "low_confidence"} <= set(coded.columns)
    first = coded.set_index("term")
    assert first.loc["MINI:0000022", "name (char-tfidf (A))"] == "asthma" and first.loc["MINI:0000022", "match"] == "exact"


@pytest.mark.parametrize("content, extra, message", [
    ("id,diagnosis\n1,asthma\n", ["--column", "Diagnosis"], "no column 'Diagnosis'"),
    ("\n  \n", [], "no terms to code"),
    ("asthma\n", ["-k", "0"], "-k must be between 1 and"),
])
def test_bad_input_exits_2_with_one_line(capsys, data_dir, home, tmp_path, content, extra, message):
    terms = tmp_path / "terms.csv"
    terms.write_text(content, encoding="utf-8")
    code, _, err = run_cli(capsys, "code", str(terms), "--source", str(data_dir / "mini.obo"), "--model",
                           "char-tfidf", "--quiet", *extra)
    assert code == 2 and err.startswith("error: ") and message in err and err.count("\n") == 1


@pytest.mark.parametrize("extra, label", [(["--ranking", "dense"], "dense"),
                                          (["--ranking", "hybrid", "--weight", "0.5"], "hybrid w=0.5")])
def test_the_ranking_is_chosen_and_written_into_the_csv(capsys, data_dir, home, tmp_path, extra, label):
    terms = tmp_path / "terms.txt"
    terms.write_text("Heart-attack!\npneumonai\n", encoding="utf-8")
    out = tmp_path / "coded.csv"
    code, stdout, _ = run_cli(capsys, "code", str(terms), "--source", str(data_dir / "mini.obo"), "--synonyms",
                              "--model", "char-tfidf", "-k", "2", "--out", str(out), "--quiet", "--json", *extra)
    assert code == 0 and json.loads(stdout)["ranking"] == label
    coded = pd.read_csv(out)
    assert set(coded["ranking"]) == {label}
    first = coded.set_index("term")
    assert (first.loc["Heart-attack!", "match"] == "exact") == (label != "dense")  # normalised match: hybrid only


def test_a_bad_weight_exits_2_with_one_line(capsys, data_dir, home, tmp_path):
    terms = tmp_path / "terms.txt"
    terms.write_text("asthma\n", encoding="utf-8")
    code, _, err = run_cli(capsys, "code", str(terms), "--source", str(data_dir / "mini.obo"), "--model",
                           "char-tfidf", "--quiet", "--ranking", "hybrid", "--weight", "-1")
    assert code == 2 and "hybrid weight must be between 0 and" in err and err.count("\n") == 1


def test_each_first_concept_comes_with_its_parent_and_the_old_columns_keep_their_order(capsys, data_dir, home,
                                                                                       tmp_path):
    terms = tmp_path / "terms.txt"
    terms.write_text("MINI:0000011\nMINI:0000013\nMINI:0000010\n", encoding="utf-8")
    out = tmp_path / "coded.csv"
    code, _, _ = run_cli(capsys, "code", str(terms), "--source", str(data_dir / "mini.obo"), "--depth", "1",
                         "--model", "char-tfidf", "-k", "2", "--out", str(out), "--quiet", "--json")
    coded = pd.read_csv(out, keep_default_na=False)
    label = "char-tfidf"
    before = ["term", "match", "reading",
              *(f"{c} ({label})" for c in ("code", "name", "class", "score", "margin", "other codes")), "low_confidence"]
    assert code == 0 and list(coded.columns) == [*before, f"parent ({label})", f"parent name ({label})", "ranking"]
    rows = coded.set_index("term")
    assert tuple(rows.loc["MINI:0000011", [f"parent ({label})", f"parent name ({label})"]]) == \
        ("MINI:0000010", "heart disease")
    assert rows.loc["MINI:0000013", f"parent ({label})"] == "MINI:0000012"  # one level: arrhythmia, not the shortcut
    assert rows.loc["MINI:0000010", f"parent ({label})"] == ""  # the level's root is no code: nothing above a class
    # without --out the printed rows carry it too
    code, stdout, _ = run_cli(capsys, "code", str(terms), "--source", str(data_dir / "mini.obo"), "--depth", "1",
                              "--model", "char-tfidf", "-k", "1", "--quiet", "--json")
    assert json.loads(stdout)["codes"][0][f"parent name ({label})"] == "heart disease"


def test_the_second_model_is_compare_as_in_neighbours_and_model_b_still_works():
    from bioviz.cli import build_parser  # the whole CLI's parser, as main builds it

    parser = build_parser(["code"])
    for flag in ("--compare", "--model-b"):
        args = parser.parse_args(["code", "terms.txt", "--model", "char-tfidf", flag, "minilm"])
        assert args.model_b.spec == "minilm"
