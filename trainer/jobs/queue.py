"""The job queue: submit, reconcile, cancel, delete, and the device slots.

No daemon is needed for correctness. Every look at the job list (``jobs list``, a page
refresh) calls :meth:`Worker.reconcile`, which

1. looks after every job whose processes may be alive (starting, running, or finished
   but not yet settled): a running job whose runner is gone is recorded (``succeeded``
   when its run directory is complete, else ``interrupted`` or ``failed`` with the reason);
   a trainer that outlived its runner is stopped first, so a slot never holds two trainers
   and no run appears later for a job already recorded as ended; a claim whose starter
   crashed is taken over;
2. claims queued jobs, oldest first, while their device has a free slot, and commits;
3. only then starts each claimed job's runner (``python -m trainer.jobs.runner run JOB_ID
   --token TOKEN``, :mod:`trainer.jobs.runner`), which turns the claim into ``running``
   only if its token is still the job's. A crash anywhere in between leaves a state the
   next reconcile finishes (docs/jobs.md, "What survives which crash").

Each runner starts the trainer, records how it ended and calls :meth:`Worker.reconcile`
itself, so the next queued job starts even when nobody is looking.

Slots: one job per GPU and one on the CPU by default; ``BIOVIZ_JOB_SLOTS="cpu=2,cuda=1"``
or ``Worker(slots=...)`` changes that, and ``BIOVIZ_JOB_DEVICES="cpu"`` hides the GPUs.
A job holds its slot until its processes are gone, a cancelled one included.

Imports are kept light on purpose: every job's runner imports this module, and the
trainer's configuration (scipy) or a GPU probe (torch) would add seconds to each start.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import secrets
import shutil
import signal
import time
from collections import Counter
from dataclasses import replace
from pathlib import Path

from bioviz.models.blob_store import sweep_blobs
from bioviz.ray_cluster import executor_name
from bioviz.settings import env_number
from trainer.cli_common import EXIT_WRITE_REFUSED
from trainer.crash_points import crash_point
from trainer.jobs.executor import (
    CANCEL_EXIT_CODE, CANCEL_GRACE_S, JOB_ID_ENV, Executor, LocalProcessExecutor, ProcessState, gpu_count,
    process_alive, process_handle, python_command,
)
from trainer.jobs.kinds import kind_of
from trainer.jobs.progress import read_progress, summarise_progress, tail
from trainer.jobs.ray_executor import RayExecutor
from trainer.jobs.store import (
    CANCELLED, FAILED, INTERRUPTED, QUEUED, RUNNING, STARTING, SUCCEEDED, Job, JobError, JobStore,
)
from trainer.devices import DEVICES

logger = logging.getLogger(__name__)

PROJECT_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_SLOTS = {"cpu": 1, "cuda": 1}
DEVICE_CHOICES = DEVICES  # what a job may ask for (the Train page offers them)
RUNNER_MODULE = "trainer.jobs.runner"  # each started job's process: python -m RUNNER_MODULE run JOB_ID --token T
# A claim whose starter is alive but has not recorded a runner after this long is taken
# over (the token makes that safe whatever the starter does next).
CLAIM_TIMEOUT_S = 120.0


def executor_from_env(name: str | None = None) -> Executor:
    """The executor ``name`` (default: ``BIOVIZ_EXECUTOR``) names; ray is imported only when chosen.

    Raises
    ------
    BiovizError
        If it names no executor.
    """
    if executor_name(name) == "ray":
        return RayExecutor()
    # The GPU probe is looked up here at each call (tests pretend GPUs through this module's gpu_count).
    return LocalProcessExecutor(gpus=lambda: gpu_count())


def parse_slots(text: str | None) -> dict[str, int]:
    """``"cpu=2,cuda=1"`` -> ``{"cpu": 2, "cuda": 1}`` (jobs at once on the CPU / per GPU)."""
    slots = dict(DEFAULT_SLOTS)
    for part in (text or "").split(","):
        if not part.strip():
            continue
        key, _, value = part.partition("=")
        key = key.strip().lower()
        if key not in DEFAULT_SLOTS or not value.strip().isdigit():
            raise JobError(f"bad job slot setting {part.strip()!r}: expected cpu=N or cuda=N")
        slots[key] = int(value)
    return slots


def job_env(job: Job, home: Path) -> dict[str, str]:
    """Environment of a job's processes: this one's, plus the home, the GPU and unbuffered output."""
    env = dict(os.environ)
    env["BIOVIZ_HOME"] = str(home)
    env["PYTHONUNBUFFERED"] = "1"  # the log shows lines as they are printed
    # Progress bars redraw with carriage returns: noise in a log file (progress.jsonl has it all).
    env.setdefault("TQDM_DISABLE", "1")
    env.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    env.setdefault("HF_HUB_OFFLINE", "1")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(PROJECT_ROOT), env.get("PYTHONPATH", "")) if p)
    env[JOB_ID_ENV] = job.id  # how the executor recognises the job's processes (executor.group_alive)
    if job.device and job.device.startswith("cuda:"):
        env["CUDA_VISIBLE_DEVICES"] = job.device.split(":", 1)[1]
    elif job.device == "cpu":
        env["CUDA_VISIBLE_DEVICES"] = ""
    return env


class AlreadyCancelled(JobError):
    """A cancel of a job that another cancel (or an earlier one) has already cancelled: nothing to do."""


def discard_run(job: Job) -> None:
    """Remove everything the job left under ``runs/``: its run directory, complete or not, and temp dirs.

    Only for a job that did not succeed and whose processes are gone. The run directory is
    first renamed aside in one step, so it never looks complete once its removal has begun
    (a crash halfway through ``rmtree`` could otherwise leave ``run.json`` without weights).
    """
    run_dir = Path(job.run_dir)
    if run_dir.exists():
        with contextlib.suppress(OSError):
            os.replace(run_dir, run_dir.with_name(f".{run_dir.name}.discarded-{secrets.token_hex(4)}"))
    for path in [run_dir, *run_dir.parent.glob(f".{run_dir.name}*"), *run_dir.parent.glob(f"{run_dir.name}.*")]:
        if path.is_dir():
            shutil.rmtree(path, ignore_errors=True)
            logger.info("removed %s", path)
    sweep_blobs()  # the base weights it shared, when no other run links them


def _signal_name(code: int) -> str:
    with contextlib.suppress(ValueError):
        return signal.Signals(-code).name
    return f"signal {-code}"


def _last_log_line(job: Job) -> str:
    lines = [line.strip() for line in tail(job.log_path, 40).splitlines() if line.strip()]
    return lines[-1] if lines else ""


def outcome(job: Job, exit_code: int | None, *, cancel_requested: bool = False, runner: bool = False,
            trainer_stopped: bool = False, unknown: str | None = None) -> tuple[str, str | None]:
    """How a job ended: ``(status, reason)`` from an exit code, the progress events and the run directory.

    A cancel wins (the caller removes a run the trainer published meanwhile); otherwise a
    complete run directory (``run.json``, written last and renamed into place) means
    ``succeeded``, whatever happened after it was published.

    Parameters
    ----------
    job : Job
    exit_code : int or None
        The trainer's exit code, or with ``runner`` the runner's; None when nobody saw the
        process exit.
    cancel_requested : bool
        The user cancelled the job.
    runner : bool
        The job's runner ended without recording the end (seen by a reconcile).
    trainer_stopped : bool
        With ``runner``: its trainer was still running and has just been stopped.
    unknown : str, optional
        Why the job's process could not be looked up (a damaged handle).
    """
    if cancel_requested or exit_code in (CANCEL_EXIT_CODE, -signal.SIGTERM):
        return CANCELLED, "cancelled by user"
    if job.run_complete:
        return SUCCEEDED, None
    errors = [e.get("message") for e in read_progress(job.progress_path) if e.get("event") == "error"]
    if unknown:
        return INTERRUPTED, f"the job's process cannot be followed ({unknown}); it counts as gone"
    if runner:
        if exit_code is None:
            what = "disappeared (killed, or the machine restarted)"
        elif exit_code < 0:
            what = f"was killed by {_signal_name(exit_code)}"
        else:
            what = f"exited with code {exit_code}"
        reason = f"the job's runner {what} before recording how the job ended"
        if trainer_stopped:
            reason += "; its trainer was still running and has been stopped"
        if errors and errors[-1]:
            return FAILED, f"{errors[-1]} ({reason})"
        return INTERRUPTED, reason
    if exit_code is None:
        return INTERRUPTED, ("the job's process disappeared without reporting (killed, out of memory, "
                             "or the machine restarted)")
    if exit_code == 0:
        return FAILED, "the trainer exited without writing a complete run directory"
    if exit_code < 0:
        reason = f"the trainer was killed by {_signal_name(exit_code)}"
        if exit_code == -signal.SIGKILL:
            reason += " (out of memory, or killed from outside)"
        return (INTERRUPTED if exit_code == -signal.SIGKILL else FAILED), reason
    if exit_code == EXIT_WRITE_REFUSED and not errors:  # its error event did not fit on the disk either
        return FAILED, f"the trainer could not write its files: {write_refusal(job)}"
    message = errors[-1] if errors else _last_log_line(job)
    return FAILED, f"exit code {exit_code}" + (f": {message}" if message else "")


QUEUE_ENV = "BIOVIZ_MAX_QUEUED_JOBS"
DEFAULT_MAX_QUEUED = 20  # a day of a lab's small jobs on one slot; 200 submissions in 9 s were all accepted


def check_queue_room(queued: int) -> None:
    """Refuse a new job when ``queued`` jobs already wait (``BIOVIZ_MAX_QUEUED_JOBS``, default 20, per server).

    Raises
    ------
    JobError
        The queue is full (one line: how many wait, the setting that bounds them).
    """
    most = int(env_number(QUEUE_ENV, DEFAULT_MAX_QUEUED))
    if queued >= most:
        raise JobError(f"{queued} jobs are already waiting in the queue (at most {most}, {QUEUE_ENV}): "
                       "cancel one or wait until some have run")


def write_refusal(job: Job) -> str:
    """Why a job's disk refused a write, as far as can be told afterwards: ``no space left on device`` or in general."""
    try:
        free = os.statvfs(Path(job.progress_path).parent).f_bavail
    except OSError:
        free = None
    if free == 0:
        return os.strerror(errno.ENOSPC).lower()
    return "the disk refused a write (full, a quota, a file-size limit or read-only)"


