"""Issue 41 finding 7: on an empty read-only home a level of more than CLAIM_MIN names still answers.

Before: ``bioviz neighbours heart --source icd10 --depth 1 --model char-tfidf`` on an empty
read-only home exited 2 with ``Read-only file system (<home>/encoding)``: the claim on the
level's encoding (a lock file under ``encoding/``, :mod:`bioviz.models.shared_encoding`) could
not be created. Now the encoding goes on unclaimed (no other process can share it through a
read-only home), after the one "nothing will be saved" warning. A real read-only bind mount in
a private mount namespace (``unshare -rm``), as in test_read_only_home.py; the trigram encoder
stands in for a model so no weights are loaded.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CHILD = """
import contextlib, io, sys
sys.path[:0] = [{root!r}, {root!r} + "/tests/reliability"]
import pytest
from state_support import use_trigram_encoder
from bioviz.cli import main
use_trigram_encoder(pytest.MonkeyPatch())
code = main(["neighbours", "heart disorder 1", "--source", {source!r}, "--depth", "1", "--no-expand", "-k", "3",
             "--quiet", "--json"])
print("exit", code)
"""


def _namespaces() -> bool:
    if shutil.which("unshare") is None:
        return False
    return subprocess.run(["unshare", "-rm", "true"], capture_output=True).returncode == 0


def _source(path: Path) -> Path:
    """Six groups of fifty: a level of 300 names, over the 200 from which an encoding is claimed."""
    words = ["heart", "lung", "liver", "kidney", "skin", "bone"]
    rows = ["concept_id\tname\tparent_id", "R\troot\t"]
    rows += [f"G{k}\t{word} diseases\tR" for k, word in enumerate(words)]
    rows += [f"C{i}\t{words[i % 6]} disorder {i}\tG{i % 6}" for i in range(300)]
    path.write_text("\n".join(rows) + "\n")
    return path


@pytest.mark.skipif(sys.platform != "linux" or not _namespaces(), reason="needs unshare -rm (mount namespaces)")
def test_an_empty_read_only_home_answers_a_level_worth_claiming(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    code = CHILD.format(root=str(ROOT), source=str(_source(tmp_path / "big.tsv")))
    mount = f"mount --bind {home} {home} && mount -o remount,bind,ro {home}"
    env = {**os.environ, "BIOVIZ_HOME": str(home), "HF_HUB_OFFLINE": "1", "BIOVIZ_WARMUP": "0"}
    done = subprocess.run(["unshare", "-rm", "sh", "-c", f'{mount} && exec "$0" -c "$1"', sys.executable, code],
                          env=env, capture_output=True, text=True, timeout=240, check=False)
    assert done.stdout.strip().endswith("exit 0"), done.stderr[-2000:]
    assert '"heart disorder' in done.stdout
    assert done.stderr.count("nothing will be saved") == 1 and "error:" not in done.stderr, done.stderr
    assert not any(home.iterdir()), "nothing written"
