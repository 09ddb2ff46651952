"""``--partial`` of ``neighbours`` and ``code``: a marked answer while the level encodes, then the final one."""

import json

import pytest

from bioviz.cli import main
from bioviz.models.cached_encoding import DELAY_ENV


def write_table(path, classes: int = 4, per_class: int = 150):
    rows = ["concept_id\tname\tparent_id\tdefinition\tsynonyms", "R\tdisorder\t\t\t"]
    for c in range(classes):
        rows.append(f"C{c}\tclass {c} disorder\tR\t\t")
        rows += [f"C{c}_{i}\tkind {i} of class {c} disorder\tC{c}\t\t" for i in range(per_class)]
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return path


@pytest.fixture
def slow_level(tmp_home, tmp_path, monkeypatch):
    """A 600-name level whose encoding lasts seconds (the browser tests' delay per name)."""
    monkeypatch.setenv(DELAY_ENV, "0.01")
    return write_table(tmp_path / "level.tsv")


def run_cli(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, [json.loads(line) for line in out.splitlines()], err


@pytest.mark.slow  # a level encoded in the background while the answer is polled: 25-40 s
def test_neighbours_partial_prints_a_marked_answer_then_the_final_one(capsys, slow_level):
    args = ("neighbours", "kind 7 of class 2 disorder", "--source", str(slow_level), "--model", "char-tfidf",
            "-k", "5", "--json", "--quiet")
    code, (partial, final), _ = run_cli(capsys, *args, "--partial")
    assert code == 0
    assert partial["partial"] is True and partial["names_encoded"] < partial["names"] == 600
    assert partial["marker"] == f"partial: {partial['names_encoded']:,} of 600 names encoded, refining"
    assert len(partial["neighbours"]) == 5 and partial["lexical"] == "name search"
    assert "kind 7 of class 2 disorder" not in [row["name"] for row in partial["neighbours"]]  # not its own neighbour
    assert "partial" not in final and len(final["neighbours"]) == 5 and final["cache_hits"] == 600
    # stored now: the same command prints the final answer alone, and without --partial it never prints two
    for extra in (("--partial",), ()):
        code, lines, _ = run_cli(capsys, *args, *extra)
        assert code == 0 and len(lines) == 1 and "partial" not in lines[0]


@pytest.mark.slow  # a level encoded in the background while the answer is polled: 25-40 s
def test_code_partial_prints_a_marked_coding_then_the_final_one(capsys, slow_level, tmp_path):
    terms = tmp_path / "terms.txt"
    terms.write_text("C1_3\nkind 9 of class 0 disorder\nkind nine class zero\n", encoding="utf-8")
    code, (partial, final), _ = run_cli(capsys, "code", str(terms), "--source", str(slow_level), "--model",
                                        "char-tfidf", "-k", "2", "--json", "--quiet", "--partial")
    assert code == 0 and partial["partial"] is True and partial["marker"].startswith("partial: ")
    assert [row["code"] for row in partial["codes"][:2]] == ["C1_3", "C0_9"]  # exact code, exact name
    assert partial["codes"][0]["match"] == "exact" and len(partial["codes"]) == 3
    assert "partial" not in final and final["terms"] == 3 and final["exact"] == 2
