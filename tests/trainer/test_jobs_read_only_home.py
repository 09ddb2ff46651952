"""``python -m trainer jobs ...`` on a read-only BIOVIZ_HOME: one line saying why, exit 2 (issue 32, finding 2).

A real read-only mount (``unshare -rm``: a bind mount remounted ``ro`` in a private mount
namespace, so even root gets EROFS), as tests/reliability/test_read_only_home.py does; skipped
where the machine does not allow it. Before: ``error: job database <home>/jobs.sqlite: unable to
open database file``, the database's own words.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
NOTICE = "error: Jobs need a writable BIOVIZ_HOME"
COMMANDS = (["list"], ["status", "0123456789ab"], ["delete", "0123456789ab"],
            ["submit", "--source", str(ROOT / "tests" / "data" / "mini.obo"), "--depth", "1"])


def _namespaces() -> bool:
    if shutil.which("unshare") is None:
        return False
    return subprocess.run(["unshare", "-rm", "true"], capture_output=True).returncode == 0


@pytest.mark.slow  # each command is a fresh `python -m trainer` (seconds of imports)
@pytest.mark.skipif(sys.platform != "linux" or not _namespaces(), reason="needs unshare -rm (mount namespaces)")
@pytest.mark.parametrize("with_database", [True, False], ids=["database", "no-database"])
def test_jobs_commands_on_a_read_only_home_say_why_in_one_line(tmp_path, with_database):
    home = tmp_path / "home"
    home.mkdir()
    env = {**os.environ, "BIOVIZ_HOME": str(home), "HF_HUB_OFFLINE": "1", "BIOVIZ_WARMUP": "0",
           "PYTHONPATH": str(ROOT)}
    python = shlex.quote(sys.executable)
    if with_database:  # a home that has held jobs: its database is there, but a WAL database opens only writable
        subprocess.run([sys.executable, "-m", "trainer", "jobs", "list"], env=env, cwd=ROOT, check=True,
                       capture_output=True, timeout=120)
        assert (home / "jobs.sqlite").is_file()
    runs = "; ".join(f"{python} -m trainer jobs {shlex.join(argv)} 2>&1; echo \"exit $?\"; echo ---"
                     for argv in COMMANDS)
    script = f"mount --bind {shlex.quote(str(home))} {shlex.quote(str(home))} && " \
             f"mount -o remount,bind,ro {shlex.quote(str(home))} && {{ {runs}; }}"
    proc = subprocess.run(["unshare", "-rm", "sh", "-c", script], env=env, cwd=ROOT, capture_output=True, text=True,
                          timeout=300)
    outputs = [part.strip() for part in proc.stdout.split("---") if part.strip()]
    assert len(outputs) == len(COMMANDS), proc.stdout + proc.stderr
    for argv, output in zip(COMMANDS, outputs):
        *lines, code = output.splitlines()
        assert code == "exit 2", (argv, output)
        assert len(lines) == 1 and lines[0].startswith(NOTICE), (argv, output)
        assert f"{home} is read-only or not writable" in lines[0] and "database" not in lines[0], (argv, output)
