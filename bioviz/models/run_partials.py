"""Temporary export folders of runs (``.<name>.partial-*``): who writes each, and removing the abandoned ones.

The trainer exports a run into a hidden sibling of its target and renames it into place at the
end (:mod:`trainer.runs`). A process killed before the rename (``kill -9``, out of memory, a
machine restart) leaves the sibling behind, a hundred megabytes of weights nobody will ever
use. So the writer records itself in the folder first (:data:`OWNER_FILE`: pid, start time,
host, boot id, PID namespace), and :func:`sweep_partials` (run when runs are listed, and before
a run is exported) removes the folders whose writer is gone. Never one whose writer still runs,
nor one written from another machine (a cluster's shared folder: its process cannot be seen from here).

A pid means something only in the PID namespace it was read in: a trainer in a container with
host networking has this machine's host name but its own pids (pid 2 there is no process
here). So a record is judged by its pid only when it comes from this boot
(``/proc/sys/kernel/random/boot_id``) and this PID namespace (the inode of ``/proc/self/ns/pid``),
neither of which another namespace on the same host can share by chance. Any other record (another
namespace or boot, an older record without these fields, a machine without ``/proc``) is judged
by its age like a folder with no record: removed once :data:`ORPHAN_AGE_S` old, never outside the
runs folder.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import socket
import time
from dataclasses import dataclass
from pathlib import Path

from bioviz.processes import pid_alive, proc_start_time

logger = logging.getLogger(__name__)

OWNER_FILE = ".owner.json"  # in the partial folder; removed once the folder has become the run
PARTIAL_MARK = ".partial-"  # .<run name>.partial-<random>, as trainer.runs and the Ray executor name them
# A partial folder with no owner record (written before the record existed, or caught in the
# instant between its creation and the record) is left alone until it is this old: no export takes a day.
ORPHAN_AGE_S = 24 * 3600.0


@dataclass(frozen=True)
class PartialOwner:
    """The process writing a partial folder.

    Attributes
    ----------
    pid : int
    start : str or None
        Its start time in clock ticks since boot (:func:`bioviz.processes.proc_start_time`).
    host : str
        The machine it runs on.
    boot : str or None
        The kernel's boot id when it was recorded (None: unknown, no ``/proc``).
    pidns : int or None
        The inode of its PID namespace (None: unknown).
    """

    pid: int
    start: str | None
    host: str
    boot: str | None = None
    pidns: int | None = None

    @classmethod
    def this_process(cls) -> PartialOwner:
        """The owner record of the calling process."""
        return cls(os.getpid(), proc_start_time(os.getpid()), socket.gethostname(), boot_id(), pid_namespace())

    def elsewhere(self) -> bool:
        """Whether it was written on another machine (its process cannot be seen from here, however old)."""
        return self.host != socket.gethostname()

    def judged_here(self) -> bool:
        """Whether its pid names a process this one can see: this boot, this PID namespace, a start time known."""
        here = boot_id(), pid_namespace()
        return None not in here and (self.boot, self.pidns) == here and self.start is not None

    def alive(self) -> bool:
        """Whether the writer may still be at work: only a record :meth:`judged_here` can tell it is not."""
        return self.elsewhere() or not self.judged_here() or pid_alive(self.pid, self.start)


def boot_id() -> str | None:
    """The kernel's boot id (changes at every boot; shared by every namespace); None without ``/proc``."""
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text(encoding="ascii").strip() or None
    except (OSError, ValueError):
        return None


def pid_namespace() -> int | None:
    """The inode of this process's PID namespace (two processes see the same pids only if it is the same)."""
    try:
        return os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        return None


def is_partial(path: Path) -> bool:
    """Whether ``path``'s name is a run's temporary export folder's (``.<name>.partial-*``)."""
    return path.name.startswith(".") and PARTIAL_MARK in path.name


def record_owner(partial: Path | str) -> None:
    """Write this process's :class:`PartialOwner` into ``partial`` (first thing after creating it)."""
    owner = PartialOwner.this_process()
    record = {"pid": owner.pid, "start": owner.start, "host": owner.host, "boot": owner.boot, "pidns": owner.pidns}
    (Path(partial) / OWNER_FILE).write_text(json.dumps(record), encoding="utf-8")


def drop_owner(run: Path | str) -> None:
    """Remove the owner record from a partial folder just renamed into the run ``run`` (a run does not carry it).

    A removal the disk refuses leaves the small hidden file in place: the run is complete and
    nothing reads it, so a finished training is not failed over it.
    """
    with contextlib.suppress(OSError):
        (Path(run) / OWNER_FILE).unlink(missing_ok=True)


def read_owner(partial: Path) -> PartialOwner | None:
    """The owner record of ``partial``; None when there is none or it cannot be read."""
    try:
        data = json.loads((partial / OWNER_FILE).read_text(encoding="utf-8"))
        pid, start, host = data["pid"], data.get("start"), data["host"]
        boot, pidns = data.get("boot"), data.get("pidns")
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return None
    if isinstance(pid, bool) or not isinstance(pid, int) or not 1 < pid < 2**31 or not isinstance(host, str):
        return None  # damaged: vouches for nothing, judged by its age as one without a record
    if isinstance(pidns, bool) or not isinstance(pidns, int):
        pidns = None
    return PartialOwner(pid, start if isinstance(start, str) else None, host, boot if isinstance(boot, str) else None,
                        pidns)


def abandoned(partial: Path, orphan_age_s: float | None = ORPHAN_AGE_S, now: float | None = None) -> bool:
    """Whether ``partial``'s writer is gone.

    Parameters
    ----------
    partial : pathlib.Path
    orphan_age_s : float or None
        A partial with no owner record counts as abandoned once it is this old (seconds since
        its folder last changed); None: never (only a record can tell).
    now : float, optional
        The time to measure the age at (default: now).

    Returns
    -------
    bool
        True when its record is from this boot and PID namespace and its process ended (or its
        pid was reused); or, for a folder with no record or a record that cannot be judged here
        (another PID namespace or boot, or written without them), when it is older than
        ``orphan_age_s``. Never for a record from another machine.
    """
    owner = read_owner(partial)
    if owner is not None and owner.elsewhere():
        return False
    if owner is not None and owner.judged_here():
        return not pid_alive(owner.pid, owner.start)
    if orphan_age_s is None:
        return False
    try:
        age = (time.time() if now is None else now) - partial.stat().st_mtime
    except OSError:
        return False
    return age > orphan_age_s


def sweep_partials(folder: Path | str, orphan_age_s: float | None = ORPHAN_AGE_S) -> list[Path]:
    """Remove the abandoned partial folders directly under ``folder``; return those removed.

    Never raises: a folder that cannot be listed or a partial that cannot be removed (a
    read-only home) is left as it is, for a later sweep.

    Parameters
    ----------
    folder : path-like
        ``BIOVIZ_HOME/runs``, or the folder a run is exported into.
    orphan_age_s : float or None
        See :func:`abandoned`. None outside the runs folder: a user's own folder may hold a
        ``.x.partial-y`` that bioviz never wrote, and only the owner record says it did.
    """
    try:
        children = [child for child in Path(folder).iterdir() if is_partial(child)]
    except OSError:
        return []
    removed = []
    for partial in children:
        if partial.is_symlink() or not partial.is_dir() or not abandoned(partial, orphan_age_s):
            continue
        shutil.rmtree(partial, ignore_errors=True)
        if not partial.exists():
            logger.info("removed %s: the export it held was abandoned (its writer is gone)", partial)
            removed.append(partial)
    return removed
