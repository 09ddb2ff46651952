"""AppTest of the home page (app.py): source, root, depth and the level statistics."""

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest


@pytest.fixture
def app(shared_home, monkeypatch):
    monkeypatch.setenv("BIOVIZ_HOME", str(shared_home))
    return AppTest.from_file(str(Path(__file__).resolve().parents[2] / "app.py"), default_timeout=120)


def metrics(at):
    return {m.label: m.value for m in at.metric}


def test_home_shows_icd10_chapters_by_default(app):
    at = app.run()
    assert not at.exception and not at.error
    assert metrics(at)["Classes"] == "22"
    assert at.query_params["source"] == ["icd10"] or at.query_params["source"] == "icd10"


def test_switching_to_hpo_under_phenotypic_abnormality(app):
    at = app.run()
    at.sidebar.selectbox(key="source").set_value("hpo").run()
    assert metrics(at)["Classes"] == "23"
    assert int(metrics(at)["Names"].replace(",", "")) > 15_000


def test_bad_root_and_too_deep_depth_show_one_line_errors(app):
    at = app.run()
    at.sidebar.text_input(key="root").set_value("NOPE").run()
    assert not at.exception
    assert "unknown concept id 'NOPE'" in at.error[0].value
    at.sidebar.text_input(key="root").set_value("").run()
    at.sidebar.number_input(key="depth").set_value(12).run()
    assert "too deep" in at.error[0].value


def test_url_state_reopens_the_same_view(app):
    app.query_params["source"] = "hpo"
    app.query_params["root"] = "HP:0000118"
    app.query_params["depth"] = "1"
    at = app.run()
    assert metrics(at)["Classes"] == "23"
