"""Finding 4: a job is claimed (committed ``starting`` with a token) before its runner starts.

The runner turns the claim into ``running`` only with the job's current token, so a runner
left over from a crashed starter never runs a job twice, and a claim whose runner never came
up is found by the next reconcile.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from jobs_support import ROOT, invariant_problems, jobs_home, new_worker, settle, starts  # noqa: F401

from trainer.jobs.executor import process_handle
from trainer.jobs.store import INTERRUPTED, QUEUED, RUNNING, STARTING, SUCCEEDED


def _claimed(worker, claimed_by: str, token: str = "t0ken", handle: str | None = None):
    """A job claimed as a crashed or live starter would have left it (nothing started yet)."""
    job = worker.store.create({"epochs": 1, "epoch_s": 0.01}, module="tests.trainer.standin_trainer")
    worker.store.update(job.id, status=STARTING, device="cpu", token=token, claimed_by=claimed_by,
                        claimed_at=time.time(), handle=handle)
    return worker.store.get(job.id)


def _dead_process_handle() -> str:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return process_handle(proc.pid)


def _runner(job_id: str, token: str, home: Path) -> subprocess.CompletedProcess:
    env = {"BIOVIZ_HOME": str(home), "PYTHONPATH": str(ROOT), "BIOVIZ_JOB_DEVICES": "cpu", "PATH": "/usr/bin:/bin"}
    return subprocess.run([sys.executable, "-m", "trainer.jobs.runner", "run", job_id, "--token", token],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)


def test_a_runner_with_a_stale_token_exits_without_doing_anything(jobs_home):
    worker = new_worker()
    job = _claimed(worker, process_handle(), token="current")
    stale = _runner(job.id, "stale", jobs_home)
    assert stale.returncode == 0, stale.stderr
    after = worker.store.get(job.id)
    assert after.status == STARTING and after.token == "current" and after.handle is None  # untouched
    assert starts(after) == 0 and not Path(after.log_path).exists()  # no trainer, not even a log line

    assert _runner(job.id, "current", jobs_home).returncode == 0  # the runner holding the claim runs it
    done = worker.store.get(job.id)
    assert done.status == SUCCEEDED and done.settled and starts(done) == 1


def test_a_claim_whose_starter_crashed_before_recording_a_runner_is_started_once(jobs_home):
    worker = new_worker()
    job = _claimed(worker, _dead_process_handle())
    jobs = {j.id: j for j in settle(worker)}
    assert jobs[job.id].status == SUCCEEDED and starts(jobs[job.id]) == 1
    assert invariant_problems(worker, slots=1) == []


def test_a_claim_whose_runner_died_before_claiming_is_interrupted(jobs_home):
    worker = new_worker()
    job = _claimed(worker, _dead_process_handle(), handle=_dead_process_handle())
    worker.reconcile()
    ended = worker.store.get(job.id)
    assert ended.status == INTERRUPTED and ended.settled
    assert ended.error.startswith("the job's runner ended before it started the trainer")
    assert starts(ended) == 0 and invariant_problems(worker, slots=1) == []


def test_a_claim_in_progress_keeps_its_slot(jobs_home):
    """Claimed by a live process that is about to start the runner: nobody else starts it, or another job."""
    worker = new_worker()
    job = _claimed(worker, process_handle())  # this process: alive
    queued = worker.store.create({"epochs": 1}, module="tests.trainer.standin_trainer")
    for _ in range(3):
        worker.reconcile()
    assert worker.store.get(job.id).status == STARTING and worker.store.get(job.id).token == "t0ken"
    assert worker.store.get(queued.id).status == QUEUED  # the only slot is the claim's
    assert not Path(job.log_path).exists()


def test_the_runner_records_itself_when_it_claims(jobs_home):
    """A starter that crashed after starting the runner never recorded its handle: the runner does."""
    worker = new_worker()
    job = _claimed(worker, process_handle(), token="mine", handle=None)
    proc = subprocess.Popen([sys.executable, "-m", "trainer.jobs.runner", "run", job.id, "--token", "mine"],
                            cwd=ROOT, env={"BIOVIZ_HOME": str(jobs_home), "PYTHONPATH": str(ROOT),
                                           "BIOVIZ_JOB_DEVICES": "cpu", "BIOVIZ_JOB_ID": job.id},
                            start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while worker.store.get(job.id).status == STARTING and time.monotonic() < deadline:
            time.sleep(0.02)
        running = worker.store.get(job.id)
        assert running.status in (RUNNING, SUCCEEDED)
        assert json.loads(running.handle)["pid"] == proc.pid
    finally:
        proc.wait(timeout=30)
    assert settle(worker)[0].status == SUCCEEDED
