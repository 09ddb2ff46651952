"""The Train page reads as a form for people: hyperparameters by their human names, what each
encoder does, the short classes by name, one score format, runs renamed in place, and no
Streamlit warning about widget defaults (issue 14)."""

from __future__ import annotations

import json

import pytest
from streamlit.elements.lib import policies

from bioviz.models.runs import read_run
from tests.pages.test_train import PAGE, train_page_from_app
from trainer.job_options import ENCODER_SUMMARIES


@pytest.fixture
def page(tmp_home, data_dir, open_app):
    return lambda: open_app(PAGE, {"source": str(data_dir / "mini.obo")}, timeout=120).run()


def test_hyperparameters_have_human_labels_and_encoders_say_what_they_do(page):
    at = page()
    at.number_input(key="train_shots").set_value(1).run()
    assert at.number_input(key="train_hp_test_per_class").label == "Test names per class"
    assert at.number_input(key="train_hp_split_seed").label == "Split seed"
    assert at.number_input(key="train_hp_residual_batch_size").label == "Batch size"
    assert "`test_per_class`" in at.number_input(key="train_hp_test_per_class").help  # the config field, in help
    labels = [w.label for kind in ("number_input", "selectbox", "checkbox") for w in at.get(kind)]
    assert not [label for label in labels if "_" in label]
    encoder = at.selectbox(key="train_encoder")
    assert all(f"**{name}**" in encoder.help for name in ("residual", "dan", "cca", "hierarchical", "definitions"))
    assert any(c.value == ENCODER_SUMMARIES["residual"] for c in at.caption)
    encoder.set_value("definitions").run()
    assert any(c.value == ENCODER_SUMMARIES["definitions"] for c in at.caption)


def test_the_estimate_names_the_classes_with_too_few_names(page):
    at = page()
    at.number_input(key="train_shots").set_value(3).run()  # 1 test + 3 + 3 names: mini's classes have 5 and 6
    assert not at.error
    assert any("2 classes have fewer names than asked for" in c.value
               and "lung disease (5 names), heart disease (6 names)" in c.value for c in at.caption)


def test_no_warning_about_a_widget_default_also_set_through_the_session(tmp_home, data_dir, monkeypatch):
    warnings = []
    monkeypatch.setattr(policies, "_shown_default_value_warning", False)
    monkeypatch.setattr(policies._LOGGER, "warning", lambda message, *args, **kw: warnings.append(message % args))
    at = train_page_from_app(data_dir)
    at.number_input(key="train_shots").set_value(1)
    at.number_input(key="train_hp_hidden").set_value(32)
    at.checkbox(key="train_hp_identity_start").check().run()
    at.switch_page("app_pages/0_Home.py").run()
    at.switch_page("app_pages/1_Train.py").run()  # the form comes back with the kept values
    assert not at.exception
    assert at.number_input(key="train_shots").value == 1 and at.checkbox(key="train_hp_identity_start").value
    assert warnings == []


def test_a_run_is_renamed_in_the_run_list_with_its_id_still_shown(page, evaluated_run):
    at = page()
    at.number_input(key="train_shots").set_value(1).run()  # a split mini.obo allows: no error from the form
    field = at.text_input(key="train_run_name_mini-definitions")
    default = read_run(evaluated_run).default_name
    assert field.value == default and any("mini-definitions" in m.value for m in at.markdown)
    field.set_value("Definitions on mini").run()
    assert read_run(evaluated_run).name == "Definitions on mini"
    runs = at.dataframe[0].value.set_index("run")
    assert runs.loc["mini-definitions", "name"] == "Definitions on mini"
    assert at.selectbox(key="train_run").format_func(str(evaluated_run)) == "Definitions on mini (mini-definitions)"
    at.text_input(key="train_run_name_mini-definitions").set_value("two\x07words").run()
    [error] = at.error  # one line, the name refused
    assert error.value.startswith("a run name is one line of plain text: this one has the control character")
    assert read_run(evaluated_run).name == "Definitions on mini"  # nothing saved is lost
    assert at.text_input(key="train_run_name_mini-definitions").value == "Definitions on mini"
    at.text_input(key="train_run_name_mini-definitions").set_value("  ").run()  # blank: the default name again
    assert read_run(evaluated_run).user_name is None and not at.error


def test_scores_have_one_format_on_the_page(page, evaluated_run):
    at = page()
    columns = json.loads(at.dataframe[0].proto.columns)  # the run list
    assert all(columns[c]["type_config"]["format"] == "%.3f" for c in ("test mAP base", "test mAP trained"))
    at.selectbox(key="train_run").set_value(str(evaluated_run)).run()
    stored = json.loads(at.dataframe[1].proto.columns)
    assert stored["value"]["type_config"]["format"] == "%.3f"
