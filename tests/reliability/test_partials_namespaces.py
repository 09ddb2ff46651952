"""Issue 41 finding 4: the partial-run sweep never removes the folder of a writer in another PID namespace.

A trainer in a container with host networking has the host's name but its own PID
namespace: its ``.owner.json`` said pid 2, which the sweep (in the host's namespace) saw dead
and removed the folder while the writer ran. The owner record now carries the boot id, the
PID namespace's inode and the start time; only a record from this boot and this namespace is
judged by its pid, any other only by its age.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

import pytest

from bioviz.models import run_partials
from bioviz.models.run_partials import ORPHAN_AGE_S, abandoned, record_owner, sweep_partials
from tests.support.partial_runs import partial_folder

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc/self/ns"), reason="needs Linux /proc")


def _dead_pid() -> int:
    ended = subprocess.Popen([sys.executable, "-c", "pass"])
    ended.wait()
    return ended.pid




def _here(pid: int, **changes) -> dict:
    """An owner record as a writer in this boot and this PID namespace writes it."""
    record = {"pid": pid, "start": "12345", "host": socket.gethostname(), "boot": run_partials.boot_id(),
              "pidns": run_partials.pid_namespace()}
    record.update(changes)
    return record


def test_the_owner_record_names_the_boot_the_namespace_and_the_start(tmp_path):
    partial = tmp_path / ".r.partial-x"
    partial.mkdir()
    record_owner(partial)
    data = json.loads((partial / ".owner.json").read_text())
    assert data["boot"] == open("/proc/sys/kernel/random/boot_id").read().strip()
    assert data["pidns"] == os.stat("/proc/self/ns/pid").st_ino
    assert data["pid"] == os.getpid() and data["start"]
    assert not abandoned(partial)


def test_a_writer_in_another_pid_namespace_is_not_swept_while_young(tmp_path):
    """Before the fix the sweep removed it: its pid is dead here, in the sweep's namespace."""
    other = partial_folder(tmp_path, "container", _here(_dead_pid(), pidns=run_partials.pid_namespace() + 1))
    assert sweep_partials(tmp_path) == []
    assert other.exists()


def test_records_that_cannot_be_judged_here_go_only_when_old(tmp_path):
    pid = _dead_pid()
    young = [partial_folder(tmp_path, "ns", _here(pid, pidns=1)),
             partial_folder(tmp_path, "boot", _here(pid, boot="other")),
             partial_folder(tmp_path, "legacy", {"pid": pid, "start": "12345", "host": socket.gethostname()})]
    old = [partial_folder(tmp_path, name, record, age_s=ORPHAN_AGE_S + 3600) for name, record in
           (("ns-old", _here(pid, pidns=1)), ("legacy-old", {"pid": pid, "host": socket.gethostname()}))]
    assert sorted(sweep_partials(tmp_path)) == sorted(old)
    assert all(p.exists() for p in young)
    # Outside the runs folder only a record judged by its pid can prove a folder abandoned.
    assert sweep_partials(tmp_path, orphan_age_s=None) == []


def test_a_dead_or_reused_writer_of_this_namespace_is_swept(tmp_path):
    dead = partial_folder(tmp_path, "dead", _here(_dead_pid()))
    reused = partial_folder(tmp_path, "reused", _here(os.getpid(), start="1"))
    live = partial_folder(tmp_path, "live", None)
    record_owner(live)
    assert sorted(sweep_partials(tmp_path, orphan_age_s=None)) == sorted([dead, reused])
    assert live.exists()