class Worker:
    """The queue over a :class:`JobStore` and an :class:`Executor`.

    Parameters
    ----------
    store : JobStore, optional
        Default: the store in ``BIOVIZ_HOME``.
    executor : Executor, optional
        Default: the one ``BIOVIZ_EXECUTOR`` names (:func:`executor_from_env`):
        :class:`LocalProcessExecutor` unless it says ``ray``.
    slots : dict, optional
        ``{"cpu": n, "cuda": n}``: jobs at once on the CPU and per GPU (default from
        ``BIOVIZ_JOB_SLOTS``, else one each).
    module : str
        The trainer program new jobs run (``python -m <module> train ...``).
    """

    def __init__(self, store: JobStore | None = None, executor: Executor | None = None,
                 slots: dict[str, int] | None = None, module: str = "trainer"):
        self.store = store or JobStore()
        self.executor = executor or executor_from_env()
        self.module = module
        self.slots = dict(slots) if slots else parse_slots(os.environ.get("BIOVIZ_JOB_SLOTS"))

    # -- devices -----------------------------------------------------------------------
    def capacity(self) -> dict[str, int]:
        """``slot -> jobs at once``, e.g. ``{"cpu": 1, "cuda:0": 1}``."""
        return self.executor.capacity(self.slots)

    def _pick_slot(self, requested: str, used: Counter) -> str | None:
        """A free slot for a job asking for ``requested`` (``auto`` prefers a GPU), or None."""
        capacity = self.capacity()
        gpus = [s for s in capacity if s.startswith("cuda")]
        if requested == "cpu" or (requested == "auto" and not gpus):
            candidates = ["cpu"]
        elif requested in ("auto", "cuda"):
            candidates = gpus
        else:
            candidates = [requested] if requested in capacity else []
        free = [s for s in candidates if used[s] < capacity[s]]
        return min(free, key=lambda s: used[s]) if free else None

    # -- the queue ---------------------------------------------------------------------
    def submit(self, config: dict, device: str = "auto", validate: bool = True) -> Job:
        """Queue a training job for ``config`` and start it if a slot is free.

        Parameters
        ----------
        config : dict
            ``train`` options (source, root, depth, shots, encoder, base, init, ...).
        device : str
            ``auto`` (a GPU when present, else the CPU), ``cpu``, ``cuda`` or ``cuda:N``.
        validate : bool
            Check the config with the trainer first (refuses before anything is created);
            the job's ``config.json`` then holds every option, the defaults filled in.

        Raises
        ------
        BiovizError
            If the config is invalid or the device is not available here.
        """
        config = dict(config)
        # The device is the job's, not the run's: it picks a slot, and the runner passes the
        # slot's device to the trainer. Taken out of the config here, and only here.
        device = config.pop("device", None) or device
        if device not in DEVICE_CHOICES and not (device.startswith("cuda:") and device[5:].isdigit()):
            raise JobError(f"unknown device {device!r}: use auto, cpu, cuda or cuda:N")
        capacity = self.capacity()  # first: an executor that cannot run jobs (unreachable cluster) refuses here
        if device.startswith("cuda"):
            gpus = [slot for slot in capacity if slot.startswith("cuda")]
            if device not in capacity and not (device == "cuda" and gpus):
                raise JobError(f"device {device!r} is not available here ({len(gpus)} CUDA devices)")
        # Paths are the submitter's: the runner and its trainer run elsewhere (PROJECT_ROOT).
        kind = kind_of(config)
        config = kind.prepare(config)
        if validate:
            config = kind.validate(config)
        check_queue_room(len(self.store.list((QUEUED,))))
        job = self.store.create(config, requested_device=device, executor=self.executor.name, module=self.module)
        self.reconcile()
        return self.store.get(job.id)

    def reconcile(self) -> list[Job]:
        """Look after jobs whose processes may be alive, claim queued ones where slots are free,
        start their runners; return every job.

        Safe to call from any number of processes at once: the decisions are taken inside
        one ``BEGIN IMMEDIATE`` transaction, and runners are started only after it commits.
        """
        if not self.store.has_work():
            self.executor.reap()
            return self.store.list()
        claimed: list[Job] = []
        with self.store.transaction() as conn:
            used: Counter = Counter()
            for job in self.store.unsettled(conn):
                if job.status == STARTING:
                    holds_slot = self._check_starting(job, conn, claimed)
                elif job.status == RUNNING:
                    holds_slot = self._check_running(job, conn)
                else:
                    holds_slot = self._check_finished(job, conn)
                if holds_slot:
                    used[job.device] += 1
            for job in self.store.list((QUEUED,), conn):
                slot = self._pick_slot(job.requested_device, used)
                if slot is None:
                    continue  # a later job may ask for another device that is free
                claimed.append(self._claim(job, slot, conn))
                used[slot] += 1
            if claimed:
                crash_point("queue:claim-before-commit")
        if claimed:
            crash_point("queue:claim-after-commit")
        for job in claimed:
            self._start(job)
        self.executor.reap()
        return self.store.list()

    def _claim(self, job: Job, slot: str, conn) -> Job:
        """Mark ``job`` starting on ``slot`` with a fresh token (inside the reconcile transaction)."""
        token = secrets.token_hex(8)
        self.store.update(job.id, conn, status=STARTING, device=slot, token=token, handle=None,
                          claimed_by=process_handle(), claimed_at=time.time())
        return replace(job, status=STARTING, device=slot, token=token, handle=None)

    def _start(self, job: Job) -> None:
        """Start the runner of a claimed ``job`` (after the claim is committed) and record its handle."""
        command = python_command("-m", RUNNER_MODULE, "run", job.id, "--token", job.token)
        try:
            handle = self.executor.submit(command, job_env(job, self.store.path.parent), job.log_path)
        except OSError as error:
            self.store.update(job.id, only_if=(STARTING,), where_token=job.token, status=FAILED, settled=1,
                              error=f"could not start the job: {error}", finished_at=time.time())
            return
        crash_point("queue:after-spawn")
        # Also recorded by the runner when it claims the job (it may already have): either
        # write is enough for any process to follow, and cancel, the job.
        self.store.update(job.id, only_if=(STARTING, RUNNING), where_token=job.token, handle=handle)
        logger.info("job %s starting on %s", job.id, job.device)

    def _stop_orphans(self, job: Job, state: ProcessState) -> bool:
        """Kill what is left of a job whose own process is gone; True once nothing of it is alive."""
        if not state.group_alive:
            return True
        logger.warning("job %s: its runner is gone but its trainer is not: stopping the trainer", job.id)
        self.executor.cancel(job.handle, grace_s=0)
        return not self.executor.poll(job.handle).group_alive

    def _check_starting(self, job: Job, conn, claimed: list[Job]) -> bool:
        """A claimed job: wait for its runner, record a runner that died unclaimed, take over a lost claim.

        Returns True while the job holds its slot.
        """
        if job.handle:
            state = self.executor.poll(job.handle)
            if state.alive:
                return True  # the runner is on its way to claiming the job
            if not self._stop_orphans(job, state):
                return True
            reason = "the job's runner ended before it started the trainer" + (
                f" (exit code {state.exit_code})" if state.exit_code is not None else "")
            if line := _last_log_line(job):
                reason += f": {line}"
            self.store.update(job.id, conn, status=INTERRUPTED, error=reason, finished_at=time.time(),
                              exit_code=state.exit_code, settled=1)
            discard_run(job)
            return False
        if process_alive(job.claimed_by) and time.time() - (job.claimed_at or 0) < CLAIM_TIMEOUT_S:
            return True  # its claimer is starting the runner right now
        # The claimer crashed between its COMMIT and recording the runner. A runner it may have
        # started holds the old token: it will find the claim gone and exit without running.
        logger.warning("job %s: its starter vanished before recording a runner; starting it again", job.id)
        claimed.append(self._claim(job, job.device, conn))
        return True

    def _check_running(self, job: Job, conn) -> bool:
        """A running job: refresh its progress while its runner lives, else record how it ended.

        Returns True while the job holds its slot.
        """
        state = (self.executor.poll(job.handle) if job.handle
                 else ProcessState(False, unknown="no process handle was recorded"))
        progress = summarise_progress(read_progress(job.progress_path))
        if state.alive:
            if progress != job.progress:
                self.store.update(job.id, conn, progress=progress)
            return True
        if not self._stop_orphans(job, state):
            return True  # not dead yet: look again next time, the slot stays taken
        status, reason = outcome(job, state.exit_code, runner=True, trainer_stopped=state.group_alive,
                                 unknown=state.unknown)
        logger.warning("job %s: runner gone, marking %s (%s)", job.id, status, reason)
        if status != SUCCEEDED:
            discard_run(job)
        self.store.update(job.id, conn, status=status, error=reason, finished_at=time.time(), progress=progress,
                          exit_code=state.exit_code, settled=1)
        return False

    def _check_finished(self, job: Job, conn) -> bool:
        """Settle a finished job (a cancel): once its processes are gone, remove the run unless it succeeded.

        Returns True while the job holds its slot.
        """
        state = self.executor.poll(job.handle) if job.handle else ProcessState(False)
        if state.alive:
            # Its runner stops the trainer (it also reads the cancel from the table, should
            # the signal have been lost) and settles the job itself.
            return True
        if not self._stop_orphans(job, state):
            return True
        if job.status != SUCCEEDED:
            discard_run(job)
        exit_code = job.exit_code if job.exit_code is not None else state.exit_code
        self.store.update(job.id, conn, settled=1, exit_code=exit_code)
        return False

    def _settle(self, job_id: str) -> None:
        """Settle a finished job now if its processes are gone (after a cancel that waited)."""
        with self.store.transaction() as conn:
            job = self.store.get(job_id, conn)
            if job.finished and not job.settled:
                self._check_finished(job, conn)

    def cancel(self, job_id: str, grace_s: float = CANCEL_GRACE_S, wait: bool = True) -> Job:
        """Cancel a queued, starting or running job; a running one is stopped with its children.

        A cancel recorded before the runner records the end wins: a run directory the
        trainer published meanwhile is removed, so a cancelled job never keeps a run.

        Parameters
        ----------
        job_id : str
        grace_s : float
            Seconds the trainer gets to stop cleanly before it is killed.
        wait : bool
            Wait until the processes are gone (False: return at once; the runner, or the
            next reconcile, finishes the job's business).

        Raises
        ------
        AlreadyCancelled
            If the job was cancelled before (by another cancel, perhaps at the same moment).
        JobError
            If the job does not exist or has already ended otherwise.
        """
        with self.store.transaction() as conn:
            job = self.store.get(job_id, conn)
            reason = "cancelled by user" if job.status == RUNNING else "cancelled before it started"
            # One conditional UPDATE is the state change: of two cancels at once exactly one changes
            # the row (rowcount 1) and says it cancelled the job; the other is told it already was.
            # Queued or starting: no trainer runs, and none will (a runner finds its claim gone).
            if job.finished or not self.store.update(
                    job_id, conn, only_if=(job.status,), status=CANCELLED, error=reason,
                    finished_at=time.time(), settled=int(job.status != RUNNING)):
                now = self.store.get(job_id, conn)
                if now.status == CANCELLED:
                    raise AlreadyCancelled(f"job {job_id} was already cancelled")
                raise JobError(f"job {job_id} has already {now.status}")
        crash_point("cancel:after-commit")
        if job.status == RUNNING and job.handle:
            self.executor.cancel(job.handle, grace_s, wait=wait)
            if wait:
                self._settle(job_id)
        self.reconcile()  # the freed slot goes to the next queued job
        return self.store.get(job_id)

    def resume(self, job_id: str, device: str | None = None) -> Job:
        """Queue a new job that continues the interrupted pretraining of job ``job_id`` from its checkpoint.

        The new job takes the old one's work directory (checkpoints included) when it starts
        (:mod:`trainer.jobs.pretrain_job`); the old job stays in the list as it ended.

        Raises
        ------
        JobError
            Not a pretrain job, not finished, succeeded, or nothing left to resume.
        """
        job = self.store.get(job_id)
        kind = kind_of(job.config)
        if not kind.resumable:
            raise JobError(f"job {job_id} is not a pretraining job: only those resume from a checkpoint")
        if not job.finished or job.status == SUCCEEDED:
            raise JobError(f"job {job_id} is {job.status}: only an interrupted, cancelled or failed job resumes")
        if not kind.can_resume(job):
            raise JobError(f"job {job_id} left no pretraining run to resume (it stopped before training began, "
                           "or it was resumed already)")
        return self.submit(kind.resume_request(job), device=device or job.requested_device)

    def delete(self, job_id: str, remove_run: bool = False) -> None:
        """Forget a job: cancel it if active, remove its log and progress, optionally its run.

        Raises
        ------
        JobError
            If the job does not exist, or its processes are still stopping (try again).
        """
        job = self.store.get(job_id)
        if not job.finished:
            with contextlib.suppress(JobError):  # it may have ended meanwhile: then there is nothing to cancel
                self.cancel(job_id)
            job = self.store.get(job_id)
        if not job.settled:
            if job.handle:
                self.executor.cancel(job.handle)
            self._settle(job_id)
            job = self.store.get(job_id)
        if not job.settled:
            # Deleting it now would let its trainer publish a run nobody knows about.
            raise JobError(f"job {job_id}'s processes are still stopping: try again in a moment")
        self.store.delete(job_id)
        shutil.rmtree(Path(job.log_path).parent, ignore_errors=True)
        if remove_run or job.status != SUCCEEDED:
            discard_run(job)

