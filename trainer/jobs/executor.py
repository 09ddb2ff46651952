"""What starts, watches and stops job processes: the :class:`Executor` interface.

An executor works on opaque handle strings stored in the job table, so any process (the
app, the command line, a job's runner) can poll or cancel a job another one started. The
embedded default is :class:`LocalProcessExecutor` (one OS process per job on this
machine); a Ray or Slurm executor implements the same four methods.
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
from pathlib import Path

logger = logging.getLogger(__name__)

# Exit code of a trainer stopped by SIGTERM between batches (128 + SIGINT, by convention).
CANCEL_EXIT_CODE = 130
# Seconds a cancelled trainer gets to stop cleanly before it is killed (it stops between
# batches, then the interpreter tears torch down: seconds on a busy machine).
CANCEL_GRACE_S = 30.0


@dataclass(frozen=True)
class ProcessState:
    """What an executor knows about a job's process.

    Attributes
    ----------
    alive : bool
        Still running.
    exit_code : int or None
        Exit code when the executor saw it end (negative: killed by that signal).
    """

    alive: bool
    exit_code: int | None = None


class Executor:
    """Starts, watches and stops job processes. Subclass for Ray, Slurm, ...

    A handle is an opaque string the executor can later turn back into its process; it is
    stored in the job table so any process (the app, the CLI) can poll or cancel the job.
    """

    name = "abstract"

    def submit(self, command: list[str], env: dict[str, str], log_path: str | Path) -> str:
        """Start ``command`` with ``env``, stdout and stderr appended to ``log_path``; return its handle."""
        raise NotImplementedError

    def poll(self, handle: str) -> ProcessState:
        """Whether the process behind ``handle`` is still alive."""
        raise NotImplementedError

    def cancel(self, handle: str, grace_s: float = CANCEL_GRACE_S, wait: bool = True) -> None:
        """Ask the process and its children to stop; force them after ``grace_s`` seconds.

        With ``wait=False`` return once asked; the job's runner forces its trainer itself.
        """
        raise NotImplementedError

    def reap(self) -> None:
        """Collect what finished processes left behind (the queue calls it after each look).

        Nothing to do for an executor whose processes are not this process's children.
        """


def _proc_start_time(pid: int) -> str | None:
    """Start time of ``pid`` in clock ticks since boot (Linux), to tell a reused pid apart."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses: split after the last ')'.
    fields = stat[stat.rindex(")") + 2:].split()
    return fields[19] if len(fields) > 19 else None


def _proc_state(pid: int) -> str | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat[stat.rindex(")") + 2:].split()[0]


def _pid_alive(pid: int, start: str | None) -> bool:
    """True when ``pid`` exists, is not a zombie, and (when known) started at ``start``."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # exists, owned by someone else: cannot be ours, but do not reap it blindly
    if Path("/proc").is_dir():
        if _proc_state(pid) in (None, "Z", "X"):
            return False
        if start is not None and _proc_start_time(pid) != start:
            return False  # the pid was reused by an unrelated process
    return True


class LocalProcessExecutor(Executor):
    """Runs each job as its own OS process on this machine, in its own session.

    ``start_new_session=True`` gives the process its own process group, so :meth:`cancel`
    reaches the trainer and anything it started, and closing the app or the terminal that
    submitted it does not kill it. The handle is ``{"pid": .., "start": ..}``; the start
    time guards against a recycled pid after a reboot.
    """

    name = "local"
    # Popen objects of processes started by this Python process: polling them reaps the
    # child (no zombie while the app runs) and gives its exit code.
    _children: dict[int, subprocess.Popen] = {}

    def submit(self, command: list[str], env: dict[str, str], log_path: str | Path) -> str:
        """Start ``command`` detached; return its handle."""
        Path(log_path).parent.mkdir(parents=True, exist_ok=True)
        with open(log_path, "ab") as log:
            proc = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                    env=env, start_new_session=True, close_fds=True)
        self._children[proc.pid] = proc
        return json.dumps({"pid": proc.pid, "start": _proc_start_time(proc.pid)})

    def poll(self, handle: str) -> ProcessState:
        """Alive or not, with the exit code when this process started it."""
        info = json.loads(handle)
        pid = int(info["pid"])
        child = self._children.get(pid)
        if child is not None:
            code = child.poll()
            if code is None:
                return ProcessState(True)
            del self._children[pid]
            return ProcessState(False, code)
        return ProcessState(_pid_alive(pid, info.get("start")))

    def reap(self) -> None:
        """Collect the exit status of finished children, so none lingers as a zombie."""
        for pid, child in list(self._children.items()):
            if child.poll() is not None:
                self._children.pop(pid, None)

    def cancel(self, handle: str, grace_s: float = CANCEL_GRACE_S, wait: bool = True) -> None:
        """SIGTERM the process group (the trainer stops between batches), SIGKILL after ``grace_s``.

        With ``wait=False`` only the SIGTERM is sent: the runner kills its trainer after
        the same grace period, so a page need not block on a slow shutdown.
        """
        info = json.loads(handle)
        pid = int(info["pid"])
        if not self.poll(handle).alive:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGTERM)  # pid == pgid: the process leads its own session
        if not wait:
            return
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline:
            if not self.poll(handle).alive and not group_alive(pid):
                return
            time.sleep(0.1)
        logger.warning("job process group %s ignored SIGTERM for %.0f s: killing it", pid, grace_s)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGKILL)
        deadline = time.monotonic() + 5.0  # SIGKILL cannot be refused; wait for the kernel
        while (self.poll(handle).alive or group_alive(pid)) and time.monotonic() < deadline:
            time.sleep(0.05)


def group_alive(pgid: int) -> bool:
    """True while any process of group ``pgid`` is alive (zombies do not count)."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    proc = Path("/proc")
    if not proc.is_dir():
        return True
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        if int(fields[2]) == pgid and fields[0] not in ("Z", "X"):
            return True
    return False


def python_command(*args: str) -> list[str]:
    """``[sys.executable, *args]``: jobs run with the interpreter of the app or CLI."""
    return [sys.executable, *args]
