"""Crash-point injection, in the style of SQLite's crash tests.

Each step of the job's life whose interruption leaves a different state on disk has a
named crash point (trainer.crash_points): the process that reaches it ends on the spot with
``os._exit``. Each test crashes one step (in the "app" that submits and starts a job, in the
job's runner, in the trainer's run export, in a cancel), then reconciles with a fresh Worker
and checks the queue's promises: the job ends in the state the crash left it entitled to,
its trainer started at most once, succeeded if and only if run.json exists, nothing left
running or half-written.
"""

from __future__ import annotations

import pytest
from jobs_support import (  # noqa: F401
    STANDIN, invariant_problems, jobs_home, leftovers, new_worker, run_python, settle, starts, trainers,
)
from tests.support.polling import wait_until

from trainer.crash_points import CRASH_ENV, CRASH_EXIT_CODE
from trainer.jobs.store import CANCELLED, FAILED, INTERRUPTED, RUNNING, SUCCEEDED

QUICK = {"epochs": 1, "epoch_s": 0.01}


def _check_after_crash(job_id: str, status: str, max_starts: int = 1):
    worker = new_worker()  # the process that crashed is gone: a fresh look at the queue
    job = {j.id: j for j in settle(worker)}[job_id]
    assert job.status == status, job.error
    assert job.settled and starts(job) <= max_starts and leftovers(job) == []
    assert invariant_problems(worker, slots=1) == []
    return job


@pytest.mark.parametrize("point", ["queue:claim-before-commit", "queue:claim-after-commit", "queue:after-spawn"])
def test_a_crash_while_starting_a_job_runs_it_exactly_once(jobs_home, point):
    app = run_python(f"from trainer.jobs.queue import Worker\n"
                     f"worker = Worker(module={STANDIN!r}, slots={{'cpu': 1, 'cuda': 0}})\n"
                     f"worker.store.create({QUICK!r}, module={STANDIN!r})\n"
                     f"worker.reconcile()", env={CRASH_ENV: point})
    assert app.returncode == CRASH_EXIT_CODE, app.stderr
    [job] = new_worker().store.list()
    done = _check_after_crash(job.id, SUCCEEDED)
    assert starts(done) == 1
    assert done.log_path and open(done.log_path).read().count(f"[job {job.id}] on cpu") == 1


@pytest.mark.parametrize("point, config, status", [
    ("runner:claim-before-commit", QUICK, INTERRUPTED),  # never claimed: no trainer ever ran
    ("runner:claim-after-commit", QUICK, INTERRUPTED),  # claimed, died before starting the trainer
    ("runner:after-trainer-start", {**QUICK, "wait_file": "/nonexistent/gate"}, INTERRUPTED),  # an orphan
    ("runner:before-record", QUICK, SUCCEEDED),  # the trainer published its run, nobody recorded it
    ("runner:record-before-commit", QUICK, SUCCEEDED),  # the record rolled back
    ("runner:record-after-commit", QUICK, SUCCEEDED),  # recorded; only the next job's start is left
])
def test_a_crash_of_the_runner_is_finished_by_the_next_reconcile(jobs_home, monkeypatch, point, config, status):
    monkeypatch.setenv(CRASH_ENV, point)  # inherited by the runner the submit starts
    job = new_worker().submit(config, validate=False)
    monkeypatch.delenv(CRASH_ENV)
    done = _check_after_crash(job.id, status)
    if point != "runner:record-after-commit":  # there the runner had recorded the trainer's own code
        assert done.exit_code == CRASH_EXIT_CODE  # the crash happened where it was aimed
    if point == "runner:after-trainer-start":
        assert "its trainer was still running and has been stopped" in done.error
    if point.startswith("runner:claim"):
        assert starts(done) == 0


@pytest.mark.parametrize("point, status", [
    ("export:before-rename", FAILED),  # complete files in a temp dir: removed, no run
    ("export:after-rename", SUCCEEDED),  # the run is in place: it counts, whatever came after
])
def test_a_crash_inside_the_run_export(jobs_home, monkeypatch, point, status):
    monkeypatch.setenv(CRASH_ENV, point)  # reaches the trainer through the runner
    job = new_worker().submit(QUICK, validate=False)
    monkeypatch.delenv(CRASH_ENV)
    done = _check_after_crash(job.id, status)
    assert done.exit_code == CRASH_EXIT_CODE
    assert done.run_complete == (status == SUCCEEDED)


def test_a_cancel_that_crashed_before_signalling_still_stops_the_trainer(jobs_home):
    worker = new_worker()
    job = worker.submit({**QUICK, "wait_file": str(jobs_home / "never")}, validate=False)
    wait_until(lambda: worker.reconcile() and worker.store.get(job.id).status == RUNNING and trainers(jobs_home),
               what="the trainer")
    app = run_python(f"from trainer.jobs.queue import Worker\nWorker().cancel({job.id!r})",
                     env={CRASH_ENV: "cancel:after-commit"})
    assert app.returncode == CRASH_EXIT_CODE, app.stderr
    assert worker.store.get(job.id).status == CANCELLED and trainers(jobs_home)  # recorded, not yet signalled
    # The runner reads the cancel from the table and stops its trainer itself.
    done = _check_after_crash(job.id, CANCELLED)
    assert done.exit_code == 130 and not done.run_complete
