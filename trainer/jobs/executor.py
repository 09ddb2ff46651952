"""What starts, watches and stops job processes: the :class:`Executor` interface.

An executor works on opaque handle strings stored in the job table, so any process (the
app, the command line, a job's runner) can poll or cancel a job another one started. The
embedded default is :class:`LocalProcessExecutor` (one OS process per job on this
machine); :class:`trainer.jobs.ray_executor.RayExecutor` runs the trainer on a Ray cluster
(``BIOVIZ_EXECUTOR=ray``, :func:`trainer.jobs.queue.executor_from_env`).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from bioviz.processes import pid_alive as _pid_alive  # shared with the run export's owner records
from bioviz.processes import proc_start_time as _proc_start_time
from bioviz.processes import proc_state as _proc_state
from trainer.cli_common import EXIT_CANCELLED

logger = logging.getLogger(__name__)

# Set in every job process's environment (trainer.jobs.queue.job_env): how a process group
# is recognised as a job's own once its leader is gone and its number may have been reused.
JOB_ID_ENV = "BIOVIZ_JOB_ID"
# Exit code of a trainer stopped by SIGTERM between batches: the trainer commands' own (trainer.cli_common).
CANCEL_EXIT_CODE = EXIT_CANCELLED
# Seconds a cancelled trainer gets to stop cleanly before it is killed (it stops between
# batches, then the interpreter tears torch down: seconds on a busy machine).
CANCEL_GRACE_S = 30.0


@dataclass(frozen=True)
class ProcessState:
    """What an executor knows about a job's process.

    Attributes
    ----------
    alive : bool
        The job's own process (the runner) is still running.
    exit_code : int or None
        Exit code when the executor saw it end (negative: killed by that signal).
    group_alive : bool
        Any process the job started is still running, the job's own included: a trainer
        outliving its killed runner keeps it True.
    unknown : str or None
        Why the process could not be looked up (an unreadable handle); it then counts as gone.
    """

    alive: bool
    exit_code: int | None = None
    group_alive: bool = False
    unknown: str | None = None

    def __post_init__(self):
        if self.alive and not self.group_alive:
            object.__setattr__(self, "group_alive", True)  # the job's own process is in its group


class Executor:
    """Starts, watches and stops job processes. Subclass for Ray, Slurm, ...

    A handle is an opaque string the executor can later turn back into its process; it is
    stored in the job table so any process (the app, the CLI) can poll or cancel the job.

    Two halves. The *runner* half (:meth:`submit`, :meth:`poll`, :meth:`current_handle`,
    :meth:`cancel`, :meth:`reap`) starts and follows each job's runner process; the *trainer*
    half (:meth:`capacity`, :meth:`start_trainer`) says which device slots exist and starts
    the trainer for a runner. The queue and the runner only call these methods, never ask
    which executor they hold.

    Slurm (e.g. with submitit) would fit the same way: the runner half unchanged (the runner
    stays a small local process that records progress), :meth:`start_trainer` submitting
    ``sbatch``/``submitit`` with ``--gres=gpu:1`` for a GPU slot and returning an object that
    polls ``sacct`` for the exit code and ``scancel``s on :meth:`send_signal`; :meth:`capacity`
    from the partition's GPUs; progress and the run directory through the cluster's shared
    filesystem (Slurm clusters have one), so the job's paths must lie on it.
    """

    name = "abstract"

    def submit(self, command: list[str], env: dict[str, str], log_path: str | Path) -> str:
        """Start ``command`` with ``env``, stdout and stderr appended to ``log_path``; return its handle."""
        raise NotImplementedError

    def poll(self, handle: str) -> ProcessState:
        """Whether the process behind ``handle``, and anything it started, is still alive."""
        raise NotImplementedError

    def current_handle(self) -> str:
        """The handle of the calling process, for a job's runner to record itself when it claims its job."""
        raise NotImplementedError

    def cancel(self, handle: str, grace_s: float = CANCEL_GRACE_S, wait: bool = True) -> None:
        """Ask the process and its children to stop; force them after ``grace_s`` seconds.

        With ``wait=False`` return once asked; the job's runner forces its trainer itself.
        With ``grace_s=0`` they are killed at once (what is left of a job whose runner died).
        """
        raise NotImplementedError

    def reap(self) -> None:
        """Collect what finished processes left behind (the queue calls it after each look).

        Nothing to do for an executor whose processes are not this process's children.
        """

    def capacity(self, slots: dict[str, int]) -> dict[str, int]:
        """``slot -> jobs at once`` (e.g. ``{"cpu": 1, "cuda:0": 1}``) given the per-device ``slots`` setting.

        Slots whose name starts with ``cuda`` are GPU slots: a job asking for ``auto`` or
        ``cuda`` takes one of them when any exists.
        """
        raise NotImplementedError

    def start_trainer(self, job, command: list[str], env: dict[str, str], cwd: str, *, log):
        """Start the trainer of ``job`` for its runner; return a process-like object.

        The object answers ``wait(timeout)`` (raising :class:`subprocess.TimeoutExpired`),
        ``poll()``, ``send_signal(signal.SIGTERM)`` (stop: the trainer exits with
        :data:`CANCEL_EXIT_CODE`) and ``kill()``, like :class:`subprocess.Popen`; and
        ``lost_reason``: None, or why the trainer was lost without an exit code (a remote
        node died), which makes the job ``interrupted`` with that reason.

        Parameters
        ----------
        job : trainer.jobs.store.Job
            The claimed job (its config, device slot, log, progress file and run directory).
        command : list of str
            The local trainer command line (:func:`trainer.jobs.runner.train_command`).
        env : dict
            The job's environment (:func:`trainer.jobs.queue.job_env`).
        cwd : str
            The project's folder.
        log : binary file
            The job's log, open for appending.
        """
        raise NotImplementedError


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


