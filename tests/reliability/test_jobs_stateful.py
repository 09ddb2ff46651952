"""A stateful property test of the job queue (hypothesis's RuleBasedStateMachine).

Random sequences of: submit, cancel, delete, reconcile, a trainer finishing, the runner
killed alone, the trainer killed, and the app killed (its Worker dropped with everything it
knew about its child processes; a new one takes over). Jobs run the stand-in trainer, which
waits at a gate file until the test lets it finish, so nothing ends behind the test's back.

Invariants, after every step (jobs_support.invariant_problems, plus the two below):
- a finished job's status never changes;
- after a reconcile, every running job has a live process group;
- a settled job is succeeded if and only if its run.json exists, and no other state has a run;
- each job's trainer starts at most once;
- live trainers never outnumber the slots.

Every process a sequence started is killed (by process group) when it ends, and the test
fails if one was still alive then.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import signal
import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule, run_state_machine_as_test
from jobs_support import home_processes, invariant_problems, kill_everything, trainers
from tests.support.polling import wait_until

from trainer.jobs.executor import LocalProcessExecutor
from trainer.jobs.progress import read_progress
from trainer.jobs.queue import Worker
from trainer.jobs.store import FINISHED, RUNNING, STARTING, JobError, JobStore

STANDIN = "tests.trainer.standin_trainer"
SLOTS = 1


class JobQueueMachine(RuleBasedStateMachine):
    """The queue of one fresh BIOVIZ_HOME, driven at random."""

    root: Path  # set by the test: where each sequence's home goes
    counter = itertools.count()

    def __init__(self):
        super().__init__()
        self.home = self.root / f"home-{next(self.counter)}"
        self.home.mkdir()
        self.worker = self._new_worker()
        self.gates: dict[str, Path] = {}  # job id -> the file that lets its trainer finish
        self.finished: dict[str, str] = {}  # job id -> the finished status first seen
        self.forgotten: list[subprocess.Popen] = []  # children of "killed" apps, reaped at the end

    def _new_worker(self) -> Worker:
        return Worker(store=JobStore(self.home / "jobs.sqlite"), module=STANDIN, slots={"cpu": SLOTS, "cuda": 0})

    # -- helpers -----------------------------------------------------------------------
    def _jobs(self, *statuses):
        return [j for j in self.worker.store.list() if not statuses or j.status in statuses]

    def _with_trainer(self):
        live = set(trainers(self.home).values())
        return [j for j in self._jobs(RUNNING) if j.id in live]

    def _steady(self):
        """Wait until no job is starting and every running job's trainer has started (or ended)."""

        def steady():
            jobs = self.worker.reconcile()
            return not any(j.status == STARTING or (j.status == RUNNING and not read_progress(j.progress_path))
                           for j in jobs)

        wait_until(steady, timeout=30, what="the queue to start its jobs")

    # -- rules -------------------------------------------------------------------------
    @rule()
    def submit(self):
        gate = self.home / f"gate-{len(self.gates)}"
        job = self.worker.submit({"epochs": 1, "epoch_s": 0.01, "wait_file": str(gate)}, validate=False)
        self.gates[job.id] = gate
        self._steady()

    @precondition(lambda self: self._jobs())  # with nothing queued, looking and crashing show nothing
    @rule()
    def reconcile(self):
        self.worker.reconcile()
        for job in self._jobs(RUNNING):  # right after a look, a running job has live processes
            assert self.worker.executor.poll(job.handle).group_alive, f"{job.id} running without processes"

    @precondition(lambda self: self._jobs(RUNNING))
    @rule(data=st.data())
    def trainer_finishes(self, data):
        job = data.draw(st.sampled_from(self._jobs(RUNNING)), label="job")
        self.gates[job.id].touch()
        wait_until(lambda: self.worker.reconcile() and self.worker.store.get(job.id).settled,
                   what=f"job {job.id} to end")
        self._steady()

    @precondition(lambda self: [j for j in self._jobs() if not j.finished])
    @rule(data=st.data())
    def cancel(self, data):
        job = data.draw(st.sampled_from([j for j in self._jobs() if not j.finished]), label="job")
        try:
            assert self.worker.cancel(job.id, grace_s=5).status == "cancelled"
        except JobError:  # its killed trainer was recorded meanwhile: the cancel came too late
            assert self.worker.store.get(job.id).finished
        self._steady()

    @precondition(lambda self: self._jobs())
    @rule(data=st.data(), with_run=st.booleans())
    def delete(self, data, with_run):
        job = data.draw(st.sampled_from(self._jobs()), label="job")
        self.worker.delete(job.id, remove_run=with_run)
        self.finished.pop(job.id, None)
        with pytest.raises(JobError):
            self.worker.store.get(job.id)
        self._steady()

    @precondition(lambda self: self._with_trainer())
    @rule(data=st.data())
    def kill_runner_only(self, data):
        job = data.draw(st.sampled_from(self._with_trainer()), label="job")
        # Its trainer lives on, an orphan, until a reconcile stops it.
        runner = json.loads(job.handle)["pid"]
        os.kill(runner, signal.SIGKILL)
        wait_until(lambda: runner not in home_processes(self.home), what="the runner to die")

    @precondition(lambda self: self._with_trainer())
    @rule(data=st.data())
    def kill_trainer(self, data):
        job = data.draw(st.sampled_from(self._with_trainer()), label="job")
        pid = next(pid for pid, owner in trainers(self.home).items() if owner == job.id)
        runner = json.loads(job.handle)["pid"]
        os.kill(pid, signal.SIGKILL)  # out of memory, say: the runner (if alive) records it
        # Let a live runner record the outcome before the next rule: the rules' preconditions
        # must see a settled queue, not race with it (hypothesis needs the same choices to
        # lead to the same rules; under load the race made it raise FlakyStrategyDefinition).
        wait_until(lambda: pid not in trainers(self.home) and (
            runner not in home_processes(self.home) or self.worker.store.get(job.id).status != RUNNING),
            what="the runner to record its trainer's death")

    @precondition(lambda self: self._jobs())
    @rule()
    def kill_app(self):
        # The app process dies: its Worker and everything it knew about its children (their
        # Popen objects, their exit codes) are gone; a new app reconciles from the table alone.
        self.forgotten.extend(LocalProcessExecutor._children.values())
        LocalProcessExecutor._children.clear()
        LocalProcessExecutor._exit_codes.clear()
        self.worker = self._new_worker()
        self._steady()

    # -- invariants --------------------------------------------------------------------
    @invariant()
    def promises_hold(self):
        # "Running implies live processes" holds right after a look (the reconcile rule): a
        # kill between two looks makes a running job's processes vanish, which is the point.
        problems = invariant_problems(self.worker, SLOTS, running_alive=False)
        assert not problems, problems

    @invariant()
    def finished_states_never_change(self):
        for job in self._jobs(*FINISHED):
            assert self.finished.setdefault(job.id, job.status) == job.status, (job.id, self.finished[job.id])

    def teardown(self):
        try:
            for job in [j for j in self._jobs() if not j.finished]:
                with contextlib.suppress(JobError):
                    self.worker.cancel(job.id, grace_s=1)
            # Once every job has ended, every process must end on its own (runners finish tidying up).
            wait_until(lambda: self.worker.reconcile() is not None and not home_processes(self.home),
                       timeout=15, what="every job process to end")
        finally:
            kill_everything(self.home)
            for child in self.forgotten:
                child.wait(timeout=10)
        assert not home_processes(self.home)


@pytest.mark.slow  # over 5 s in a full run (CI lists the times)
@pytest.mark.filterwarnings("ignore::hypothesis.errors.NonInteractiveExampleWarning")
def test_job_queue_state_machine(tmp_path, monkeypatch):
    monkeypatch.setenv("BIOVIZ_JOB_DEVICES", "cpu")  # no GPU probe (torch) in each runner
    monkeypatch.setenv("BIOVIZ_HOME", str(tmp_path))  # restored afterwards; each sequence sets its own
    monkeypatch.delenv("BIOVIZ_CRASH_AT", raising=False)
    JobQueueMachine.root = tmp_path
    run_state_machine_as_test(JobQueueMachine, settings=settings(
        max_examples=15, stateful_step_count=12, deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much]))
