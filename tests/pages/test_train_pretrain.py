"""AppTest of the Train page's "Pretrain a base model" choice: the form, the job, kill and resume, the model.

The pipeline test trains the bundled minilm for real on tests/data/mini.obo (19 pairs):
the job is killed (its runner and trainer, SIGKILL) once a checkpoint is written, resumed
from the page, and the published model is then offered by the other pages' model pickers.
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest

from bioviz.models.model_spec import DEFAULT_BASE  # the form's first base model
from bioviz.evaluation.overlap import PRETRAIN_FILE, TERMS_FILE
from bioviz.models.runs import read_run
from tests.pages.test_train import table
from tests.support.polling import wait_for
from trainer.jobs.pretrain_job import TRAINER_STATE, work_dir
from trainer.jobs.queue import Worker
from trainer.jobs.store import INTERRUPTED, QUEUED, SUCCEEDED

PAGE = "app_pages/1_Train.py"
PRETRAIN = "Pretrain a base model"


def pretrain_page(open_app, data_dir):
    at = open_app(PAGE, {"source": str(data_dir / "mini.obo")}, timeout=120).run()
    at.radio(key="train_mode").set_value(PRETRAIN).run()
    assert not at.exception, at.exception
    return at


def launch(at):
    next(b for b in at.button if b.label == "Launch pretraining").click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]


def test_the_form_queues_a_pretrain_job_that_keeps_the_levels_held_out_names_out(tmp_home, data_dir, open_app,
                                                                                 monkeypatch):
    monkeypatch.setenv("BIOVIZ_JOB_SLOTS", "cpu=0,cuda=0")  # the job stays queued: nothing trains here
    at = pretrain_page(open_app, data_dir)
    mini = str(data_dir / "mini.obo")
    assert at.multiselect(key="pretrain_sources").value == [mini]  # the sidebar's source
    assert "HPO" in at.multiselect(key="pretrain_sources").options  # its readable name
    assert any("SapBERT" in c.value for c in at.caption)  # one sentence per chosen objective
    assert at.toggle(key="pretrain_exclude").value is True and "mini.obo d1" in at.toggle(key="pretrain_exclude").label
    at.multiselect(key="pretrain_objectives").set_value(["definitions", "hierarchy"])
    at.number_input(key="pretrain_max_pairs").set_value(3000)
    at.number_input(key="pretrain_shots").set_value(1)
    at.number_input(key="pretrain_seed").set_value(7)
    # issue 31's candidate options, generated from their PretrainConfig fields
    at.selectbox(key="pretrain_loss").set_value("gist")
    at.selectbox(key="pretrain_hard_negatives").set_value("mined")
    at.number_input(key="pretrain_relatedness_weight").set_value(0.5)
    at.number_input(key="pretrain_interpolate").set_value(0.5).run()
    launch(at)
    [job] = Worker().store.list()
    assert job.status == QUEUED
    config = json.loads(Path(job.config_path).read_text())
    assert config["kind"] == "pretrain" and config["sources"] == [mini]
    assert (config["loss"], config["hard_negatives"], config["relatedness_weight"], config["interpolate"]) == \
        ("gist", "mined", 0.5, 0.5) and config["relatedness_pairs"] == 10000
    assert config["objectives"] == ["definitions", "hierarchy"] and config["max_pairs"] == 3000
    assert config["exclude_levels"] == [f"{mini}::1"] and config["shots"] == 1 and config["seed"] == 7
    [row] = table(at)
    assert row["run"].startswith(f"pretrained {DEFAULT_BASE}: definitions+hierarchy, 3k pairs (")
    assert row["status"] == QUEUED


def test_a_level_the_option_cannot_name_is_not_kept_out(tmp_home, data_dir, open_app, monkeypatch):
    monkeypatch.setenv("BIOVIZ_JOB_SLOTS", "cpu=0,cuda=0")
    at = open_app(PAGE, {"source": str(data_dir / "mini.obo"), "synonyms": "1"}, timeout=120).run()
    at.radio(key="train_mode").set_value(PRETRAIN).run()
    assert at.toggle(key="pretrain_exclude").disabled
    assert any("Synonym sets, kept ambiguous names" in c.value for c in at.caption)
    launch(at)
    assert Worker().store.list()[0].config["exclude_levels"] == []


def test_a_source_outside_the_servers_data_folders_is_refused_in_one_line(tmp_home, data_dir, open_app,
                                                                          monkeypatch):
    monkeypatch.setenv("BIOVIZ_JOB_SLOTS", "cpu=0,cuda=0")
    at = pretrain_page(open_app, data_dir)
    at.session_state["pretrain_sources"] = ["hpo", "/usr/share/private.obo"]  # a source chosen earlier, say
    at.run()
    next(b for b in at.button if b.label == "Launch pretraining").click().run()
    assert not at.exception and len(at.error) == 1 and "\n" not in at.error[0].value
    assert Worker().store.list() == []


def checkpoint_written(work: Path) -> bool:
    for state in (work / "checkpoints").glob("checkpoint-*/" + TRAINER_STATE):
        try:
            json.loads(state.read_text())
            return True
        except (OSError, ValueError):
            continue
    return False


@pytest.mark.slow
def test_pretraining_killed_and_resumed_from_the_page_becomes_a_model_every_picker_offers(tmp_home, data_dir,
                                                                                           open_app):
    at = pretrain_page(open_app, data_dir)
    at.multiselect(key="pretrain_objectives").set_value(["synonyms", "definitions", "hierarchy"])
    at.number_input(key="pretrain_shots").set_value(1)
    at.selectbox(key="train_device").set_value("cpu")
    at.number_input(key="pretrain_batch_size").set_value(2)
    # one epoch of 7 steps: a checkpoint at step 5, the kill, and a resume that trains steps 6 and 7
    # (two epochs only added steps and a second 250 MB checkpoint; what is proven is the kill and resume)
    at.number_input(key="pretrain_epochs").set_value(1)
    at.number_input(key="pretrain_save_steps").set_value(5)
    at.number_input(key="pretrain_max_seq_length").set_value(16).run()
    launch(at)
    worker = Worker()
    [job] = worker.store.list()
    work = work_dir(job.config_path)
    running = wait_for(worker, job.id, lambda j: j.finished or checkpoint_written(work))
    assert not running.finished, "the job ended before it could be killed"
    os.killpg(json.loads(running.handle)["pid"], signal.SIGKILL)  # its runner and its trainer, mid-training
    killed = wait_for(worker, job.id, lambda j: j.finished)
    assert killed.status == INTERRUPTED and not Path(killed.run_dir).exists()
    at.run()
    assert table(at)[0]["status"] == INTERRUPTED
    assert table(at)[0]["progress"].startswith("interrupted at step ")
    at.button(key=f"train_resume_{job.id}").click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    [resumed, _] = worker.store.list()[::-1]
    done = wait_for(worker, resumed.id, lambda j: j.finished)
    assert done.status == SUCCEEDED, done.error
    record = json.loads((Path(done.run_dir) / PRETRAIN_FILE).read_text())
    assert record["resumed_from_step"] == 5 and record["steps"] == record["pairs"]["train"] // 2 > 5
    assert record["excluded"]["levels"][0]["split"]["shots"] == 1
    assert (Path(done.run_dir) / TERMS_FILE).is_file() and not work_dir(resumed.config_path).exists()
    label = read_run(done.run_dir).label
    assert label.startswith(f"pretrained {DEFAULT_BASE}: synonyms+definitions+hierarchy, {record['pairs']['train']} pairs (")
    at.run()
    assert table(at)[0]["status"] == SUCCEEDED
    assert table(at)[0]["progress"].startswith(f"step {record['steps']}/{record['steps']} · loss ")
    assert any(m.label == "Validation MRR" for m in at.metric)
    at.radio(key="train_mode").set_value("Few-shot run on this level").run()
    assert f"run {label}" in at.selectbox(key="train_base").options  # the base of a later few-shot run
    at.switch_page("app_pages/6_Evaluation.py").run()
    assert not at.exception
    assert label in at.multiselect(key="eval_models").options
    assert label in at.sidebar.selectbox(key="_model_b_label").options  # Neighbours, Projection: same pickers
