"""The job system: SQLite store, queue, runner processes, cancel, dead-process detection.

Most tests run the stand-in trainer (tests/trainer/standin_trainer.py, same progress and
SIGTERM contract as ``python -m trainer train``, but instant); one runs the real trainer.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import time
from pathlib import Path

import pytest

from bioviz.errors import BiovizError
from bioviz.models.runs import is_run_dir
from trainer.jobs.executor import LocalProcessExecutor, group_alive
from trainer.jobs.progress import progress_stage, read_progress, summarise_progress
from trainer.jobs.queue import Worker, parse_slots
from trainer.jobs.store import (
    CANCELLED, FAILED, INTERRUPTED, QUEUED, RUNNING, STARTING, SUCCEEDED, JobError, JobStore,
)

from tests.support.polling import wait_for, wait_until

STANDIN = "tests.trainer.standin_trainer"


def finished(job):
    return job.finished


def leftovers(job) -> list[str]:
    """Anything under runs/ named after the job (the run or a trainer temp dir)."""
    runs = Path(job.run_dir).parent
    return sorted(p.name for p in runs.iterdir() if job.id in p.name) if runs.is_dir() else []


@pytest.fixture
def worker(tmp_home):
    return Worker(module=STANDIN, slots={"cpu": 1, "cuda": 1})


def test_store_uses_wal_and_persists_across_instances(tmp_home):
    store = JobStore()
    job = store.create({"source": "mini", "shots": 2})
    assert (tmp_home / "jobs.sqlite").is_file()
    with sqlite3.connect(tmp_home / "jobs.sqlite") as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    again = JobStore().get(job.id)
    assert again.status == QUEUED and again.config == {"source": "mini", "shots": 2}
    assert again.run_dir == str(tmp_home / "runs" / job.id)
    assert Path(again.log_path).parent == tmp_home / "jobs" / job.id
    with pytest.raises(JobError, match="no job 'nope'"):
        store.get("nope")


def test_a_job_config_is_written_once_to_its_config_file(tmp_home):
    config = {"source": "icd10", "shots": None, "root": None, "synonyms": True}
    job = JobStore().create(config)
    assert job.config_path == str(tmp_home / "jobs" / job.id / "config.json")
    assert json.loads(Path(job.config_path).read_text()) == config  # None stays None: all names


def test_slots():
    assert parse_slots("cpu=2") == {"cpu": 2, "cuda": 1}
    with pytest.raises(BiovizError, match="bad job slot"):
        parse_slots("tpu=3")


def test_progress_summary_keeps_latest_epoch_and_skips_half_lines(tmp_path):
    path = tmp_path / "progress.jsonl"
    path.write_text('{"event":"start","max_epochs":4,"device":"cpu"}\n'
                    '{"event":"epoch","epoch":1,"max_epochs":4,"losses":{"total":2.0},"val_metric":0.3,'
                    '"val_name":"mAP","eta_s":9}\n{"event":"epo')
    summary = summarise_progress(read_progress(path))
    assert summary["epoch"] == 1 and summary["max_epochs"] == 4 and summary["val_metric"] == 0.3
    assert summary["device"] == "cpu" and summary["eta_s"] == 9


def test_progress_summary_and_job_row_show_the_embedding_before_training(tmp_home, tmp_path):
    from dataclasses import replace

    from trainer.jobs.progress import job_row

    queued = JobStore().create({"source": "icd10"})
    path = tmp_path / "progress.jsonl"
    path.write_text('{"event":"embedding","done":3000,"total":12456,"eta_s":40}\n')
    summary = summarise_progress(read_progress(path))
    assert summary["embedding"] == {"done": 3000, "total": 12456} and summary["eta_s"] == 40
    row = job_row(replace(queued, status=RUNNING, progress=summary))
    assert row["progress"] == "embedding 3,000/12,456 names" and row["eta"] == "0:40"
    with open(path, "a") as handle:  # training started: the epoch counter takes over
        handle.write('{"event":"start","max_epochs":4,"device":"cpu"}\n')
    summary = summarise_progress(read_progress(path))
    assert "embedding" not in summary and summary["eta_s"] is None  # the embedding's ETA is gone
    assert job_row(replace(queued, status=RUNNING, progress=summary))["progress"] == "epoch 0/4"
    with open(path, "a") as handle:  # training over: the base weight is being chosen
        handle.write('{"event":"epoch","epoch":4,"max_epochs":4,"losses":{"total":1.0},"eta_s":0}\n'
                     '{"event":"base_weight","done":3,"total":11}\n')
    summary = summarise_progress(read_progress(path))
    choosing = replace(queued, status=RUNNING, progress=summary)
    assert job_row(choosing)["progress"] == "choosing the base weight 3/11" and job_row(choosing)["eta"] == ""
    assert progress_stage(choosing) == ("choosing the base weight 3/11", 3 / 11)  # the page's progress bar


def test_tiny_job_goes_from_submit_to_succeeded(worker):
    job = worker.submit({"epochs": 3}, validate=False)
    assert job.status in (QUEUED, STARTING, RUNNING)
    done = wait_for(worker, job.id, finished)
    assert done.status == SUCCEEDED, done.error
    assert done.device == "cpu" and done.exit_code == 0 and done.error is None
    assert is_run_dir(done.run_dir) and leftovers(done) == [done.id]
    assert done.progress["epoch"] == 3 and done.progress["done"] is True
    assert [e["event"] for e in read_progress(done.progress_path)] == ["start", "epoch", "epoch", "epoch", "done"]
    log = Path(done.log_path).read_text()
    assert "standin: training 3 epochs on cpu" in log and "--progress-file" in log
    assert done.duration_s() > 0


def test_failing_job_keeps_its_log_and_reason_and_leaves_no_run(worker):
    job = worker.submit({"epochs": 3, "fail_at": 2}, validate=False)
    done = wait_for(worker, job.id, finished)
    assert done.status == FAILED
    assert done.exit_code == 1 and "loss became NaN at epoch 2" in done.error
    assert "loss became NaN" in Path(done.log_path).read_text()
    assert leftovers(done) == []


def test_cancel_while_running_stops_the_process_group(worker, tmp_path):
    job = worker.submit({"epochs": 2, "wait_file": str(tmp_path / "never")}, validate=False)
    job = wait_for(worker, job.id, lambda j: j.progress.get("epoch") == 2)
    assert job.status == RUNNING
    pid = json.loads(job.handle)["pid"]
    cancelled = worker.cancel(job.id)
    assert cancelled.status == CANCELLED and cancelled.error == "cancelled by user"
    with pytest.raises(ProcessLookupError):
        os.killpg(pid, 0)  # the runner and the trainer are both gone
    assert leftovers(cancelled) == []
    assert "stopped by SIGTERM" in Path(job.log_path).read_text()
    with pytest.raises(JobError, match="already cancelled"):
        worker.cancel(job.id)


def test_cancel_without_waiting_returns_at_once_and_the_runner_records_the_end(worker, tmp_path):
    job = worker.submit({"epochs": 1, "wait_file": str(tmp_path / "never")}, validate=False)
    job = wait_for(worker, job.id, lambda j: j.progress.get("epoch") == 1)
    assert worker.cancel(job.id, wait=False).status == CANCELLED
    ended = wait_for(worker, job.id, lambda j: j.exit_code is not None)
    assert ended.status == CANCELLED and ended.exit_code == 130
    wait_until(lambda: not leftovers(ended), what="the runner to tidy up after recording")


def test_trainer_ignoring_sigterm_is_killed_after_the_grace_period(worker, tmp_path):
    job = worker.submit({"epochs": 1, "ignore_term": True, "wait_file": str(tmp_path / "never")}, validate=False)
    job = wait_for(worker, job.id, lambda j: j.progress.get("epoch") == 1)
    cancelled = worker.cancel(job.id, grace_s=1.0)
    assert cancelled.status == CANCELLED
    assert not group_alive(json.loads(job.handle)["pid"])  # killed: zombies at most, until init reaps them
    assert leftovers(cancelled) == []


def test_killed_worker_is_marked_interrupted_and_the_next_job_still_runs(worker, tmp_path):
    first = worker.submit({"epochs": 2, "wait_file": str(tmp_path / "never")}, validate=False)
    second = worker.submit({"epochs": 2}, validate=False)
    first = wait_for(worker, first.id, lambda j: j.progress.get("epoch") == 2)
    assert worker.store.get(second.id).status == QUEUED
    os.killpg(json.loads(first.handle)["pid"], signal.SIGKILL)  # runner and trainer, no goodbye
    dead = wait_for(worker, first.id, finished)
    assert dead.status in (INTERRUPTED, FAILED)
    assert "SIGKILL" in dead.error or "disappeared" in dead.error
    assert leftovers(dead) == []  # neither the run directory nor the trainer's temp dir
    assert wait_for(worker, second.id, finished).status == SUCCEEDED


def test_a_job_queued_before_config_files_still_runs(worker):
    """Jobs in a jobs.sqlite from before config.json: the row's config is written out for them."""
    job = worker.store.create({"epochs": 2}, module=STANDIN)
    Path(job.config_path).unlink()
    done = wait_for(worker, job.id, finished)
    assert done.status == SUCCEEDED, done.error
    assert json.loads(Path(job.config_path).read_text()) == {"epochs": 2}


