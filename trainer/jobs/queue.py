"""The job queue: submit, reconcile, cancel, delete, and the device slots.

No daemon is needed for correctness. Every look at the job list (``jobs list``, a page
refresh) calls :meth:`Worker.reconcile`, which

1. reaps running jobs whose process is gone: they become ``interrupted`` (or ``succeeded``
   when the trainer had finished) with the reason, and a half-written run directory is
   removed;
2. starts queued jobs, oldest first, while their device has a free slot.

Each started job is a small runner process (``python -m trainer.jobs.runner run JOB_ID``,
:mod:`trainer.jobs.runner`) in its own session; it starts the trainer, records how it ended
and calls :meth:`Worker.reconcile` itself, so the next queued job starts even when nobody
is looking.

Slots: one job per GPU and one on the CPU by default; ``BIOVIZ_JOB_SLOTS="cpu=2,cuda=1"``
or ``Worker(slots=...)`` changes that, and ``BIOVIZ_JOB_DEVICES="cpu"`` hides the GPUs.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import signal
import time
from collections import Counter
from dataclasses import replace
from functools import lru_cache
from pathlib import Path

from bioviz.models.runs import is_run_dir
from trainer.config import TrainConfig, validate
from trainer.data import check_feasible
from trainer.jobs.executor import (
    CANCEL_EXIT_CODE, CANCEL_GRACE_S, Executor, LocalProcessExecutor, ProcessState, python_command,
)
from trainer.jobs.progress import read_progress, summarise_progress, tail
from trainer.jobs.store import (
    ACTIVE, CANCELLED, FAILED, INTERRUPTED, QUEUED, RUNNING, SUCCEEDED, Job, JobError, JobStore,
)

logger = logging.getLogger(__name__)

PROJECT_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_SLOTS = {"cpu": 1, "cuda": 1}
DEVICE_CHOICES = ("auto", "cpu", "cuda")
RUNNER_MODULE = "trainer.jobs.runner"  # each started job's process: python -m RUNNER_MODULE run JOB_ID


@lru_cache(maxsize=1)
def gpu_count() -> int:
    """Number of CUDA devices jobs may use (``BIOVIZ_JOB_DEVICES=cpu`` forces none)."""
    if os.environ.get("BIOVIZ_JOB_DEVICES", "").strip().lower() == "cpu":
        return 0
    try:
        import torch
    except ImportError:  # pragma: no cover - torch is a runtime dependency
        return 0
    return int(torch.cuda.device_count()) if torch.cuda.is_available() else 0


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
    if job.device and job.device.startswith("cuda:"):
        env["CUDA_VISIBLE_DEVICES"] = job.device.split(":", 1)[1]
    elif job.device == "cpu":
        env["CUDA_VISIBLE_DEVICES"] = ""
    return env


def discard_incomplete_run(job: Job) -> None:
    """Remove what an unfinished job left of its run directory (and the trainer's temp dirs).

    A run directory counts as complete only with ``run.json``; anything else named after
    the job under ``runs/`` is a leftover of a killed or failed trainer.
    """
    run_dir = Path(job.run_dir)
    if is_run_dir(run_dir):
        return
    for path in [run_dir, *run_dir.parent.glob(f".{run_dir.name}*"), *run_dir.parent.glob(f"{run_dir.name}.*")]:
        if path.is_dir() and not is_run_dir(path):
            shutil.rmtree(path, ignore_errors=True)
            logger.info("removed incomplete run directory %s", path)


def _signal_name(code: int) -> str:
    with contextlib.suppress(ValueError):
        return signal.Signals(-code).name
    return f"signal {-code}"


def _last_log_line(job: Job) -> str:
    lines = [line.strip() for line in tail(job.log_path, 40).splitlines() if line.strip()]
    return lines[-1] if lines else ""


def outcome(job: Job, exit_code: int | None, cancel_requested: bool = False) -> tuple[str, str | None]:
    """How a job ended: ``(status, reason)`` from its exit code, progress events and run directory.

    ``exit_code`` None means the process vanished without anyone seeing it exit.
    """
    events = read_progress(job.progress_path)
    done = any(e.get("event") == "done" for e in events)
    errors = [e.get("message") for e in events if e.get("event") == "error"]
    complete = is_run_dir(job.run_dir)
    if done and complete and exit_code in (0, None):
        return SUCCEEDED, None
    if cancel_requested or exit_code in (CANCEL_EXIT_CODE, -signal.SIGTERM):
        return CANCELLED, "cancelled by user"
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
    message = errors[-1] if errors else _last_log_line(job)
    return FAILED, f"exit code {exit_code}" + (f": {message}" if message else "")


class Worker:
    """The queue over a :class:`JobStore` and an :class:`Executor`.

    Parameters
    ----------
    store : JobStore, optional
        Default: the store in ``BIOVIZ_HOME``.
    executor : Executor, optional
        Default: :class:`LocalProcessExecutor`.
    slots : dict, optional
        ``{"cpu": n, "cuda": n}``: jobs at once on the CPU and per GPU (default from
        ``BIOVIZ_JOB_SLOTS``, else one each).
    module : str
        The trainer program new jobs run (``python -m <module> train ...``).
    """

    def __init__(self, store: JobStore | None = None, executor: Executor | None = None,
                 slots: dict[str, int] | None = None, module: str = "trainer"):
        self.store = store or JobStore()
        self.executor = executor or LocalProcessExecutor()
        self.module = module
        self.slots = dict(slots) if slots else parse_slots(os.environ.get("BIOVIZ_JOB_SLOTS"))

    # -- devices -----------------------------------------------------------------------
    def capacity(self) -> dict[str, int]:
        """``slot -> jobs at once``, e.g. ``{"cpu": 1, "cuda:0": 1}``."""
        capacity = {"cpu": self.slots["cpu"]}
        capacity.update({f"cuda:{i}": self.slots["cuda"] for i in range(gpu_count())})
        return capacity

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
        if device.startswith("cuda") and device not in self.capacity() and not (device == "cuda" and gpu_count()):
            raise JobError(f"device {device!r} is not available here ({gpu_count()} CUDA devices)")
        if validate:
            config = validate_config(config)
        job = self.store.create(config, requested_device=device, executor=self.executor.name, module=self.module)
        self.reconcile()
        return self.store.get(job.id)

    def reconcile(self) -> list[Job]:
        """Reap dead jobs, start queued ones where slots are free; return every job.

        Safe to call from any number of processes at once: the decisions are taken inside
        one ``BEGIN IMMEDIATE`` transaction.
        """
        if not self.store.list(ACTIVE):
            self.executor.reap()
            return self.store.list()
        with self.store.transaction() as conn:
            used: Counter = Counter()
            for job in self.store.list((RUNNING,), conn):
                state = self.executor.poll(job.handle) if job.handle else ProcessState(False)
                progress = summarise_progress(read_progress(job.progress_path))
                if state.alive:
                    used[job.device] += 1
                    if progress != job.progress:
                        self.store.update(job.id, conn, progress=progress)
                    continue
                status, reason = outcome(job, state.exit_code)
                logger.warning("job %s: runner gone, marking %s (%s)", job.id, status, reason)
                self.store.update(job.id, conn, status=status, error=reason, finished_at=time.time(),
                                  progress=progress, exit_code=state.exit_code)
                if status != SUCCEEDED:
                    discard_incomplete_run(job)
            for job in self.store.list((QUEUED,), conn):
                slot = self._pick_slot(job.requested_device, used)
                if slot is None:
                    continue  # a later job may ask for another device that is free
                self._start(job, slot, conn)
                used[slot] += 1
        self.executor.reap()
        return self.store.list()

    def _start(self, job: Job, slot: str, conn) -> None:
        """Launch the runner of ``job`` on ``slot`` (inside the reconcile transaction)."""
        command = python_command("-m", RUNNER_MODULE, "run", job.id)
        started = replace(job, device=slot)
        try:
            handle = self.executor.submit(command, job_env(started, self.store.path.parent), job.log_path)
        except OSError as error:
            self.store.update(job.id, conn, status=FAILED, error=f"could not start the job: {error}",
                              finished_at=time.time(), device=slot)
            return
        self.store.update(job.id, conn, status=RUNNING, device=slot, handle=handle, started_at=time.time())
        logger.info("job %s started on %s", job.id, slot)

    def cancel(self, job_id: str, grace_s: float = CANCEL_GRACE_S, wait: bool = True) -> Job:
        """Cancel a queued or running job; a running one is stopped with its children.

        Parameters
        ----------
        job_id : str
        grace_s : float
            Seconds the trainer gets to stop cleanly before it is killed.
        wait : bool
            Wait until the processes are gone (False: return at once; the runner makes sure).

        Raises
        ------
        JobError
            If the job does not exist or has already finished.
        """
        with self.store.transaction() as conn:
            job = self.store.get(job_id, conn)
            if job.finished:
                raise JobError(f"job {job_id} has already {job.status}")
            reason = "cancelled before it started" if job.status == QUEUED else "cancelled by user"
            self.store.update(job_id, conn, status=CANCELLED, error=reason, finished_at=time.time())
        if job.status == RUNNING and job.handle:
            self.executor.cancel(job.handle, grace_s, wait=wait)
            if wait:
                discard_incomplete_run(job)
        self.reconcile()  # the freed slot goes to the next queued job
        return self.store.get(job_id)

    def delete(self, job_id: str, remove_run: bool = False) -> None:
        """Forget a job: cancel it if active, remove its log and progress, optionally its run."""
        job = self.store.get(job_id)
        if not job.finished:
            self.cancel(job_id)
        self.store.delete(job_id)
        shutil.rmtree(Path(job.log_path).parent, ignore_errors=True)
        if remove_run:
            shutil.rmtree(job.run_dir, ignore_errors=True)
        else:
            discard_incomplete_run(job)


def validate_config(config: dict) -> dict:
    """Refuse a config the trainer would reject (unknown option, encoder, too many shots, missing base).

    Runs :func:`trainer.config.validate` and :func:`trainer.data.check_feasible` (the one
    time the level is loaded for a job before it runs).

    Parameters
    ----------
    config : dict
        Training options, without the device (the job's, see :meth:`Worker.submit`).

    Returns
    -------
    dict
        Every option, the encoder's defaults filled in (what the run will use).

    Raises
    ------
    BiovizError
        With the trainer's one-line reason.
    """
    validated = validate(TrainConfig.from_dict(config))
    check_feasible(validated)
    return {name: value for name, value in validated.to_dict().items() if name != "device"}
