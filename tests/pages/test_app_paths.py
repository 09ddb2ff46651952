"""No absolute server path in the app's titles, pickers or links: uploads by their own name, runs by their id."""

from __future__ import annotations

import json
import os
import shutil

import pytest

from bioviz.models.model_spec import PRESET_MODELS
from streamlit.testing.v1 import AppTest

from bioviz.models.runs import list_runs
from bioviz.uploads import store_upload


def url(at, key) -> str:
    value = at.query_params[key]
    return value[0] if isinstance(value, list) else value


def shown_texts(at) -> list[str]:
    """Every text the page and sidebar show, the link included."""
    texts = [e.value for kind in ("title", "subheader", "markdown", "caption", "error", "warning", "info")
             for e in getattr(at, kind)]
    texts += [option for box in at.sidebar.selectbox for option in box.options]
    return texts + [str(v) for v in at.query_params.values()]


@pytest.fixture
def upload(tmp_home, data_dir):
    return store_upload("My HPO (v2).obo", (data_dir / "mini.obo").read_bytes())


@pytest.mark.parametrize("link", ["absolute", "relative"])
def test_an_upload_is_shown_by_its_own_name_and_linked_without_server_paths(upload, tmp_home, open_app, link):
    source = str(upload) if link == "absolute" else upload.name  # an old link, or one made now
    at = open_app(None, {"source": source}, timeout=60).run()
    assert not at.exception and not at.error
    assert at.session_state["source"] == os.path.realpath(upload)
    assert url(at, "source") == upload.name, "the link names the upload, not where the server keeps it"
    assert at.sidebar.selectbox(key="source").value == str(upload)
    assert "My HPO (v2).obo" in at.sidebar.selectbox(key="source").options
    assert at.subheader[0].value.startswith("My HPO \\(v2\\)") or at.subheader[0].value.startswith("My HPO (v2)")
    assert not [t for t in shown_texts(at) if str(tmp_home) in t or "fe8a7740d3d2 " in t]


def test_a_shared_data_file_is_linked_by_its_path_inside_the_data_folder(tmp_home, open_app, data_dir):
    at = open_app(None, {"source": str(data_dir / "mini.obo")}, timeout=60).run()
    assert not at.exception and url(at, "source") == "mini.obo"
    assert "mini.obo" in at.sidebar.selectbox(key="source").options


def test_a_run_in_a_link_is_its_run_id(evaluated_run, open_app, data_dir):
    for given in (str(evaluated_run), evaluated_run.name):
        at = open_app(None, {"source": str(data_dir / "mini.obo"), "model_b": given}, timeout=60).run()
        assert not at.exception
        assert at.session_state["model_b"] == os.path.realpath(evaluated_run)
        assert url(at, "model_b") == "mini-definitions"


def pickers_script():
    import streamlit as st

    from ui import state

    st.session_state.setdefault("model_a", "minilm")
    st.json(state.model_choices())


def test_pickers_offer_runs_by_their_readable_labels_and_never_merge_two(evaluated_run):
    # two runs of one name whose short ids are equal: both stay selectable
    for run_id in ("20261122-192803-ecd5", "20261123-101010-ecd5"):
        twin = evaluated_run.parent / run_id
        shutil.copytree(evaluated_run, twin)
        info = json.loads((twin / "run.json").read_text())
        (twin / "run.json").write_text(json.dumps({**info, "run_id": run_id}))
    at = AppTest.from_function(pickers_script).run()
    assert not at.exception
    choices = json.loads(at.json[0].value)
    runs = {str(run.path): run for run in list_runs()}
    assert len(runs) == 3 and sorted(choices.values()) == sorted([*runs, *PRESET_MODELS])
    labels = {path: label for label, path in choices.items() if path in runs}
    assert labels[str(evaluated_run)] == "definitions · mini d1 · 2-shot (mini-definitions)"
    assert labels[str(evaluated_run.parent / "20261122-192803-ecd5")] == \
        "definitions · mini d1 · 2-shot (20261122-192803-ecd5)"


def test_the_evaluation_pages_models_are_linked_by_run_id(evaluated_run, open_app, data_dir):
    link = {"source": "mini.obo", "depth": "1", "eval_models": f"minilm|{evaluated_run.name}"}
    at = open_app("app_pages/6_Evaluation.py", link, timeout=120).run()
    assert not at.exception
    assert at.multiselect(key="eval_models").value == ["minilm", "definitions · mini d1 · 2-shot (mini-definitions)"]
    assert url(at, "eval_models") == "minilm|mini-definitions"
