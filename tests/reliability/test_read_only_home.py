"""A read-only BIOVIZ_HOME: commands work from what is cached and say once that nothing will be saved (issue 32, 2).

A real read-only mount (a bind mount remounted ``ro`` in a private mount namespace, so even
root gets EROFS), not an injected error: ``unshare -rm`` runs the child; where the machine does
not allow it the test is skipped. Before: ``list_runs`` (every page's model pickers) failed
creating ``runs/``, ``neighbours`` failed creating ``sources/`` or ``lexicon/``, and ``embed``
encoded every name again because the WAL vector database cannot be opened on a read-only disk.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

CHILD = Path(__file__).with_name("read_only_child.py")


def _namespaces() -> bool:
    if shutil.which("unshare") is None:
        return False
    return subprocess.run(["unshare", "-rm", "true"], capture_output=True).returncode == 0


def answer(stdout: str) -> dict:
    return {key: value for key, value in json.loads(stdout).items()
            if not any(word in key for word in ("second", "cache", "encoded"))}


@pytest.mark.skipif(sys.platform != "linux" or not _namespaces(), reason="needs unshare -rm (mount namespaces)")
def test_a_read_only_home_answers_from_its_caches_and_says_so_once(tmp_path):
    home, out = tmp_path / "home", tmp_path / "seen.json"
    env = {**os.environ, "BIOVIZ_HOME": str(home), "HF_HUB_OFFLINE": "1", "BIOVIZ_WARMUP": "0"}
    subprocess.run(["unshare", "-rm", sys.executable, str(CHILD), str(home), str(out)], env=env, check=True,
                   timeout=240)
    seen = json.loads(out.read_text())
    for name, (code, stdout, stderr) in seen["read_only"].items():
        assert code == 0, (name, stderr)
        assert stderr.count("nothing will be saved") == 1 and stderr.count("WARNING") == 1, (name, stderr)
        if name != "embed":  # the same answer (timings and cache counts aside)
            assert answer(stdout) == answer(seen["writable"][name][1]), name
    embed = dict(line.split(": ", 1) for line in seen["read_only"]["embed"][1].splitlines() if ": " in line)
    assert embed["encoded"] == "0" and embed["cache_hits"] == embed["names"]  # the cache read, not ignored
    assert seen["runs"] == 0  # the pickers' run list: empty, not an error
