"""Loader messages name a line and what was expected, never the file's text; UMLS rows that
crashed the reader are skipped or reported (issue 13, findings 2 and 8).

A path typed into the app may name any file the server can read: an error message that
quotes it would hand its content to whoever typed the path.
"""

from __future__ import annotations

import json
import logging
import shutil

import pytest

from bioviz.cli import main
from bioviz.errors import BiovizError, SourceError
from bioviz.evaluation.benchmarks import load_benchmark
from bioviz.ontology.obo import load_obo
from bioviz.ontology.table import load_table
from bioviz.ontology.umls import load_umls

SECRET = "s3cr3t-Passw0rd"

OBO_HEAD = "format-version: 1.2\n\n[Term]\nid: X:1\nname: top\n\n"
TERM = "[Term]\nid: X:2\nname: child\nis_a: X:1\n"

# file name -> (content, expected message), each content hiding SECRET where a reader failed before
HOSTILE_FILES = {
    "no_colon.obo": (OBO_HEAD + TERM + f"{SECRET} without a colon\n", "line 11: expected a 'tag: value' line"),
    "bad_stanza.obo": (OBO_HEAD + f"[Term\nid: {SECRET}\n", "line 7: expected a 'tag: value' line"),
    "relationship.obo": (OBO_HEAD + TERM + f"relationship: part_of X:1 {SECRET}\n",
                         "line 11: expected 'relationship: RELATION TERM_ID'"),
    "no_id.obo": (OBO_HEAD + f"[Term]\nname: {SECRET}\n", "line 7: [Term] stanza without an id"),
    "latin1.obo": (OBO_HEAD.encode() + f"[Term]\nid: X:3\nname: {SECRET}\xe9\n".encode("latin-1"),
                   "line 9 is not UTF-8 text"),
    "parent.tsv": (f"concept_id\tname\tparent_id\nA\talpha\t\nB\tbeta\t{SECRET}\n",
                   "line 3: parent_id is not the concept_id of any row (1 such parents)"),
    "nameless.csv": (f"concept_id,name,parent_id\nA,alpha,\n{SECRET},,A\n", "line 3: concept without a name"),
    "long_row.tsv": (f"concept_id\tname\tparent_id\nA\talpha\t\t{SECRET}\n", "line 2: 4 fields, but the header has 3"),
    "header.csv": (f"{SECRET},name\nA,alpha\n", "lacks column(s) concept_id, parent_id"),
    "latin1.tsv": (f"concept_id\tname\tparent_id\nA\t{SECRET}\xe9\t\n".encode("latin-1"), "line 2 is not UTF-8 text"),
    "huge_cell.tsv": ("concept_id\tname\tparent_id\n" + f"A\t{SECRET * 20_000}\t\n",
                      "line 2: unreadable row (field larger than field limit"),
}


def load_any(path):
    return load_obo(path) if path.suffix == ".obo" else load_table(path)


@pytest.mark.parametrize("file_name", HOSTILE_FILES)
def test_source_errors_name_the_line_not_the_content(tmp_path, file_name):
    content, expected = HOSTILE_FILES[file_name]
    path = tmp_path / file_name
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    with pytest.raises(SourceError) as error:
        load_any(path)
    message = str(error.value)
    assert expected in message
    assert SECRET not in message and "\n" not in message


@pytest.mark.parametrize("content, expected", [
    (f"a\tb\t1\nc\td\t{SECRET}\ne\tf\t3\n", "line 2: the score (third column) is not a number"),
    (f"a\tb\t1\n\n\nc\t{SECRET}\n", "line 4: expected 3 tab-separated columns"),
    (f"a\tb\t1\nc\td\t2\ne\t{SECRET * 20_000}\t3\n", "line 3: unreadable row (field larger than field limit"),
])
def test_benchmark_errors_name_the_file_line_not_the_content(tmp_path, content, expected):
    path = tmp_path / "pairs.tsv"
    path.write_text(content)
    with pytest.raises(BiovizError) as error:
        load_benchmark(path)
    assert expected in str(error.value) and SECRET not in str(error.value)


def test_levels_cli_on_a_hostile_file_is_exit_2_one_line_without_content(tmp_path, tmp_home, capsys):
    path = tmp_path / "no_colon.obo"
    path.write_text(HOSTILE_FILES["no_colon.obo"][0])
    code = main(["levels", str(path), "--depth", "1"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1
    assert "line 11: expected a 'tag: value' line" in err and SECRET not in err


@pytest.fixture
def release(tmp_path, data_dir):
    """A copy of the fixture UMLS release to damage."""
    meta = tmp_path / "release" / "META"
    shutil.copytree(data_dir / "umls" / "META", meta)
    return meta


def _add_atoms(meta, *rows):
    with (meta / "MRCONSO.RRF").open("a") as handle:
        for cui, name in rows:
            handle.write(f"{cui}|ENG|P|L9|PF|S9|Y|A9|||1|SNOMEDCT_US|PT|1|{name}|9|N|256|\n")


def test_mrconso_rows_with_a_blank_name_are_skipped(release, caplog):
    # C9999999 has only a blank atom (an IndexError before); Headache gets a blank one more.
    _add_atoms(release, ("C9999999", ""), ("C0018681", "   "))
    with caplog.at_level(logging.WARNING, logger="bioviz.ontology.umls"):
        onto = load_umls(release)
    assert "C9999999" not in onto
    assert onto.concept("C0018681").names == ("Headache", "Cephalgia")
    assert "skipped 2 ENG atoms of SNOMEDCT_US with a blank CUI or name" in caplog.text


def test_levels_cli_over_blank_names_and_a_trailing_blank_line(release, tmp_home, capsys):
    _add_atoms(release, ("C9999999", ""))
    with (release / "MRREL.RRF").open("a") as handle:
        handle.write("\n")
    code = main(["levels", str(release), "--depth", "1", "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert json.loads(out)["root"] == "C2720507"