def test_runner_vanished_while_not_our_child_is_interrupted(worker, tmp_path):
    """A job whose recorded process no longer exists (app restarted, machine rebooted)."""
    job = worker.store.create({"epochs": 1}, module=STANDIN)
    worker.store.update(job.id, status=RUNNING, device="cpu", started_at=time.time(),
                        handle=json.dumps({"pid": 2**22 + 12345, "start": "1"}))
    Path(job.run_dir).mkdir(parents=True)  # half-written, no run.json
    worker.reconcile()
    dead = worker.store.get(job.id)
    assert dead.status == INTERRUPTED and "disappeared" in dead.error
    assert not Path(job.run_dir).exists()


def test_concurrency_limit_queues_the_second_job(worker, tmp_path):
    gate = tmp_path / "go"
    first = worker.submit({"epochs": 1, "wait_file": str(gate)}, validate=False)
    second = worker.submit({"epochs": 1}, validate=False)
    wait_for(worker, first.id, lambda j: j.status == RUNNING)
    for _ in range(5):  # however often anyone looks, the only slot stays taken
        worker.reconcile()
        assert worker.store.get(second.id).status == QUEUED
    gate.touch()
    assert wait_for(worker, first.id, finished).status == SUCCEEDED
    # nobody needs to look: the first job's runner starts the second one itself
    wait_until(lambda: worker.store.get(second.id).status != QUEUED, 60, what="the second job to start")
    assert worker.store.get(second.id).status in (STARTING, RUNNING, SUCCEEDED)
    assert wait_for(worker, second.id, finished).status == SUCCEEDED


