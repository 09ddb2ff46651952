"""``python -m bioviz eval --task normalisation --gold FILE`` and ``neighbours --ranking``: figures per model and
ranking, one-line errors for bad gold files (char-tfidf on tests/data/mini.obo)."""

import json

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


def test_normalisation_per_ranking_as_json(capsys, data_dir, home):
    code, out, err = run_cli(capsys, "eval", "--model", "char-tfidf", "--task", "normalisation", "--gold",
                             str(data_dir / "gold" / "mini_gold.tsv"), "--source", str(data_dir / "mini.obo"),
                             "--synonyms", "--ranking", "dense", "--ranking", "hybrid", "--weight", "0.5",
                             "--n-boot", "50", "--quiet", "--json")
    assert code == 0, err
    result = json.loads(out)
    assert result["normalisation"]["rankings"] == ["dense", "hybrid w=0.5"]
    assert result["normalisation"]["mentions"] == 5 and "synonym sets" in result["normalisation"]["level"]
    assert [(r["model"], r["task"]) for r in result["results"]] == [
        ("char-tfidf · dense", "normalisation"), ("char-tfidf · hybrid w=0.5", "normalisation")]
    assert "view" not in result  # only the gold file was asked for: no split protocols ran
    assert set(result["results"][0]["ci"]) >= {"acc1", "acc5", "mrr", "paraphrased.acc1"}


@pytest.mark.parametrize("gold, reason", [
    (None, "needs --gold FILE"),
    ("mention\tcui\nasthma\tMINI:0000022\nfever\tHP:0001945\n", "1 of 2 concept ids of gold.tsv are not concepts"),
    ("term\tcode\nasthma\tMINI:0000022\n", "needs a header with 'mention'"),
    ("", "empty"),
    (b"mention\tid\n\xff\tMINI:0000022\n", "not UTF-8"),
])
def test_bad_gold_files_exit_2_with_one_line(capsys, data_dir, home, tmp_path, gold, reason):
    argv = ["eval", "--model", "char-tfidf", "--task", "normalisation", "--source", str(data_dir / "mini.obo"),
            "--synonyms", "--quiet"]
    if gold is not None:
        path = tmp_path / "gold.tsv"
        path.write_bytes(gold if isinstance(gold, bytes) else gold.encode())
        argv += ["--gold", str(path)]
    code, _, err = run_cli(capsys, *argv)
    assert code == 2 and err.startswith("error: ") and reason in err and err.count("\n") == 1


def test_neighbours_under_a_hybrid_ranking(capsys, data_dir, home):
    code, out, err = run_cli(capsys, "neighbours", "Heart-attack", "--source", str(data_dir / "mini.obo"),
                             "--synonyms", "--model", "char-tfidf", "--ranking", "hybrid", "--weight", "0.5",
                             "-k", "3", "--quiet", "--json")
    assert code == 0, err
    result = json.loads(out)
    assert result["ranking"] == "hybrid w=0.5" and result["neighbours"][0]["concept_id"] == "MINI:0000011"
