"""Helpers of the cluster tests: free ports, stopping the head's process group, a job's processes."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from pathlib import Path

def free_port() -> int:
    """A TCP port nothing listens on at the moment (on 127.0.0.1)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def stop_group(process: subprocess.Popen, grace_s: float = 30.0) -> None:
    """SIGTERM the process group this fixture started, SIGKILL what is left after ``grace_s``."""
    for sig, wait_s in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 10.0)):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            try:
                os.killpg(process.pid, 0)
            except ProcessLookupError:
                return
            process.poll()
            time.sleep(0.2)


def processes_of_job(job_id: str) -> list[int]:
    """Pids of live processes on this machine whose environment names the job (its trainer, wherever started)."""
    marker = f"BIOVIZ_JOB_ID={job_id}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if marker in (entry / "environ").read_bytes().split(b"\0"):
                stat = (entry / "stat").read_text()
                if stat[stat.rindex(")") + 2:].split()[0] not in ("Z", "X"):
                    found.append(int(entry.name))
        except OSError:
            continue
    return found


def job_processes_end(job_id: str, timeout: float = 30.0) -> list[int]:
    """Wait until no process names the job (its runner exits right after recording the end); what is left."""
    deadline = time.monotonic() + timeout
    while (left := processes_of_job(job_id)) and time.monotonic() < deadline:
        time.sleep(0.2)
    return left
