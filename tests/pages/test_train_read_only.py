"""The Train page on a read-only BIOVIZ_HOME (issue 32, finding 9): it renders, says once why no job can start.

A real read-only mount (``unshare -rm``: a bind mount remounted ``ro`` in a private mount
namespace, so even root gets EROFS), as tests/reliability/test_read_only_home.py does for the
command line; skipped where the machine does not allow it. Before: the job panel showed
``job database .../jobs.sqlite: unable to open database file`` and the Launch button stayed
enabled, to fail on a click; opened at /Train it also showed the app's general "nothing will be
saved" above its own line (two notices of one thing).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

CHILD = Path(__file__).with_name("read_only_train_child.py")
NOTICE = "Jobs need a writable BIOVIZ_HOME"
GENERAL = "nothing will be saved"  # the app's notice on every other page (app.py)


def _namespaces() -> bool:
    if shutil.which("unshare") is None:
        return False
    return subprocess.run(["unshare", "-rm", "true"], capture_output=True).returncode == 0


@pytest.mark.slow  # over 5 s in a full run (CI lists the times)
@pytest.mark.skipif(sys.platform != "linux" or not _namespaces(), reason="needs unshare -rm (mount namespaces)")
def test_the_train_page_on_a_read_only_home_renders_and_says_once_that_no_job_can_be_launched(tmp_path):
    home, out = tmp_path / "home", tmp_path / "seen.json"
    home.mkdir()
    env = {**os.environ, "BIOVIZ_HOME": str(home), "HF_HUB_OFFLINE": "1", "BIOVIZ_WARMUP": "0"}
    subprocess.run(["unshare", "-rm", sys.executable, str(CHILD), str(home), str(out)], env=env, check=True,
                   timeout=240)
    seen = json.loads(out.read_text())
    assert seen["writable"]["exception"] == [] and seen["writable"]["launch_enabled"] == [True]
    for mode in ("read_only", "read_only_pretrain", "read_only_direct"):
        page = seen[mode]
        assert page["exception"] == [], (mode, page)
        notices = [text for text in page["alerts"] if NOTICE in text]
        assert len(notices) == 1 and "\n" not in notices[0].strip(), (mode, page["alerts"])
        assert not any("job database" in text for text in page["errors"]), (mode, page["errors"])
        assert page["launch_enabled"] == [False], (mode, page)
        # Only the Train line: the app's general "nothing will be saved" would say it twice.
        assert not any(GENERAL in text for text in page["alerts"]), (mode, page["alerts"])
    home_notices = [text for text in seen["then_home"]["alerts"] if GENERAL in text]
    assert len(home_notices) == 1 and not any(NOTICE in text for text in seen["then_home"]["alerts"])
    assert "jobs.sqlite" not in seen["created"]