def _parse_handle(handle: str | None) -> dict | None:
    """``{"pid": int, "start": str|None, "job": str|None}`` from a local handle; None if unreadable."""
    try:
        info = json.loads(handle) if handle else None
    except (TypeError, ValueError):
        return None
    pid = info.get("pid") if isinstance(info, dict) else None
    # A real pid, never 0 or 1 (JSON true is 1): killpg(0) is the caller's own group and
    # killpg(1) is kill(-1), every process the user may signal.
    if isinstance(pid, bool) or not isinstance(pid, int) or not 1 < pid < 2**31:
        return None
    return info


def process_handle(pid: int | None = None) -> str:
    """``{"pid": .., "start": ..}`` of a process on this machine (default: this one).

    The queue records it as the claimer of a job it is about to start, so another process
    can tell a claim in progress from one whose claimer crashed.
    """
    pid = os.getpid() if pid is None else pid
    return json.dumps({"pid": pid, "start": _proc_start_time(pid)})


def process_alive(handle: str | None) -> bool:
    """True while the process of a :func:`process_handle` runs (False for an unreadable one)."""
    info = _parse_handle(handle)
    return info is not None and _pid_alive(info["pid"], info.get("start"))


class LocalProcessExecutor(Executor):
    """Runs each job as its own OS process on this machine, in its own session.

    ``start_new_session=True`` gives the process its own process group, so :meth:`cancel`
    reaches the trainer and anything it started, and closing the app or the terminal that
    submitted it does not kill it. The handle is ``{"pid": .., "start": .., "job": ..}``:
    the start time guards against a recycled pid after a reboot, and the job id (also in
    the processes' environment, :data:`JOB_ID_ENV`) lets :meth:`poll` and :meth:`cancel`
    find a trainer that outlived its runner without ever taking a stranger's process group
    that happens to have the same number.
    """

    name = "local"
    # Popen objects of processes started by this Python process: polling them reaps the
    # child (no zombie while the app runs) and gives its exit code, kept in _exit_codes for
    # whoever polls next (a cancel may poll before the reconcile that records the end).
    _children: dict[int, subprocess.Popen] = {}
    _exit_codes: dict[int, int] = {}

    def submit(self, command: list[str], env: dict[str, str], log_path: str | Path) -> str:
        """Start ``command`` detached; return its handle."""
        Path(log_path).parent.mkdir(parents=True, exist_ok=True)
        with open(log_path, "ab") as log:
            proc = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                    env=env, start_new_session=True, close_fds=True)
        self._children[proc.pid] = proc
        self._exit_codes.pop(proc.pid, None)  # a reused pid: that code was another process's
        return json.dumps({"pid": proc.pid, "start": _proc_start_time(proc.pid), "job": env.get(JOB_ID_ENV)})

    def current_handle(self) -> str:
        """This process's handle (a runner started by :meth:`submit` leads its own process group)."""
        return json.dumps({"pid": os.getpid(), "start": _proc_start_time(os.getpid()),
                           "job": os.environ.get(JOB_ID_ENV)})

    def poll(self, handle: str) -> ProcessState:
        """Alive or not, with the exit code when this process started it.

        Once the process itself is gone, ``group_alive`` says whether anything it started
        (its trainer) lives on: only processes of its group that carry its job id count. An
        unreadable handle gives a dead state with ``unknown`` set, never an exception.
        """
        info = _parse_handle(handle)
        if info is None:
            return ProcessState(False, unknown=f"unreadable process handle {str(handle)[:60]!r}")
        pid = info["pid"]
        child = self._children.get(pid)
        if child is not None:
            code = child.poll()
            if code is None:
                return ProcessState(True)
            del self._children[pid]
            self._exit_codes[pid] = code
        elif _pid_alive(pid, info.get("start")):
            return ProcessState(True)
        code = self._exit_codes.get(pid)
        # Without a job id (handles written before they carried one) the group cannot be told
        # apart from a stranger's that reuses the number: it is not looked at.
        job = info.get("job")
        return ProcessState(False, code, group_alive=bool(job) and group_alive(pid, job))

    def reap(self) -> None:
        """Collect the exit status of finished children, so none lingers as a zombie."""
        for pid, child in list(self._children.items()):
            if (code := child.poll()) is not None:
                self._children.pop(pid, None)
                self._exit_codes[pid] = code

    def __init__(self, gpus=None):
        self._gpus = gpus or gpu_count

    def capacity(self, slots: dict[str, int]) -> dict[str, int]:
        """One ``cpu`` slot group and one per visible CUDA device (``cuda:N``)."""
        capacity = {"cpu": slots["cpu"]}
        capacity.update({f"cuda:{i}": slots["cuda"] for i in range(self._gpus())})
        return capacity

    def start_trainer(self, job, command: list[str], env: dict[str, str], cwd: str, *, log) -> subprocess.Popen:
        """The trainer as a child of the runner, in the runner's process group (a cancel reaches both)."""
        return subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                env=env, cwd=cwd)

    def cancel(self, handle: str, grace_s: float = CANCEL_GRACE_S, wait: bool = True) -> None:
        """SIGTERM the process group (the trainer stops between batches), SIGKILL after ``grace_s``.

        With ``wait=False`` only the SIGTERM is sent: the runner kills its trainer after
        the same grace period, so a page need not block on a slow shutdown.
        """
        if not self.poll(handle).group_alive:
            return  # gone (or never ours: poll only vouches for the job's own group)
        pid = _parse_handle(handle)["pid"]
        if pid == os.getpgrp():
            logger.error("job handle %s names this process's own group: not signalling it", handle)
            return
        if grace_s > 0:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGTERM)  # pid == pgid: the process leads its own session
            if not wait:
                return
            deadline = time.monotonic() + grace_s
            while time.monotonic() < deadline:
                if not self.poll(handle).group_alive:
                    return
                time.sleep(0.1)
            logger.warning("job process group %s ignored SIGTERM for %.0f s: killing it", pid, grace_s)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGKILL)
        deadline = time.monotonic() + 5.0  # SIGKILL cannot be refused; wait for the kernel
        while self.poll(handle).group_alive and time.monotonic() < deadline:
            time.sleep(0.05)


def group_alive(pgid: int, job_id: str | None = None) -> bool:
    """True while any process of group ``pgid`` is alive (zombies do not count).

    With ``job_id``, only processes whose environment names that job (:data:`JOB_ID_ENV`)
    count: a group number can be reused once the group is gone.
    """
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return job_id is None  # someone else's group: ours only if we are not asking for a job
    proc = Path("/proc")
    if not proc.is_dir():
        return True
    marker = f"{JOB_ID_ENV}={job_id}".encode() if job_id else None
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        if int(fields[2]) != pgid or fields[0] in ("Z", "X"):
            continue
        if marker is None:
            return True
        try:
            if marker in (entry / "environ").read_bytes().split(b"\0"):
                return True
        except OSError:
            continue  # gone meanwhile, or not ours to read
    return False


def python_command(*args: str) -> list[str]:
    """``[sys.executable, *args]``: jobs run with the interpreter of the app or CLI."""
    return [sys.executable, *args]
