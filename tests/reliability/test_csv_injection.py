"""No CSV the project writes holds a cell a spreadsheet would run as a formula (issue 25, item 1).

Text from users (an uploaded table, a terms file, a run name) and from ontologies reaches every
export. A spreadsheet evaluates a cell starting with ``=``, ``+``, ``-``, ``@``, a tab or a
carriage return (OWASP, "CSV injection"); each export must write such text with a leading single
quote, and leave numbers as numbers.
"""

from __future__ import annotations

import csv
import io
import json
import os
import re

import pandas as pd
import pytest
import streamlit.testing.v1.app_test as app_test_module
from hypothesis import given
from hypothesis import strategies as st
from streamlit.runtime.media_file_manager import MediaFileManager
from streamlit.runtime.memory_media_file_storage import MemoryMediaFileStorage

from bioviz.cli import main
from bioviz.csv_export import frame_to_csv, neutralise_cell
from bioviz.evaluation import tables as result_tables
from tests.pages.routed_app import app_on

# OWASP's list, written out here rather than imported: the test states what a spreadsheet runs.
HOSTILE = "=+-@\t\r"
PLAIN_NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")
PAYLOADS = ['=HYPERLINK("http://evil.example/x","click")', "@SUM(A1:A9)", "=cmd|' /C calc'!A0",
            "+1+cmd|' /C calc'!A0", "-2+3", "\t=1+1", "\r=1+1"]


def cells(text: str) -> list[list[str]]:
    """The CSV's rows of cells, as a spreadsheet's import splits them."""
    return list(csv.reader(io.StringIO(text, newline="")))


def assert_inert(text: str, expected: list[str] = ()) -> None:
    """No cell of ``text`` would be evaluated; each of ``expected`` is there, quoted."""
    for row in cells(text):
        for cell in row:
            assert not (cell[:1] in HOSTILE and cell and not PLAIN_NUMBER.fullmatch(cell)), f"live cell {cell!r}"
    found = {cell for row in cells(text) for cell in row}
    for value in expected:
        assert "'" + value in found, f"{value!r} did not reach the export quoted"


# --- the helper -------------------------------------------------------------------------------

hostile_text = st.builds(lambda lead, rest: lead + rest, st.sampled_from(list(HOSTILE)),
                         st.text(st.characters(blacklist_categories=("Cs",)), max_size=20))
benign_text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=20).filter(
    lambda s: s[:1] not in HOSTILE and s[:1] not in "\n\uff1d\uff0b\uff0d\uff20" and s.strip() == s and s != "")
numbers = st.floats(allow_nan=False, allow_infinity=False, width=32)


@given(hostile=st.lists(hostile_text, min_size=1, max_size=6), benign=st.lists(benign_text, min_size=1, max_size=6),
       values=st.lists(numbers, min_size=1, max_size=6))
def test_every_cell_a_spreadsheet_would_evaluate_is_quoted_and_the_rest_round_trips(hostile, benign, values):
    size = max(len(hostile), len(benign), len(values))
    frame = pd.DataFrame({"hostile": (hostile * size)[:size], "benign": (benign * size)[:size],
                          "number": (values * size)[:size]})
    text = frame_to_csv(frame)
    assert_inert(text)
    rows = cells(text)[1:]
    for row, (evil, good, number) in zip(rows, frame.itertuples(index=False)):
        assert row[0] == (evil if PLAIN_NUMBER.fullmatch(evil) else "'" + evil)
        assert row[1] == good  # benign text unchanged
        assert float(row[2]) == number and not row[2].startswith("'")  # a number stays a number


