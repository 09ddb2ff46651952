"""Run in a private mount namespace by test_train_read_only.py: the Train page on a read-only home.

``python tests/pages/read_only_train_child.py HOME OUT``: opens the Train page once on a
writable HOME (the fixture ontology parsed and cached), removes the job database, bind-mounts
HOME onto itself read-only (a real EROFS, even for root: chmod does not stop root) and opens
the page again, in both modes; writes what each run showed to OUT as JSON.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests.pages.routed_app import DATA, app_on  # noqa: E402

PAGE = "app_pages/1_Train.py"


def seen(at) -> dict:
    """What a run of the page showed: its tracebacks, alerts and whether the launch buttons are enabled."""
    return {"exception": [e.value for e in at.exception],
            "alerts": [e.value for kind in ("error", "warning", "info") for e in getattr(at, kind)],
            "errors": [e.value for e in at.error],
            "launch_enabled": [not b.disabled for b in at.button if b.label.startswith("Launch")]}


def main_child(home: Path, out: Path) -> None:
    query = {"source": str(DATA / "mini.obo")}
    result = {"writable": seen(app_on(PAGE, query, timeout=120).run())}
    (home / "jobs.sqlite").unlink()  # the job database cannot be created on the read-only home
    shutil.rmtree(home / "jobs", ignore_errors=True)
    subprocess.run(f"mount --bind {home} {home} && mount -o remount,bind,ro {home}", shell=True, check=True)
    from bioviz import paths  # here: the notice is per process, reset for the read-only half

    paths._refusal.clear()
    at = app_on(PAGE, query, timeout=120).run()
    result["read_only"] = seen(at)
    at.radio(key="train_mode").set_value("Pretrain a base model").run()
    result["read_only_pretrain"] = seen(at)
    # Opened at /Train directly: the router's first run is this page, with no notice said yet this
    # session (AppTest's first run is the home page: the flag it set is taken back).
    paths._refusal.clear()
    direct = app_on(None, query, timeout=120).run()
    del direct.session_state["_home_notice"]
    result["read_only_direct"] = seen(direct.switch_page(PAGE).run())
    result["then_home"] = seen(direct.switch_page("app_pages/0_Home.py").run())  # the general notice, here
    result["created"] = sorted(p.name for p in home.iterdir())
    out.write_text(json.dumps(result))


if __name__ == "__main__":
    os.environ.setdefault("BIOVIZ_DATA_DIRS", str(DATA))
    main_child(Path(sys.argv[1]), Path(sys.argv[2]))
