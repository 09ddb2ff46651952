"""AppTest of app_pages/7_Code_terms.py: pasted and uploaded term lists coded under one or two models."""

import io

import pandas as pd
import pytest
from streamlit.runtime.media_file_manager import MediaFileManager

from bioviz.search.hybrid import DEFAULT_RANKING

PAGE = "app_pages/7_Code_terms.py"


@pytest.fixture
def app(app_home, data_dir, open_app):
    # char-tfidf twice: two models without loading a transformer (the page tells them apart by A/B)
    return open_app(PAGE, {"source": str(data_dir / "mini.obo"), "depth": "1", "model_a": "char-tfidf",
                           "model_b": "char-tfidf"}, timeout=240)


def _code(at):
    next(b for b in at.button if b.label == "Code the terms").click().run()
    assert not at.exception, at.exception
    return at


def test_pasted_terms_give_a_table_with_codes_scores_and_agreement(app):
    at = app.run()
    assert not at.exception and not at.error
    assert any("Paste terms or upload" in info.value for info in at.info)
    at.text_area(key="ct_text").set_value("heart attack\nMINI:0000022\n\nlung infect\nheart attack\n")
    at.number_input(key="ct_k").set_value(2)
    _code(at)
    assert not at.error, [e.value for e in at.error]
    table = at.dataframe[0].value
    assert list(table["Term"]) == ["heart attack", "MINI:0000022", "lung infect"]  # one row per term, repeats once
    # short headers that fit their columns; the caption says which model is A and which B
    assert list(table.columns) == ["Term", "Match", *(f"{c} {x}" for x in "AB" for c in ("Code", "Concept", "Score")),
                                   "Agree", "Chosen", "Review"]
    assert any("**A**: char-tfidf (A) · **B**: char-tfidf (B)" in c.value for c in at.caption)
    first = table.set_index("Term")
    assert first.loc["MINI:0000022", "Concept A"] == "asthma"
    assert first.loc["MINI:0000022", "Score A"] == 1.0  # an exact code
    assert first.loc["heart attack", "Code B"] == "MINI:0000011"
    assert first["Agree"].all()  # one model twice agrees with itself
    assert not first.loc["MINI:0000022", "Review"]  # an exact code is never flagged
    assert "char-tfidf (A) vs char-tfidf (B)" in at.subheader[0].value and "depth 1" in at.subheader[0].value
    assert f"{DEFAULT_RANKING.label} ranking" in at.subheader[0].value
    assert "char-tfidf" in at.caption[0].value and "MINI:0000001 depth 1" in at.caption[0].value
    assert [m.label for m in at.metric][:3] == ["Terms", "Exact code or name", "To review"]
    assert [m.value for m in at.metric][0:2] == ["3", "2"] and at.metric[3].value == "3 of 3"
    assert any(b.label == "Download the coding (CSV)" for b in at.get("download_button"))
    assert at.query_params["k"] in ("2", ["2"]) and "ct_text" not in at.query_params  # terms stay out of the URL
    # the result survives a rerun that does not press the button (a row click, another widget)
    at.run()
    assert len(at.dataframe) == 1 and len(at.dataframe[0].value) == len(table)


def test_one_model_has_no_agreement_columns(app):
    app.query_params["two"] = "0"
    at = app.run()
    at.text_area(key="ct_text").set_value("asthma\nwheezing")
    _code(at)
    table = at.dataframe[0].value
    assert {"Code", "Concept", "Score"} <= set(table.columns) and "Agree" not in table.columns
    assert table.loc[0, "Other codes"] and len(at.metric) == 3  # k=5: four other codes
    assert not table.isna().any().any() and "None" not in table.astype(str).to_numpy()  # blanks, never None


def test_empty_input_gives_one_line_error(app):
    at = app.run()
    at.text_area(key="ct_text").set_value(" \n \n")
    _code(at)
    assert len(at.error) == 1 and "no terms to code" in at.error[0].value
    assert not at.dataframe


def test_an_uploaded_csv_is_coded_from_the_chosen_column(app):
    at = app.run()
    at.radio(key="ct_input").set_value("upload").run()
    assert next(b for b in at.button if b.label == "Code the terms").disabled  # nothing uploaded yet
    data = b"id,diagnosis,note\n1,heart attack,x\n2,pneumonia,y\n"
    at.file_uploader(key="ct_file").set_value(("visits.csv", data, "text/csv")).run()
    assert not at.exception and not at.error
    assert at.selectbox(key="ct_column").value == "diagnosis"  # the column named like one holding terms
    _code(at)
    table = at.dataframe[-1].value
    assert list(table["Term"]) == ["heart attack", "pneumonia"]
    assert table.set_index("Term").loc["pneumonia", "Code A"] == "MINI:0000021"
    at.selectbox(key="ct_column").set_value("note")
    _code(at)
    assert list(dict.fromkeys(at.dataframe[-1].value["Term"])) == ["x", "y"]  # the chosen column's terms


