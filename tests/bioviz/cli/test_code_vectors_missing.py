"""Issue 41 finding 8a: ``bioviz code`` with a vectors file codes every term it can, one lacking a vector is marked.

Before: one term sharing no word with the file's names (so no file name can stand in for it)
aborted the whole list (exit 2, no CSV). Now that term gets a ``no vector`` row saying why, the
others are coded and the CSV is written.
"""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest

from bioviz.cli import main
from bioviz.ontology import LevelSpec


@pytest.fixture
def vectors_file(data_dir, tmp_home, tmp_path):
    """Random unit vectors for every name of mini.obo, as ``numpy.savez`` writes them."""
    ontology = LevelSpec(str(data_dir / "mini.obo")).ontology()
    names = list(dict.fromkeys(n for c in ontology.concepts.values() for n in c.names))
    rows = np.random.default_rng(0).normal(size=(len(names), 8)).astype(np.float32)
    path = tmp_path / "file.npz"
    np.savez(path, names=np.array(names), vectors=rows / np.linalg.norm(rows, axis=1, keepdims=True))
    return path


def _code(capsys, data_dir, tmp_path, vectors_file, *extra):
    terms = tmp_path / "terms.txt"
    terms.write_text("heart attack\nqqqq zzzz\nasthma\n")
    code = main(["code", str(terms), "--source", str(data_dir / "mini.obo"), "--model", str(vectors_file),
                 "--no-expand", "--quiet", "--json", *extra])
    out, err = capsys.readouterr()
    return code, out, err


def test_a_term_without_a_vector_gets_a_marked_row_and_the_csv_is_written(capsys, data_dir, tmp_path, vectors_file):
    out = tmp_path / "codes.csv"
    code, text, err = _code(capsys, data_dir, tmp_path, vectors_file, "--out", str(out))
    assert code == 0, err
    assert json.loads(text)["no_vector"] == 1
    with out.open(newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    assert [r["term"] for r in rows] == ["heart attack", "qqqq zzzz", "asthma"]
    lacking = rows[1]
    assert lacking["match"] == "no vector" and "'qqqq zzzz' is not in file" in lacking["reading"]
    assert lacking["code (file)"] == "" and lacking["low_confidence"] == "True"
    assert rows[0]["code (file)"] and rows[2]["code (file)"], "the other terms are coded"


def test_the_json_rows_mark_it_too(capsys, data_dir, tmp_path, vectors_file):
    code, text, err = _code(capsys, data_dir, tmp_path, vectors_file)
    assert code == 0, err
    codes = json.loads(text)["codes"]
    assert [c["match"] for c in codes][1] == "no vector" and codes[0]["code (file)"]


def test_a_list_where_no_term_has_a_vector_is_all_marked(capsys, data_dir, tmp_path, vectors_file):
    terms = tmp_path / "none.txt"
    terms.write_text("qqqq\nzzzz\n")
    code = main(["code", str(terms), "--source", str(data_dir / "mini.obo"), "--model", str(vectors_file),
                 "--no-expand", "--quiet", "--json"])
    text, err = capsys.readouterr()
    assert code == 0, err
    assert [c["match"] for c in json.loads(text)["codes"]] == ["no vector", "no vector"]
