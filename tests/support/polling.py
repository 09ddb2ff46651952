"""Waiting in tests: poll a condition, or reconcile a job queue until a job reaches a state.

Shared by the trainer, page, reliability and cluster tests (imported as ``tests.support.polling``:
pytest's ``pythonpath = ["."]`` puts the repository root on the path). Timeouts only guard
against a hang; a test never depends on how long the wait takes.
"""

from __future__ import annotations

import time
from pathlib import Path

from trainer.jobs.queue import Worker
from trainer.jobs.store import Job

# Long enough for the slowest waiter (a Ray cluster's first job); a passing test returns as soon as its condition holds
JOB_TIMEOUT_S = 400.0


def wait_until(predicate, timeout: float = 30.0, step: float = 0.05, what: str = "condition"):
    """Poll ``predicate()`` every ``step`` seconds until it returns something truthy; return that value.

    Raises
    ------
    AssertionError
        Naming ``what`` when ``timeout`` seconds pass first.
    """
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g}s waiting for {what}")
        time.sleep(step)


def wait_for(worker: Worker, job_id: str, predicate, timeout: float = JOB_TIMEOUT_S, step: float = 0.1) -> Job:
    """Reconcile ``worker`` until ``predicate(job)`` holds for the job ``job_id``; return the job.

    Raises
    ------
    AssertionError
        When ``timeout`` seconds pass first: the job's status, error, progress and the end of its log.
    """
    deadline = time.monotonic() + timeout
    while True:
        worker.reconcile()
        job = worker.store.get(job_id)
        if predicate(job):
            return job
        if time.monotonic() > deadline:
            log = Path(job.log_path) if job.log_path else None
            tail = log.read_text(errors="replace")[-3000:] if log and log.exists() else ""
            raise AssertionError(f"job {job_id} stuck in {job.status}: {job.error} / {job.progress}\n{tail}")
        time.sleep(step)
