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
from bioviz.runs import is_run_dir
from trainer.jobs import (
    CANCELLED, FAILED, INTERRUPTED, QUEUED, RUNNING, SUCCEEDED, JobError, JobStore, LocalProcessExecutor,
    read_progress, summarise_progress,
)
from trainer.worker import Worker, config_to_argv, parse_slots

STANDIN = "tests.trainer.standin_trainer"


def wait_for(worker: Worker, job_id: str, predicate, timeout: float = 60.0):
    """Reconcile until ``predicate(job)`` holds (the timeout only guards against a hang)."""
    deadline = time.monotonic() + timeout
    while True:
        worker.reconcile()
        job = worker.store.get(job_id)
        if predicate(job):
            return job
        if time.monotonic() > deadline:
            raise AssertionError(f"job {job_id} stuck in {job.status}: {job.error} / {job.progress}")
        time.sleep(0.1)


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


def test_config_to_argv_and_slots():
    argv = config_to_argv({"shots": 15, "root": None, "freeze": False, "synonyms": True, "source": "icd10"})
    assert argv == ["--shots", "15", "--source", "icd10", "--synonyms"]
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


def test_tiny_job_goes_from_submit_to_succeeded(worker):
    job = worker.submit({"epochs": 3}, validate=False)
    assert job.status in (QUEUED, RUNNING)
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
    deadline = time.monotonic() + 60
    while worker.store.get(second.id).status == QUEUED and time.monotonic() < deadline:
        time.sleep(0.1)
    assert worker.store.get(second.id).status in (RUNNING, SUCCEEDED)
    assert wait_for(worker, second.id, finished).status == SUCCEEDED


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