def test_simultaneous_reconciles_start_a_job_only_once(tmp_home, tmp_path):
    from concurrent.futures import ThreadPoolExecutor

    worker = Worker(module=STANDIN, slots={"cpu": 1, "cuda": 1})
    gate = tmp_path / "go"
    job = worker.store.create({"epochs": 1, "wait_file": str(gate)}, module=STANDIN)
    with ThreadPoolExecutor(6) as pool:  # six "pages" refreshing at the same moment
        list(pool.map(lambda _: Worker(module=STANDIN).reconcile(), range(6)))
    gate.touch()
    assert wait_for(worker, job.id, finished).status == SUCCEEDED
    assert Path(job.log_path).read_text().count(f"[job {job.id}] on cpu") == 1


def test_two_slots_run_two_jobs_at_once(tmp_home, tmp_path):
    worker = Worker(module=STANDIN, slots={"cpu": 2, "cuda": 1})
    gate = tmp_path / "go"
    jobs = [worker.submit({"epochs": 1, "wait_file": str(gate)}, validate=False) for _ in range(2)]
    for job in jobs:
        wait_for(worker, job.id, lambda j: j.status == RUNNING)
    gate.touch()
    assert [wait_for(worker, j.id, finished).status for j in jobs] == [SUCCEEDED, SUCCEEDED]


def test_cancel_queued_job_and_delete(worker, tmp_path):
    gate = tmp_path / "go"
    first = worker.submit({"epochs": 1, "wait_file": str(gate)}, validate=False)
    second = worker.submit({"epochs": 1}, validate=False)
    assert worker.cancel(second.id).error == "cancelled before it started"
    gate.touch()
    done = wait_for(worker, first.id, finished)
    assert worker.store.get(second.id).status == CANCELLED and not Path(second.log_path).exists()
    worker.delete(second.id)
    worker.delete(done.id, remove_run=True)
    assert worker.store.list() == [] and not Path(done.run_dir).exists()
    assert not Path(done.log_path).parent.exists()


def test_recycled_pid_is_not_mistaken_for_the_job(tmp_path):
    handle = json.dumps({"pid": os.getpid(), "start": "0"})  # alive pid, different start time
    assert LocalProcessExecutor().poll(handle).alive is False


# -- the real trainer ------------------------------------------------------------------
def tiny_config(data_dir, **overrides) -> dict:
    """A real training config that trains in seconds: the mini ontology, minilm, a small head."""
    return {"source": str(data_dir / "mini.obo"), "depth": 1, "shots": 1, "encoder": "residual",
            "base": "minilm", "epochs": 2, "hidden": 32, **overrides}


