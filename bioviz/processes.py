"""Telling whether a process recorded earlier still runs: its pid and start time (Linux ``/proc``).

A pid alone is not enough: after the process ends (or the machine restarts) the number is
given to another process. The start time, in clock ticks since boot, tells them apart. The
job queue records its runners this way (:mod:`trainer.jobs.executor`), and a run's temporary
export folder records its writer (:mod:`bioviz.models.run_partials`).
"""

from __future__ import annotations

import os
from pathlib import Path


def proc_start_time(pid: int) -> str | None:
    """Start time of ``pid`` in clock ticks since boot (Linux), to tell a reused pid apart."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses: split after the last ')'.
    fields = stat[stat.rindex(")") + 2:].split()
    return fields[19] if len(fields) > 19 else None


def proc_state(pid: int) -> str | None:
    """The one-letter state of ``pid`` (``R``, ``S``, ``Z`` ...) from ``/proc``; None if unreadable."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat[stat.rindex(")") + 2:].split()[0]


def pid_alive(pid: int, start: str | None) -> bool:
    """True when ``pid`` exists, is not a zombie, and started at ``start``.

    Where ``/proc`` tells start times, a record without one (damaged, or written by hand)
    vouches for nothing: any process could have that number.
    """
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # exists, owned by someone else: cannot be ours, but do not reap it blindly
    if Path("/proc").is_dir():
        if proc_state(pid) in (None, "Z", "X"):
            return False
        if start is None or proc_start_time(pid) != start:
            return False  # the pid was reused by an unrelated process (or cannot be told)
    return True