def test_numbers_stay_numbers_and_headers_are_text_cells_too():
    frame = pd.DataFrame({"=evil()": ["-0.5", "=1+1", None], "value": [-0.5, -1.0, 2.0], "n": [-1, 0, 3]})
    out = pd.read_csv(io.StringIO(frame_to_csv(frame)))
    assert list(out.columns) == ["'=evil()", "value", "n"]
    assert out["value"].tolist() == [-0.5, -1.0, 2.0] and out["n"].tolist() == [-1, 0, 3]
    assert out["'=evil()"].tolist()[:2] == ["-0.5", "'=1+1"]  # a text that is a plain number is not a formula
    assert neutralise_cell(-0.5) == -0.5 and neutralise_cell(None) is None


def test_a_carriage_return_inside_a_cell_cannot_start_a_row_of_its_own():
    text = frame_to_csv(pd.DataFrame({"name": ["harmless\r=cmd|' /C calc'!A0"], "n": [1]}))
    assert cells(text) == [["name", "n"], ["harmless\r=cmd|' /C calc'!A0", "1"]]
    assert_inert(text)


# --- library exports --------------------------------------------------------------------------

def test_the_evaluation_csv_quotes_a_hostile_run_name():
    rows = [{"model": "=cmd|' /C calc'!A0", "task": "Ranking", "metric": "mAP", "value": -0.5, "ci_low": 0.1,
             "ci_high": 0.2, "n": 3}]
    text = result_tables.to_csv(rows)
    assert_inert(text, ["=cmd|' /C calc'!A0"])
    assert cells(text)[1][3] == "-0.5"


@pytest.fixture
def hostile_table(tmp_path):
    """A concept table whose classes and names are formulas (depth 1: two hostile classes)."""
    path = tmp_path / "hostile.tsv"
    rows = [("H:0", "all terms", ""), ("H:1", PAYLOADS[0], "H:0"), ("H:2", PAYLOADS[1], "H:0"),
            ("H:3", "+heart attack", "H:1"), ("H:4", "-lung infection", "H:2"), ("H:5", PAYLOADS[2], "H:1"),
            ("H:6", "heart disease", "H:2")]
    path.write_text("concept_id\tname\tparent_id\n" + "".join("\t".join(r) + "\n" for r in rows), encoding="utf-8")
    return path


@pytest.fixture
def home(shared_home, monkeypatch):
    monkeypatch.setenv("BIOVIZ_HOME", str(shared_home))  # char-tfidf fitted once per session
    return shared_home


def test_bioviz_code_out_on_a_hostile_table_and_terms_file(capsys, home, hostile_table, tmp_path):
    terms = tmp_path / "terms.csv"
    # one row per term: a hostile concept name reaches the file as a term's first concept (cmd: H:5's own name)
    terms.write_text('term\n"=HYPERLINK(""http://evil.example/x"",""click"")"\n@SUM(A1:A9)\nheart attack\n'
                     '"=cmd|\' /C calc\'!A0"\n', encoding="utf-8")
    out = tmp_path / "coded.csv"
    code = main(["code", str(terms), "--column", "term", "--source", str(hostile_table), "--depth", "1",
                 "--model", "char-tfidf", "-k", "3", "--out", str(out), "--quiet", "--json"])
    assert code == 0, capsys.readouterr().err
    assert json.loads(capsys.readouterr().out)["terms"] == 4
    assert_inert(out.read_text(encoding="utf-8"), [PAYLOADS[0], PAYLOADS[1], PAYLOADS[2], "+heart attack"])


# --- the app's download buttons ---------------------------------------------------------------

@pytest.fixture
def downloads(monkeypatch):
    """``read(button)``: the bytes a download button of the last AppTest run serves, as text.

    AppTest's media store lives only during a run: the test keeps the last one (and runs a
    deferred button's callable, as a click in the browser does).
    """
    made: dict[str, object] = {}

    class Storage(MemoryMediaFileStorage):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            made["storage"] = self

    class Manager(MediaFileManager):
        def __init__(self, storage):
            super().__init__(storage)
            made["manager"] = self

    monkeypatch.setattr(app_test_module, "MemoryMediaFileStorage", Storage)
    monkeypatch.setattr(app_test_module, "MediaFileManager", Manager)

    def read(button) -> str:
        proto = button.proto
        url = made["manager"].execute_deferred(proto.deferred_file_id) if proto.deferred_file_id else proto.url
        return made["storage"].get_file(url.rsplit("/", 1)[-1]).content.decode("utf-8")

    return read