@pytest.mark.slow
def test_real_trainer_job_from_cli_submit_to_succeeded(tmp_home, data_dir, capsys):
    from trainer.cli import main

    assert main(["jobs", "submit", "--source", str(data_dir / "mini.obo"), "--shots", "1", "--epochs", "2",
                 "--hidden", "32", "--device", "cpu"]) == 0
    job_id = capsys.readouterr().out.strip()
    worker = Worker()
    done = wait_for(worker, job_id, finished, timeout=300)
    assert done.status == SUCCEEDED, f"{done.error}\n{Path(done.log_path).read_text()}"
    assert is_run_dir(done.run_dir) and leftovers(done) == [job_id]
    assert done.config["epochs"] == 2 and done.config["stop_on"] == "loss"  # the papers' defaults filled in
    assert done.progress["max_epochs"] == 2 and done.progress["val_name"] == "loss"

    assert main(["jobs", "status", job_id, "--json"]) == 0
    status = json.loads(capsys.readouterr().out)
    assert status["status"] == SUCCEEDED and status["run_dir"] == done.run_dir and status["exit_code"] == 0
    assert main(["jobs", "list"]) == 0
    listing = capsys.readouterr().out
    assert job_id in listing and "epoch 2/2" in listing and "residual · mini d1 · 1-shot" in listing
    assert main(["jobs", "logs", job_id]) == 0
    assert "epoch 2/2" in capsys.readouterr().out
    assert main(["jobs", "cancel", job_id]) == 2
    assert "already succeeded" in capsys.readouterr().err
    assert main(["jobs", "delete", job_id]) == 0
    assert worker.store.list() == [] and is_run_dir(done.run_dir)  # the run stays unless --with-run


@pytest.mark.slow
def test_real_trainer_cancelled_mid_training_leaves_no_run(tmp_home, data_dir):
    worker = Worker()
    job = worker.submit(tiny_config(data_dir, epochs=10_000, patience=10_000), device="cpu")
    job = wait_for(worker, job.id, lambda j: j.progress.get("epoch", 0) >= 1 or j.finished, timeout=300)
    assert job.status == RUNNING, job.error
    cancelled = worker.cancel(job.id)
    assert cancelled.status == CANCELLED and cancelled.exit_code == 130
    assert leftovers(cancelled) == []  # no run directory, no .partial- temp dir
    events = read_progress(job.progress_path)
    assert events[-1]["event"] == "error" and events[-1].get("cancelled") is True


@pytest.mark.parametrize("overrides, reason", [
    ({"encoder": "transformer-xl"}, "unknown encoder 'transformer-xl'"),
    ({"shots": 50}, "shots 50 is larger than the classes allow"),
    ({"base": "/no/such/model"}, "not found"),
    ({"init": "/no/such/run"}, "not a complete trained run"),
    ({"learning_rate": 0.1}, "unknown training option(s): learning_rate"),
])
def test_invalid_config_is_refused_before_a_job_exists(tmp_home, data_dir, overrides, reason):
    worker = Worker()
    with pytest.raises(BiovizError) as error:
        worker.submit(tiny_config(data_dir, **overrides))
    assert reason in str(error.value)
    assert worker.store.list() == [] and not list((tmp_home / "jobs").glob("*"))


