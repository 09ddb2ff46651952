"""AppTest of the Train page (app_pages/1_Train.py): form, estimate, job table, live progress, reload."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from bioviz.evaluation.store import store_with_run
from bioviz.models.model_spec import DEFAULT_BASE
from bioviz.models.runs import read_run
from trainer.jobs.store import QUEUED, RUNNING, SUCCEEDED
from trainer.jobs.queue import Worker

from tests.support.polling import wait_for

ROOT = Path(__file__).resolve().parents[2]
PAGE = "app_pages/1_Train.py"
STANDIN = "tests.trainer.standin_trainer"


def train_page_from_app(data_dir) -> AppTest:
    """The Train page on the tiny fixture ontology, entered from app.py as in the app.

    So ``st.switch_page`` finds the other pages, and leaving and coming back behaves as
    it does for a user.
    """
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    at.query_params["source"] = str(data_dir / "mini.obo")
    at.run()
    return at.switch_page("app_pages/1_Train.py").run()


@pytest.fixture
def page(tmp_home, data_dir, open_app):
    """A fresh session of the Train page (through the router) on the tiny fixture ontology."""

    def open_page() -> AppTest:
        return open_app(PAGE, {"source": str(data_dir / "mini.obo")}, timeout=120)

    return open_page


def table(at) -> list[dict]:
    return at.dataframe[0].value.to_dict("records") if at.dataframe else []


def job_box(at):
    """The "Selected job" selector (its key changes each time the page itself picks a job)."""
    return next(box for box in at.selectbox if box.label == "Selected job")


def metrics(at) -> dict:
    return {m.label: m.value for m in at.metric}


def test_form_shows_the_training_set_estimate_and_encoder_defaults(page):
    at = page().run()
    assert not at.exception
    assert "shots 15 is larger than the classes allow" in at.error[0].value  # 15 is the default
    at.number_input(key="train_shots").set_value(1).run()
    assert not at.error
    assert metrics(at)["Classes trained on"] == "2"
    assert int(metrics(at)["Test names"]) == 2
    assert at.number_input(key="train_hp_residual_batch_size").value == 16  # fewshot §3.2
    at.selectbox(key="train_encoder").set_value("dan").run()
    assert at.number_input(key="train_hp_dan_batch_size").value == 64  # higher-level semantics §5.2
    assert at.selectbox(key="train_hp_dan_stop_on").value == "mAP"
    assert at.number_input(key="train_hp_hidden").help.startswith("hidden layer width")
    assert at.number_input(key="train_hp_dan_context_weight").value == 1.0  # gamma, higher-level §3
    assert at.checkbox(key="train_hp_identity_start").value is False
    assert at.selectbox(key="train_hp_base_weight").value == "auto"  # chosen on validation unless fixed
    assert at.number_input(key="train_hp_min_retention").value == 0.9  # derived on validation (docs/training.md)
    assert "No training jobs yet" in at.info[0].value
    # Options of other encoder types stay hidden; switches are checkboxes, not numbers.
    at.selectbox(key="train_encoder").set_value("hierarchical").run()
    keys = {w.key for w in at.number_input} | {w.key for w in at.checkbox}
    assert "train_hp_finetune" in {w.key for w in at.checkbox}
    assert not any("context_weight" in k or "synonym_dropout" in k for k in keys)


def test_invalid_config_is_refused_with_one_line_and_no_job(page):
    at = page().run()
    at.number_input(key="train_shots").set_value(50).run()
    assert any("shots 50 is larger" in e.value for e in at.error)  # the estimate already says so
    at.button[0].click().run()
    assert not at.exception
    assert any("larger than the classes allow" in e.value for e in at.error)
    assert Worker().store.list() == []


def test_reload_mid_training_shows_the_same_job_and_progress(page, tmp_path):
    worker = Worker(module=STANDIN)
    gate = tmp_path / "go"
    job = worker.submit({"source": "mini", "epochs": 2, "wait_file": str(gate)}, validate=False)
    wait_for(worker, job.id, lambda j: j.progress.get("epoch") == 2)
    for _ in range(2):  # first visit, then a reload (a new session) while it still runs
        at = page().run()
        assert not at.exception
        [row] = table(at)
        assert row["job"] == job.id and row["status"] == RUNNING and row["progress"] == "epoch 2/2"
        assert job_box(at).value == job.id
        assert at.query_params["job"] in (job.id, [job.id])
        assert any(b.label == "Cancel" for b in at.button)
        assert "standin: training 2 epochs" in at.code[0].value  # the log tail
    gate.touch()
    wait_for(worker, job.id, lambda j: j.finished)
    at = page().run()
    assert table(at)[0]["status"] == SUCCEEDED
    assert any("Finished in" in s.value for s in at.success)
    assert len(at.get("plotly_chart")) == 3  # curves, baseline vs trained, the base-weight choice
    scores = json.dumps(json.loads(at.get("plotly_chart")[1].proto.spec), ensure_ascii=False)
    assert "base weight 0.5 (chosen on validation, retention ≥ 0.85)" in scores


def test_two_jobs_back_to_back_the_second_waits_visibly(page, tmp_path):
    worker = Worker(module=STANDIN, slots={"cpu": 1, "cuda": 1})
    gate = tmp_path / "go"
    first = worker.submit({"source": "mini", "epochs": 1, "wait_file": str(gate)}, validate=False)
    second = worker.submit({"source": "mini", "epochs": 1}, validate=False)
    wait_for(worker, first.id, lambda j: j.status == RUNNING)
    at = page().run()
    rows = {r["job"]: r for r in table(at)}
    assert rows[first.id]["status"] == RUNNING
    assert rows[second.id]["status"] == QUEUED and rows[second.id]["progress"] == "waiting (#1 in queue)"
    # The running job is shown first (its curves move), not the newer one that only waits.
    assert job_box(at).value == first.id
    assert not any("Waiting in the queue" in i.value for i in at.info)
    job_box(at).set_value(second.id).run()
    assert "Waiting in the queue (#1)" in at.info[0].value
    at.button(key=f"train_cancel_{second.id}").click().run()
    assert {r["job"]: r for r in table(at)}[second.id]["status"] == "cancelled"
    gate.touch()
    assert wait_for(worker, first.id, lambda j: j.finished).status == SUCCEEDED


def test_a_job_on_a_umls_release_gets_the_sidebar_loader_options(tmp_home, umls_isa_only, monkeypatch, open_app):
    monkeypatch.setenv("BIOVIZ_JOB_SLOTS", "cpu=0,cuda=0")  # the job stays queued: nothing trains here
    at = open_app(PAGE, {"source": str(umls_isa_only), "semantic_group": "DISO", "hierarchy": "isa"}, timeout=120)
    at.run()
    assert at.sidebar.radio(key="hierarchy").value == "isa"
    at.number_input(key="train_shots").set_value(1).run()
    assert not at.error and metrics(at)["Classes trained on"] == "2"
    at.button[0].click().run()  # the worker validates the config by loading the level with these options
    assert not at.exception and not at.error, [e.value for e in at.error]
    [job] = Worker().store.list()
    options = {"sab": "SNOMEDCT_US", "semantic_group": "DISO", "hierarchy": "isa"}
    assert job.status == QUEUED and job.config["source_options"] == options
    assert json.loads(Path(job.config_path).read_text())["source_options"] == options  # what the trainer reads


def test_the_selected_job_stays_selected_after_a_visit_to_another_page(tmp_home, data_dir):
    worker = Worker(module=STANDIN)
    older = worker.submit({"source": "mini", "epochs": 1}, validate=False)
    wait_for(worker, older.id, lambda j: j.finished)
    newer = worker.submit({"source": "mini", "epochs": 1}, validate=False)
    wait_for(worker, newer.id, lambda j: j.finished)
    at = train_page_from_app(data_dir)
    assert job_box(at).value == newer.id  # newest first
    job_box(at).set_value(older.id).run()
    assert at.query_params["job"] in (older.id, [older.id])
    at.switch_page("app_pages/0_Home.py").run()
    at.query_params.clear()  # a link in the page list opens a page without its parameters
    at.switch_page("app_pages/1_Train.py").run()
    assert not at.exception
    assert job_box(at).value == older.id
    assert any(f" · job {older.id} · " in m.value for m in at.markdown)  # the run's label first, the id beside it


def test_the_form_keeps_its_values_after_a_visit_to_another_page(tmp_home, data_dir):
    at = train_page_from_app(data_dir)
    at.number_input(key="train_shots").set_value(1)
    at.selectbox(key="train_encoder").set_value("dan")
    at.number_input(key="train_hp_hidden").set_value(32)
    at.selectbox(key="train_base").set_value("other…").run()
    at.text_input(key="train_base_other").set_value("FremyCompany/BioLORD-2023").run()
    assert not at.error, [e.value for e in at.error]
    at.switch_page("app_pages/0_Home.py").run()
    at.switch_page("app_pages/1_Train.py").run()
    assert not at.exception and not at.error, [e.value for e in at.error]  # 15 shots would not fit mini.obo
    assert at.number_input(key="train_shots").value == 1
    assert at.selectbox(key="train_encoder").value == "dan"
    assert at.number_input(key="train_hp_hidden").value == 32
    assert at.selectbox(key="train_base").value == "other…"  # the typed hub id is in use again
    assert at.text_input(key="train_base_other").value == "FremyCompany/BioLORD-2023"


@pytest.mark.slow
def test_launch_a_real_run_from_the_page_and_open_it_in_views(tmp_home, data_dir):
    at = train_page_from_app(data_dir)
    at.number_input(key="train_shots").set_value(1)
    at.selectbox(key="train_device").set_value("cpu")
    at.number_input(key="train_hp_residual_epochs").set_value(2)
    at.number_input(key="train_hp_hidden").set_value(32)
    at.selectbox(key="train_hp_base_weight").set_value(0.3).run()
    at.button[0].click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    [job] = Worker().store.list()
    assert job.config["shots"] == 1 and job.config["epochs"] == 2 and job.requested_device == "cpu"
    assert job.config["identity_start"] is False  # a checkbox, passed on as a switch
    assert job.config["base_weight"] == 0.3
    assert job_box(at).value == job.id
    done = wait_for(Worker(), job.id, lambda j: j.finished)
    assert done.status == SUCCEEDED, done.error
    store_with_run(done.run_dir, "benchmark:mayosrs", {
        "model": "run", "task": "mayosrs", "metrics": {"spearman": 0.5}, "ci": {"spearman": [0.3, 0.7]},
        "sizes": {"pairs": 101},
    })
    at.run()
    assert table(at)[0]["status"] == SUCCEEDED and table(at)[0]["progress"].startswith("epoch 2/2 (best ")
    assert read_run(done.run_dir).metrics["base_mix"]["weight"] == 0.3
    assert any("Evaluations stored with this run" in m.value for m in at.markdown)
    stored = [d.value for d in at.dataframe if "value" in d.value.columns]  # the job's and the run list's
    assert stored and all(t["value"].tolist() == [0.5] for t in stored)
    at.button(key=f"train_open_{job.id}").click().run()  # on to app_pages/4_Neighbours.py
    assert not at.exception
    assert at.session_state["model_b"] == done.run_dir
    assert at.session_state["model_a"] == DEFAULT_BASE  # the run's base: the page's default base
    assert not any(b.label == "Launch training" for b in at.button)  # no longer on the Train page


def test_run_list_shows_every_complete_run_and_its_stored_figures(page, evaluated_run, tmp_home):
    bare = tmp_home / "runs" / "cli-run"  # a run from the command line, never evaluated
    bare.mkdir()
    (bare / "run.json").write_text('{"run_id": "cli-run", "config": {"source": "icd10", "depth": 1, '
                                   '"encoder": "residual", "base": "minilm", "shots": 15}}')
    (tmp_home / "runs" / ".x.partial-1").mkdir()  # being written: not listed
    at = page().run()
    assert not at.exception
    assert any(s.value == "Runs" for s in at.subheader)
    runs = at.dataframe[0].value  # no jobs: the run list is the first table
    assert sorted(runs["run"]) == ["cli-run", "mini-definitions"]
    listed = runs.set_index("run")
    assert listed.loc["mini-definitions", "encoder"] == "definitions"
    assert listed.loc["mini-definitions", "stored evaluations"] == 2
    assert listed.loc["cli-run", "trained on"] == "icd10 d1"
    at.selectbox(key="train_run").set_value(str(evaluated_run)).run()
    stored = at.dataframe[1].value
    assert list(stored["task"]) == ["Semantic similarity ranking", "MayoSRS"]
    assert any("Evaluations stored with" in m.value and "(mini-definitions)" in m.value for m in at.markdown)
    at.selectbox(key="train_run").set_value(str(bare)).run()
    assert len(at.dataframe) == 1
    assert any("No evaluations stored with this run yet" in i.value for i in at.info)


def test_run_list_is_empty_without_runs(page):
    at = page().run()
    assert any("No complete runs yet" in i.value for i in at.info)