def test_a_file_that_is_not_utf8_gives_one_line_error(app):
    at = app.run()
    at.radio(key="ct_input").set_value("upload").run()
    at.file_uploader(key="ct_file").set_value(("terms.csv", "term\nSjögren\n".encode("latin-1"), "text/csv")).run()
    assert not at.exception
    assert len(at.error) == 1 and "not UTF-8" in at.error[0].value


def test_a_selected_row_shows_the_concept_card(app):
    at = app.run()
    at.text_area(key="ct_text").set_value("heart attack")
    _code(at)
    table = at.dataframe[0].value
    row = int(table.index[table["Code A"] == "MINI:0000011"][0])
    at.session_state["ct_table"] = {"selection": {"rows": [row], "columns": [], "cells": []}}
    at.run()
    assert not at.exception
    markdown = " ".join(m.value for m in at.markdown)
    assert "myocardial infarction" in markdown and "MINI:0000011" in markdown
    assert "Path to root" in markdown and "heart disease" in markdown and "Death of heart muscle" in markdown


def test_only_disagreeing_terms_can_be_shown(app):
    at = app.run()
    at.text_area(key="ct_text").set_value("asthma\nlung infect")
    _code(at)
    assert len(at.dataframe[0].value) > 0
    at.toggle(key="ct_disagree").set_value(True).run()
    assert not at.exception and len(at.dataframe[0].value) == 0  # one model twice never disagrees


def test_an_unknown_model_gives_one_line_error(app):
    app.query_params["model_b"] = "nobody/no-such-model"
    at = app.run()
    assert not at.exception
    assert len(at.error) == 1 and "nobody/no-such-model" in at.error[0].value and "\n" not in at.error[0].value


def test_the_ranking_is_chosen_shown_in_the_title_and_kept_in_the_url(app):
    app.query_params["two"] = "0"
    at = app.run()
    at.text_area(key="ct_text").set_value("Heart-attack!\npneumonai")
    at.radio(key="ct_ranking").set_value("dense")
    # without synonym expansion: "heart attack" would otherwise be scored as its HPO synonym's name
    at.toggle(key="ct_expand").set_value(False)
    _code(at)
    assert "dense ranking" in at.subheader[0].value and "Score" in at.dataframe[0].value.columns
    assert at.query_params["ranking"] in ("dense", ["dense"])
    dense_first = at.dataframe[0].value.set_index("Term")
    assert dense_first.loc["Heart-attack!", "Score"] < 1.0  # dense: no exact match
    at.radio(key="ct_ranking").set_value("hybrid").run()
    assert any("another level, models, k or ranking" in info.value for info in at.info)  # the old table is marked
    _code(at)
    table = at.dataframe[0].value
    assert "hybrid w=" in at.subheader[0].value and "Score" in table.columns
    first = table.set_index("Term")
    assert first.loc["Heart-attack!", "Score"] == 1.0  # exact: "heart attack" but for punctuation


@pytest.fixture
def downloads(monkeypatch):
    """The data callables of the page's deferred downloads, newest last (what a press of the button would send)."""
    made = []
    original = MediaFileManager.add_deferred

    def spy(self, data, *args, **kwargs):
        made.append(data)
        return original(self, data, *args, **kwargs)

    monkeypatch.setattr(MediaFileManager, "add_deferred", spy)
    return made


def _select(at, term):
    rows = list(at.dataframe[0].value["Term"])
    at.session_state["ct_table"] = {"selection": {"rows": [rows.index(term)], "columns": [], "cells": []}}
    return at.run()


def _chosen(at):
    return dict(zip(at.dataframe[0].value["Term"], at.dataframe[0].value["Chosen"]))