def test_cli_refuses_bad_input_with_one_line(tmp_home, data_dir, capsys):
    from trainer.cli import main

    assert main(["jobs", "submit", "--source", str(data_dir / "mini.obo"), "--encoder", "nope"]) == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        "error: unknown encoder 'nope': choose one of residual, dan, cca, hierarchical, definitions"]
    assert main(["jobs", "status", "20990101-000000-dead"]) == 2
    assert "no job '20990101-000000-dead'" in capsys.readouterr().err
    assert main(["jobs", "list", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"jobs": []}


def test_gpu_slots_device_choice_and_environment(tmp_home, monkeypatch):
    """No GPU here: pretend two, and check the slot choice and what each job would see."""
    from collections import Counter
    from dataclasses import replace

    import trainer.jobs.queue as queue_module
    from trainer.jobs.runner import train_command

    monkeypatch.setattr(queue_module, "gpu_count", lambda: 2)
    worker = Worker(slots={"cpu": 1, "cuda": 1})
    assert worker.capacity() == {"cpu": 1, "cuda:0": 1, "cuda:1": 1}
    used = Counter()
    assert worker._pick_slot("auto", used) == "cuda:0"
    used["cuda:0"] += 1
    assert worker._pick_slot("auto", used) == "cuda:1"
    used["cuda:1"] += 1
    assert worker._pick_slot("auto", used) is None  # auto waits for a GPU rather than crawl on the CPU
    assert worker._pick_slot("cpu", used) == "cpu"
    assert worker._pick_slot("cuda:1", Counter()) == "cuda:1"

    job = replace(worker.store.create({"source": "icd10", "shots": None}), device="cuda:1")
    env = queue_module.job_env(job, tmp_home)
    assert env["CUDA_VISIBLE_DEVICES"] == "1" and env["BIOVIZ_HOME"] == str(tmp_home)
    command = train_command(job)
    assert command[command.index("--device") + 1] == "cuda"
    assert command[command.index("--config") + 1] == job.config_path
    assert json.loads(Path(job.config_path).read_text())["shots"] is None  # all names, not the default 15
    cpu_job = replace(job, device="cpu")
    assert queue_module.job_env(cpu_job, tmp_home)["CUDA_VISIBLE_DEVICES"] == ""


def test_cuda_request_is_refused_without_a_gpu(tmp_home, monkeypatch):
    import trainer.jobs.queue as queue_module

    monkeypatch.setattr(queue_module, "gpu_count", lambda: 0)
    with pytest.raises(BiovizError, match="not available here"):
        Worker(module=STANDIN).submit({"epochs": 1}, device="cuda", validate=False)
    assert JobStore().list() == []


# Version 0 of the job table (before claims): what older BIOVIZ_HOMEs hold.
_V0_SCHEMA = """
CREATE TABLE jobs (
    id TEXT PRIMARY KEY, config TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('queued', 'running', 'succeeded', 'failed', 'cancelled', 'interrupted')),
    requested_device TEXT NOT NULL DEFAULT 'auto', device TEXT, created_at REAL NOT NULL, started_at REAL,
    finished_at REAL, executor TEXT NOT NULL DEFAULT 'local', module TEXT NOT NULL DEFAULT 'trainer', handle TEXT,
    log_path TEXT NOT NULL, progress_path TEXT NOT NULL, run_dir TEXT NOT NULL, progress TEXT NOT NULL DEFAULT '{}',
    exit_code INTEGER, error TEXT
);
CREATE INDEX jobs_status ON jobs (status, created_at);
"""


def test_an_older_job_table_is_upgraded_in_place(tmp_home):
    with sqlite3.connect(tmp_home / "jobs.sqlite") as conn:
        conn.executescript(_V0_SCHEMA)
        for job_id, status in (("20250101-000000-aaaa", SUCCEEDED), ("20250101-000001-bbbb", QUEUED)):
            conn.execute("INSERT INTO jobs (id, config, status, created_at, log_path, progress_path, run_dir) "
                         "VALUES (?, '{\"source\": \"icd10\"}', ?, 1.0, 'l', 'p', 'r')", (job_id, status))
    store = JobStore()
    old, queued = store.list()
    assert (old.status, old.settled, old.config) == (SUCCEEDED, True, {"source": "icd10"})
    assert queued.status == QUEUED and not queued.settled
    assert store.update(queued.id, status=STARTING, token="t")  # the new state is allowed now
    with sqlite3.connect(tmp_home / "jobs.sqlite") as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == 1
    assert [j.id for j in JobStore().list()] == [old.id, queued.id]  # and opening it again changes nothing


def test_the_jobs_run_marker_is_the_librarys():
    from bioviz.models import runs
    from trainer.jobs import store

    assert store.RUN_FILE == runs.RUN_FILE  # spelled twice so each runner stays light


def test_paths_in_a_job_config_are_made_absolute_names_are_not(tmp_path, monkeypatch):
    from trainer.data import absolute_paths

    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "mine.obo").write_text("")
    (tmp_path / "runs" / "r1").mkdir(parents=True)
    (tmp_path / "minilm").mkdir()  # a folder named like the preset does not shadow it
    monkeypatch.chdir(tmp_path)
    config = {"source": "data/mine.obo", "base": "minilm", "init": "runs/r1", "shots": 3}
    assert absolute_paths(config) == {"source": str(tmp_path / "data/mine.obo"), "base": "minilm",
                                      "init": str(tmp_path / "runs/r1"), "shots": 3}
    names = {"source": "icd10", "base": "org/model", "init": None}
    assert absolute_paths(names) == names  # a bundled source, a hub id, nothing
    assert absolute_paths({"source": "missing.obo"}) == {"source": "missing.obo"}  # validation names it