def button(at, label: str):
    return next(b for b in at.get("download_button") if b.proto.label.startswith(label))


@pytest.fixture
def shared_folders(monkeypatch, tmp_path, data_dir):
    """tests/data and the test's folder are data folders of the server (the path policy opens files only there)."""
    monkeypatch.setenv("BIOVIZ_DATA_DIRS", os.pathsep.join([str(data_dir), str(tmp_path)]))


def test_code_terms_download_quotes_hostile_terms(home, downloads, data_dir, shared_folders):
    at = app_on("app_pages/7_Code_terms.py", {"source": str(data_dir / "mini.obo"), "depth": "1",
                                              "model_a": "char-tfidf", "two": "0"}, timeout=240).run()
    at.text_area(key="ct_text").set_value("\n".join(PAYLOADS[:3] + ["heart attack"]))
    next(b for b in at.button if b.label == "Code the terms").click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert_inert(downloads(button(at, "Download the coding")), PAYLOADS[:3])


def test_home_classes_download_quotes_hostile_class_names(home, downloads, hostile_table, shared_folders):
    at = app_on(None, {"source": str(hostile_table), "depth": "1"}, timeout=120).run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert_inert(downloads(button(at, "Download classes")), [PAYLOADS[0], PAYLOADS[1]])


def test_neighbours_download_quotes_hostile_names(home, downloads, hostile_table, shared_folders):
    at = app_on("app_pages/4_Neighbours.py", {"source": str(hostile_table), "depth": "1", "model_a": "char-tfidf",
                                              "model_b": "char-tfidf", "query": "heart disease", "k": "4"},
                timeout=240).run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert_inert(downloads(button(at, "Download the comparison")), ["+heart attack"])


def test_figure_downloads_quote_hostile_text(downloads):
    """ui.compare.show_figure: the CSV under every Projection, Similarity and Hierarchy figure."""

    def script():
        import pandas as pd
        import plotly.graph_objects as go

        from ui.compare import show_figure

        frame = pd.DataFrame({"node": ["=cmd|' /C calc'!A0", "@SUM(A1:A9)"], "gain": [-0.5, 0.25]})
        show_figure(go.Figure(), "now", "png", frame=frame, key="now")
        show_figure(go.Figure(), "later", "png", frame=lambda: frame, rows=2, key="later")

    from streamlit.testing.v1 import AppTest

    at = AppTest.from_function(script).run()
    assert not at.exception
    for label in ("Download numbers (CSV, 2 rows)",):
        for shown in [b for b in at.get("download_button") if b.proto.label == label]:
            text = downloads(shown)
            assert_inert(text, ["=cmd|' /C calc'!A0", "@SUM(A1:A9)"])
            assert cells(text)[1][1] == "-0.5"
    assert len(at.get("download_button")) == 2


def test_evaluation_download_quotes_a_hostile_model_name(tmp_home, fake_eval_models, downloads, data_dir,
                                                         shared_folders, monkeypatch):
    from bioviz.evaluation import run as evaluation

    load = evaluation._load_model

    def renamed(spec):  # the label a run renamed in the app would carry
        model = load(spec)
        model.label = "=cmd|' /C calc'!A0"
        return model

    monkeypatch.setattr(evaluation, "_load_model", renamed)
    at = app_on("app_pages/6_Evaluation.py", {"source": str(data_dir / "mini.obo"), "depth": "1", "eval_boot": "20",
                                               "eval_tasks": "ranking", "eval_bench": ""}, timeout=120).run()
    next(b for b in at.button if b.label == "Run evaluation").click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert_inert(downloads(button(at, "Download CSV")), ["=cmd|' /C calc'!A0"])
