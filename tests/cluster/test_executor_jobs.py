"""Training jobs through the Ray executor on a real local Ray head (tests/cluster/conftest.py)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from cluster_support import job_processes_end, wait_for

from bioviz.models.runs import is_run_dir
from trainer.jobs.progress import read_progress
from trainer.jobs.queue import Worker
from trainer.jobs.store import CANCELLED, INTERRUPTED, RUNNING, SUCCEEDED

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.timeout(600)


def tiny_config(data_dir, **overrides) -> dict:
    """A real training config that trains in seconds: the mini ontology, minilm, a small residual head."""
    return {"source": str(data_dir / "mini.obo"), "depth": 1, "shots": 1, "encoder": "residual",
            "base": "minilm", "epochs": 2, "hidden": 32, **overrides}


def leftovers(job) -> list[str]:
    runs = Path(job.run_dir).parent
    return sorted(p.name for p in runs.iterdir() if job.id in p.name) if runs.is_dir() else []


def ray_info(job) -> dict:
    return json.loads(job.handle or "{}").get("ray") or {}


@pytest.fixture
def ray_worker(ray_head, tmp_home, monkeypatch):
    """A queue whose jobs run on the session's Ray head (BIOVIZ_EXECUTOR=ray)."""
    monkeypatch.setenv("BIOVIZ_EXECUTOR", "ray")
    worker = Worker()
    assert worker.executor.name == "ray"
    return worker


def test_a_job_on_ray_succeeds_with_its_run_and_curves_here(ray_worker, data_dir, tmp_home, ray_head):
    # Submitted by a command that exits at once (an app that goes away mid-job); followed from here.
    submitted = subprocess.run([sys.executable, "-m", "trainer", "jobs", "submit", "--source", str(data_dir / "mini.obo"),
                                "--depth", "1", "--shots", "1", "--encoder", "residual", "--base", "minilm",
                                "--epochs", "2", "--hidden", "32", "--device", "cpu"],
                               capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert submitted.returncode == 0, submitted.stderr
    job = ray_worker.store.get(submitted.stdout.strip())
    assert job.executor == "ray"
    done = wait_for(ray_worker, job.id, lambda j: j.finished and j.settled)
    assert done.status == SUCCEEDED, f"{done.error}\n{Path(done.log_path).read_text()[-3000:]}"
    # The run came back through Ray and was published here, whole.
    assert Path(done.run_dir).parent == tmp_home / "runs" and is_run_dir(done.run_dir)
    assert leftovers(done) == [job.id]
    # Curves: the trainer's epoch events reached the job store while it ran on the worker.
    epochs = [e for e in read_progress(done.progress_path) if e.get("event") == "epoch"]
    assert [e["epoch"] for e in epochs] == [1, 2] and all("losses" in e for e in epochs)
    assert done.progress["epoch"] == 2 and done.progress["max_epochs"] == 2
    assert done.progress["summary"]["run_dir"] == done.run_dir  # this machine's run, not the worker's scratch
    info = ray_info(done)
    assert info["address"] == ray_head and info["task"] and info["pid"] > 1
    assert "on the Ray cluster at" in Path(done.log_path).read_text()


def test_cancel_on_ray_stops_the_remote_trainer_and_leaves_no_run(ray_worker, data_dir):
    job = ray_worker.submit(tiny_config(data_dir, epochs=1_000_000, patience=1_000_000), device="cpu")
    job = wait_for(ray_worker, job.id, lambda j: j.progress.get("epoch", 0) >= 1 or j.finished)
    assert job.status == RUNNING, job.error
    cancelled = ray_worker.cancel(job.id)
    assert cancelled.status == CANCELLED and cancelled.error == "cancelled by user" and cancelled.settled
    assert leftovers(cancelled) == []
    assert job_processes_end(job.id) == []  # the trainer on the (local) worker node is gone too


def test_killing_the_ray_worker_interrupts_the_job_with_the_reason(ray_worker, data_dir):
    job = ray_worker.submit(tiny_config(data_dir, epochs=1_000_000, patience=1_000_000), device="cpu")
    job = wait_for(ray_worker, job.id, lambda j: (j.progress.get("epoch", 0) >= 1 and ray_info(j)) or j.finished)
    assert job.status == RUNNING, job.error
    os.kill(ray_info(job)["pid"], signal.SIGKILL)  # the Ray worker process that runs the job
    ended = wait_for(ray_worker, job.id, lambda j: j.finished and j.settled)
    assert ended.status == INTERRUPTED
    assert ended.error.startswith("the Ray worker running the job died (WorkerCrashedError")
    assert leftovers(ended) == []
    assert job_processes_end(job.id) == []  # its trainer died with it (it trains for a million epochs)
