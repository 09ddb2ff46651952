"""The same training-job scenarios through both executors: local processes and a real Ray head.

``executor_worker`` runs each test once per executor (``local`` needs no Ray; ``ray`` uses the
session's head from tests/cluster/conftest.py). What differs between them stays in the small
helpers below: which process dies in the kill test, the reason the job then records, and
what the handle and the log say about where the job ran.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from cluster_support import job_processes_end, processes_of_job

from bioviz.models.runs import is_run_dir
from trainer.jobs.progress import read_progress
from trainer.jobs.queue import Worker
from trainer.jobs.store import CANCELLED, INTERRUPTED, RUNNING, SUCCEEDED

from tests.support.polling import wait_for

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.timeout(600), pytest.mark.slow]  # a real local Ray head: tens of seconds each

# Why a job whose training process was SIGKILLed ended, as each executor words it.
KILLED_REASON = {"local": "the trainer was killed by SIGKILL",
                 "ray": "the Ray worker running the job died (WorkerCrashedError"}


@dataclass
class ExecutorUnderTest:
    """A queue whose jobs go to ``name``'s executor (``address``: the Ray head's, else None)."""

    name: str
    worker: Worker
    address: str | None


@pytest.fixture(params=["local", "ray"])
def executor_worker(request, tmp_home, monkeypatch) -> ExecutorUnderTest:
    """A queue on the local executor, or on the session's Ray head (``BIOVIZ_EXECUTOR=ray``)."""
    address = request.getfixturevalue("ray_head") if request.param == "ray" else None
    monkeypatch.setenv("BIOVIZ_EXECUTOR", request.param)  # also read by the CLI started below
    worker = Worker()
    assert worker.executor.name == request.param
    return ExecutorUnderTest(request.param, worker, address)


def tiny_config(data_dir, **overrides) -> dict:
    """A real training config that trains in seconds: the mini ontology, minilm, a small residual head."""
    return {"source": str(data_dir / "mini.obo"), "depth": 1, "shots": 1, "encoder": "residual",
            "base": "minilm", "epochs": 2, "hidden": 32, **overrides}


def endless(data_dir) -> dict:
    """A config that trains until stopped (a million epochs, no early stop)."""
    return tiny_config(data_dir, epochs=10_000, patience=10_000)


def leftovers(job) -> list[str]:
    runs = Path(job.run_dir).parent
    return sorted(p.name for p in runs.iterdir() if job.id in p.name) if runs.is_dir() else []


def handle_of(job) -> dict:
    return json.loads(job.handle or "{}")


def ray_info(job) -> dict:
    return handle_of(job).get("ray") or {}


def followable(executor: ExecutorUnderTest, job) -> bool:
    """The job's handle names the process whose death the kill test causes."""
    return bool(ray_info(job)) if executor.name == "ray" else bool(handle_of(job).get("pid"))


def training_process(executor: ExecutorUnderTest, job) -> int:
    """The pid of the process doing the training: the Ray worker running the job's task, or the
    local runner's trainer child (the runner survives it and records how the job ended)."""
    if executor.name == "ray":
        return ray_info(job)["pid"]
    runner = handle_of(job)["pid"]
    children = [pid for pid in processes_of_job(job.id) if parent_of(pid) == runner]
    assert len(children) == 1, f"runner {runner} has trainer children {children}"
    return children[0]


def parent_of(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat[stat.rindex(")") + 2:].split()[1])


def check_where_it_ran(executor: ExecutorUnderTest, job) -> None:
    """The handle and the log say where the job ran."""
    log = Path(job.log_path).read_text()
    if executor.name == "ray":
        info = ray_info(job)
        assert info["address"] == executor.address and info["task"] and info["pid"] > 1
        assert f"on the Ray cluster at {executor.address}" in log
    else:
        assert "ray" not in handle_of(job) and handle_of(job)["pid"] > 1
        assert f"[job {job.id}] on cpu: " in log


def test_a_job_succeeds_with_its_run_and_curves_here(executor_worker, data_dir, tmp_home):
    # Submitted by a command that exits at once (an app that goes away mid-job); followed from here.
    submitted = subprocess.run([sys.executable, "-m", "trainer", "jobs", "submit", "--source", str(data_dir / "mini.obo"),
                                "--depth", "1", "--shots", "1", "--encoder", "residual", "--base", "minilm",
                                "--epochs", "2", "--hidden", "32", "--device", "cpu"],
                               capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert submitted.returncode == 0, submitted.stderr
    worker = executor_worker.worker
    job = worker.store.get(submitted.stdout.strip())
    assert job.executor == executor_worker.name
    done = wait_for(worker, job.id, lambda j: j.finished and j.settled)
    assert done.status == SUCCEEDED, f"{done.error}\n{Path(done.log_path).read_text()[-3000:]}"
    # The run was published here, whole (for Ray: shipped back from the worker).
    assert Path(done.run_dir).parent == tmp_home / "runs" and is_run_dir(done.run_dir)
    assert leftovers(done) == [job.id]
    # Curves: the trainer's epoch events reached the job store while it ran.
    epochs = [e for e in read_progress(done.progress_path) if e.get("event") == "epoch"]
    assert [e["epoch"] for e in epochs] == [1, 2] and all("losses" in e for e in epochs)
    assert done.progress["epoch"] == 2 and done.progress["max_epochs"] == 2
    assert done.progress["summary"]["run_dir"] == done.run_dir  # this machine's run, not a worker's scratch
    check_where_it_ran(executor_worker, done)


def test_cancel_mid_training_stops_the_trainer_and_leaves_no_run(executor_worker, data_dir):
    worker = executor_worker.worker
    job = worker.submit(endless(data_dir), device="cpu")
    job = wait_for(worker, job.id, lambda j: j.progress.get("epoch", 0) >= 1 or j.finished)
    assert job.status == RUNNING, job.error
    cancelled = worker.cancel(job.id)
    assert cancelled.status == CANCELLED and cancelled.error == "cancelled by user" and cancelled.settled
    assert leftovers(cancelled) == []  # no run directory, no .partial- temp dir
    assert job_processes_end(job.id) == []  # the trainer (on the local Ray node too) is gone


def test_killing_the_training_process_interrupts_the_job_with_the_reason(executor_worker, data_dir):
    worker = executor_worker.worker
    job = worker.submit(endless(data_dir), device="cpu")
    job = wait_for(worker, job.id, lambda j: (j.progress.get("epoch", 0) >= 1 and followable(executor_worker, j))
                   or j.finished)
    assert job.status == RUNNING, job.error
    os.kill(training_process(executor_worker, job), signal.SIGKILL)  # no goodbye
    ended = wait_for(worker, job.id, lambda j: j.finished and j.settled)
    assert ended.status == INTERRUPTED
    assert ended.error.startswith(KILLED_REASON[executor_worker.name]), ended.error
    assert leftovers(ended) == []
    assert job_processes_end(job.id) == []  # nothing of the job trains on (it had a million epochs to go)
