"""Helpers of the job queue's reliability tests: the stand-in trainer, the processes a test
started, the queue's promises (invariants) and a teardown that leaves no process behind.

Every process of a job carries ``BIOVIZ_HOME`` (the test's own) and ``BIOVIZ_JOB_ID`` in its
environment, so a test finds exactly its own runners and trainers in ``/proc``.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from trainer.jobs.executor import JOB_ID_ENV, LocalProcessExecutor, group_alive
from trainer.jobs.progress import read_progress
from trainer.jobs.queue import Worker
from trainer.jobs.store import FINISHED, QUEUED, RUNNING, STARTING, SUCCEEDED, Job

from tests.support.polling import wait_until

STANDIN = "tests.trainer.standin_trainer"
ROOT = Path(__file__).resolve().parents[2]


def _environ(pid: int) -> dict[str, str]:
    try:
        raw = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return {}
    pairs = (item.split(b"=", 1) for item in raw.split(b"\0") if b"=" in item)
    return {k.decode(errors="replace"): v.decode(errors="replace") for k, v in pairs}


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2:].split()[0] not in ("Z", "X")


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def home_processes(home: Path) -> dict[int, dict]:
    """Live processes started for ``home`` (not this one): pid -> {"job", "cmdline"}."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        pid = int(entry.name)
        env = _environ(pid)
        if env.get("BIOVIZ_HOME") == str(home) and _alive(pid):
            found[pid] = {"job": env.get(JOB_ID_ENV), "cmdline": _cmdline(pid)}
    return found


def trainers(home: Path) -> dict[int, str | None]:
    """Live trainer processes of ``home``: pid -> job id."""
    return {pid: info["job"] for pid, info in home_processes(home).items()
            if " train " in info["cmdline"] and "trainer.jobs.runner" not in info["cmdline"]}


def kill_everything(home: Path, timeout: float = 10.0) -> None:
    """SIGKILL every process group started for ``home`` and wait until they are gone (teardown)."""
    deadline = time.monotonic() + timeout
    while (pids := home_processes(home)) and time.monotonic() < deadline:
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                group = os.getpgid(pid)
                if group not in (0, 1, os.getpgrp()):  # a job's own group, never ours or "everyone"
                    os.killpg(group, signal.SIGKILL)
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.05)
    for child in list(LocalProcessExecutor._children.values()):  # reap our own, no zombies left
        with contextlib.suppress(subprocess.TimeoutExpired):
            child.wait(timeout=5)
    LocalProcessExecutor._children.clear()
    LocalProcessExecutor._exit_codes.clear()


@pytest.fixture
def jobs_home(tmp_home, monkeypatch):
    """A fresh BIOVIZ_HOME for the queue; every process started for it is killed afterwards.

    Fails the test if one of them was still alive at the end (a leak), after killing it.
    """
    monkeypatch.setenv("BIOVIZ_JOB_DEVICES", "cpu")  # no GPU probe (torch) in each runner
    monkeypatch.delenv("BIOVIZ_CRASH_AT", raising=False)
    yield tmp_home
    leaked = home_processes(tmp_home)
    kill_everything(tmp_home)
    assert not home_processes(tmp_home), "processes survived SIGKILL"
    assert not leaked, f"processes left running by the test: {leaked}"


def new_worker(slots: int = 1) -> Worker:
    """A Worker over the current BIOVIZ_HOME running the stand-in trainer."""
    return Worker(module=STANDIN, slots={"cpu": slots, "cuda": 0})


def settle(worker: Worker, timeout: float = 30.0) -> list[Job]:
    """Reconcile until nothing is starting, running or unsettled and no job process lives; return the jobs."""
    home = worker.store.path.parent

    def quiet():
        jobs = worker.reconcile()
        busy = [j for j in jobs if j.status in (STARTING, RUNNING) or (j.finished and not j.settled)]
        return jobs if not busy and not home_processes(home) else None

    return wait_until(quiet, timeout, 0.1, "the queue to settle")


def starts(job: Job) -> int:
    """How many times the job's trainer started (its ``start`` progress events)."""
    return sum(e.get("event") == "start" for e in read_progress(job.progress_path))


def leftovers(job: Job) -> list[str]:
    """Anything under runs/ named after the job other than its complete run directory."""
    runs = Path(job.run_dir).parent
    return sorted(p.name for p in runs.iterdir() if job.id in p.name and p.name != job.id) if runs.is_dir() else []


def invariant_problems(worker: Worker, slots: int, running_alive: bool = True) -> list[str]:
    """The queue's promises, checked on the table and the processes as they are now.

    - a running job has a live process group (with ``running_alive``: true after a reconcile,
      while nothing kills a job's processes behind the queue's back);
    - a settled job: succeeded if and only if its run.json exists, no temp leftovers;
      no job in another state has a complete run (a running one may, for the instant
      between the trainer's rename and the runner's record);
    - each job's trainer started at most once;
    - live trainers never outnumber the slots, and none belongs to a job that is not running.
    """
    home = worker.store.path.parent
    live = trainers(home)
    jobs = worker.store.list()
    problems = []
    for job in jobs:
        if job.status == RUNNING and running_alive:
            info = json.loads(job.handle) if job.handle else {}
            if not (info and group_alive(info["pid"], job.id)):
                problems.append(f"{job.id} running without a live process group")
        if job.status in FINISHED and job.settled:
            if (job.status == SUCCEEDED) != job.run_complete:
                problems.append(f"{job.id} {job.status} but run.json {'exists' if job.run_complete else 'missing'}")
            if leftovers(job):
                problems.append(f"{job.id} {job.status} left {leftovers(job)}")
        if job.status in (QUEUED, STARTING) and Path(job.run_dir).exists():
            problems.append(f"{job.id} {job.status} has a run directory")
        if starts(job) > 1:
            problems.append(f"{job.id} started {starts(job)} times")
    if len(live) > slots:
        problems.append(f"{len(live)} trainers alive for {slots} slot(s): {live}")
    by_id = {j.id: j for j in jobs}
    for pid, job_id in live.items():
        job = by_id.get(job_id)
        if job is None or job.status != RUNNING and not (job.finished and not job.settled):
            problems.append(f"trainer {pid} alive for job {job_id} ({job.status if job else 'deleted'})")
    return problems


def run_python(code: str, env: dict | None = None, timeout: float = 60.0, **kwargs) -> subprocess.CompletedProcess:
    """Run ``python -c code`` from the project root with this environment (plus ``env``)."""
    full_env = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=full_env, capture_output=True, text=True,
                          timeout=timeout, **kwargs)