def test_a_coder_moves_a_code_up_or_down_in_one_click_and_the_csv_keeps_it(app, downloads):
    app.query_params["two"] = "0"
    at = app.run()
    at.text_area(key="ct_text").set_value("heart attack\nMINI:0000012\nasthma")
    _code(at)
    table = at.dataframe[0].value.set_index("Term")
    assert table.loc["heart attack", "Code"] == "MINI:0000011" and table.loc["heart attack", "Parent"] == "heart disease"
    assert table.loc["asthma", "Parent"] == "lung disease" and set(table["Chosen"]) == {""}  # nothing moved yet
    _select(at, "heart attack")
    assert not at.exception
    assert "myocardial infarction" in " ".join(m.value for m in at.markdown)
    assert not [b for b in at.button if b.key and b.key.startswith("ct_down_")]  # the most specific concept
    at.button(key="ct_up_MINI:0000010").click().run()
    assert not at.exception and not at.error
    assert _chosen(at)["heart attack"] == "↑ MINI:0000010 heart disease"  # the table reflects the move
    # the panel now stands on heart disease: its children one click away, and a way back
    assert {"ct_down_MINI:0000011", "ct_down_MINI:0000012", "ct_down_MINI:0000030"} <= {b.key for b in at.button}
    at.button(key="ct_keep").click().run()
    assert _chosen(at)["heart attack"] == ""
    at.button(key="ct_up_MINI:0000010").click().run()
    _select(at, "MINI:0000012")  # arrhythmia, an exact code: one level down is atrial fibrillation
    at.button(key="ct_down_MINI:0000013").click().run()
    assert _chosen(at)["MINI:0000012"] == "↓ MINI:0000013 atrial fibrillation"
    at.run()  # the choices survive a rerun
    assert _chosen(at)["heart attack"].startswith("↑")
    csv = pd.read_csv(io.StringIO(downloads[-1]()), keep_default_na=False).set_index("term")
    columns = ["proposed_id", "proposed_name", "chosen_id", "chosen_name", "choice"]
    assert tuple(csv.loc["heart attack", columns]) == ("MINI:0000011", "myocardial infarction", "MINI:0000010",
                                                       "heart disease", "moved up")
    assert tuple(csv.loc["MINI:0000012", ["chosen_id", "choice"]]) == ("MINI:0000013", "moved down")
    assert tuple(csv.loc["asthma", ["proposed_id", "chosen_id", "choice"]]) == ("MINI:0000022",) * 2 + ("model",)
    assert csv.loc["heart attack", "parent (char-tfidf)"] == "MINI:0000010"


def test_choices_stay_with_their_term_list(app):
    app.query_params["two"] = "0"
    at = app.run()
    at.text_area(key="ct_text").set_value("heart attack\nasthma")
    _code(at)
    _select(at, "heart attack")
    at.button(key="ct_up_MINI:0000010").click().run()
    assert _chosen(at)["heart attack"].startswith("↑")
    at.text_area(key="ct_text").set_value("heart attack\nwheezing")
    _code(at)
    assert _chosen(at)["heart attack"] == ""  # another list: its own choices
    at.text_area(key="ct_text").set_value("heart attack\nasthma")
    _code(at)
    assert _chosen(at)["heart attack"] == "↑ MINI:0000010 heart disease"  # back to the first list: its choices


def test_many_children_are_one_pick_in_a_select_box(open_app, app_home, tmp_path):
    children = "".join(f"[Term]\nid: T:{100 + i}\nname: kind {i} of sign\nis_a: T:002\n\n" for i in range(13))
    obo = tmp_path / "wide.obo"
    obo.write_text("format-version: 1.2\nontology: wide\n\n[Term]\nid: T:000\nname: root\n\n"
                   "[Term]\nid: T:001\nname: finding\nis_a: T:000\n\n[Term]\nid: T:002\nname: sign\nis_a: T:001\n\n"
                   "[Term]\nid: T:003\nname: test\nis_a: T:000\n\n[Term]\nid: T:004\nname: blood test\nis_a: T:003\n\n"
                   + children, encoding="utf-8")
    at = open_app(PAGE, {"source": str(obo), "root": "T:000", "depth": "1", "model_a": "char-tfidf", "two": "0"}).run()
    assert not at.error, [e.value for e in at.error]
    at.text_area(key="ct_text").set_value("T:002")
    _code(at)
    _select(at, "T:002")
    assert not at.exception and not [b for b in at.button if b.key and b.key.startswith("ct_down_")]
    pick = at.selectbox(key="ct_down_pick")
    assert len(pick.options) == 13 and pick.value is None
    pick.set_value("T:107").run()
    assert not at.exception and _chosen(at)["T:002"] == "↓ T:107 kind 7 of sign"
    assert not [s for s in at.selectbox if s.key == "ct_down_pick"]
