"""Finding 3: a job's runner killed while its trainer runs on.

The runner records how a job ends; when it is killed alone, its trainer is an orphan that
nobody would record. Reconcile must look at the whole process group: stop the orphan before
the slot goes to the next job (never two trainers on one slot), say what happened, and never
let a run appear for a job it has recorded as interrupted.
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

from jobs_support import invariant_problems, jobs_home, new_worker, settle, trainers  # noqa: F401
from tests.support.polling import wait_until

from trainer.jobs.store import INTERRUPTED, QUEUED, RUNNING, SUCCEEDED


def _running_with_trainer(worker, job_id):
    """Wait until the job runs and its trainer is alive; return (job, runner pid, trainer pid).

    The trainer is the other live process of the runner's process group.
    """
    home = worker.store.path.parent

    def ready():
        worker.reconcile()
        job = worker.store.get(job_id)
        if job.status != RUNNING or job.progress.get("epoch") != 1:
            return None
        runner = json.loads(job.handle)["pid"]
        group = [pid for pid in trainers(home) if os.getpgid(pid) == runner and pid != runner]
        return (job, runner, group[0]) if group else None

    return wait_until(ready, what="the job's trainer")


def test_a_killed_runner_has_its_trainer_stopped_before_the_slot_is_reused(jobs_home):
    worker = new_worker(slots=1)
    gate = jobs_home / "gate"
    first = worker.submit({"epochs": 1, "epoch_s": 0.01, "wait_file": str(gate)}, validate=False)
    second = worker.submit({"epochs": 1, "epoch_s": 0.01, "wait_file": str(gate)}, validate=False)
    first, runner, trainer = _running_with_trainer(worker, first.id)
    assert worker.store.get(second.id).status == QUEUED

    os.kill(runner, signal.SIGKILL)  # the runner only: its trainer goes on
    wait_until(lambda: worker.executor.poll(first.handle).alive is False, what="the runner's death")
    worker.reconcile()

    dead = worker.store.get(first.id)
    assert dead.status == INTERRUPTED
    assert dead.error.startswith("the job's runner was killed by SIGKILL")  # not "the trainer was killed"
    assert "its trainer was still running and has been stopped" in dead.error
    assert trainer not in trainers(jobs_home)  # stopped before the slot was given away
    assert len(trainers(jobs_home)) <= 1 and invariant_problems(worker, slots=1) == []

    gate.touch()  # what the orphan was waiting for: had it lived, it would publish a run now
    jobs = {j.id: j for j in settle(worker)}
    assert jobs[second.id].status == SUCCEEDED
    assert jobs[first.id].status == INTERRUPTED and not Path(first.run_dir).exists()
    assert invariant_problems(worker, slots=1) == []


def test_an_orphan_that_published_its_run_makes_the_job_succeed(jobs_home):
    """The orphan finishes before anyone looks: the job's status follows the complete run."""
    worker = new_worker(slots=1)
    gate = jobs_home / "gate"
    job = worker.submit({"epochs": 1, "epoch_s": 0.01, "wait_file": str(gate)}, validate=False)
    job, runner, trainer = _running_with_trainer(worker, job.id)
    os.kill(runner, signal.SIGKILL)
    gate.touch()
    wait_until(lambda: trainer not in trainers(jobs_home), what="the orphan to finish")
    assert (Path(job.run_dir) / "run.json").is_file()

    done = {j.id: j for j in settle(worker)}[job.id]
    assert done.status == SUCCEEDED and done.error is None  # succeeded iff run.json exists
    assert invariant_problems(worker, slots=1) == []
