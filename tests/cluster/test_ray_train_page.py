"""The Train page names the executor: the Ray cluster with its free resources, or one error line."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from cluster_support import free_port
from streamlit.testing.v1 import AppTest

from bioviz.errors import BiovizError
from trainer.jobs.queue import Worker
from trainer.jobs.store import JobStore

ROOT = Path(__file__).resolve().parents[2]
PAGE = "app_pages/1_Train.py"
pytestmark = [pytest.mark.timeout(600), pytest.mark.slow]  # a real local Ray head: tens of seconds each


@pytest.fixture
def train_page(tmp_home, data_dir, monkeypatch):
    """``train_page()``: a fresh session of the Train page, entered from app.py, on the mini ontology."""
    monkeypatch.setenv("BIOVIZ_DATA_DIRS", str(data_dir))  # the server folder the fixture ontology is read from

    def open_page() -> AppTest:
        at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=240)
        at.query_params["source"] = str(data_dir / "mini.obo")
        at.run()
        return at.switch_page(PAGE).run()

    return open_page


def test_train_page_offers_the_ray_cluster(ray_head, train_page, monkeypatch):
    monkeypatch.setenv("BIOVIZ_EXECUTOR", "ray")
    at = train_page()
    assert not at.exception and not [e for e in at.error if "Ray" in e.value]
    captions = [c.value for c in at.caption]
    line = next(c for c in captions if c.startswith("Jobs run on:"))
    assert f"Ray cluster at {ray_head}" in line.replace("\\", "") and "CPUs free" in line and "no GPUs" in line
    launch = next(b for b in at.button if b.label == "Launch training")
    assert not launch.disabled


def test_train_page_refuses_an_unreachable_cluster_with_one_line(train_page, data_dir, monkeypatch):
    pytest.importorskip("ray", reason="ray is not installed (pip install -r requirements-ray.txt; CI has it)")
    monkeypatch.setenv("BIOVIZ_EXECUTOR", "ray")
    monkeypatch.setenv("RAY_ADDRESS", f"127.0.0.1:{free_port()}")  # nothing listens there
    at = train_page()
    assert not at.exception
    # (the page's other error: the form's default 15 shots are more than the mini ontology's classes give)
    ray_errors = [e.value for e in at.error if "Ray" in e.value]
    assert ray_errors == [f"the Ray cluster at {os.environ['RAY_ADDRESS']} is unreachable (Connection refused)"]
    launch = next(b for b in at.button if b.label == "Launch training")
    assert launch.disabled
    # What the button would do, refused the same way before any job exists.
    with pytest.raises(BiovizError, match="is unreachable"):
        Worker().submit({"source": str(data_dir / "mini.obo"), "depth": 1, "shots": 1}, device="cpu")
    assert JobStore().list() == []


def test_train_page_says_jobs_run_here_by_default(train_page, monkeypatch):
    monkeypatch.delenv("BIOVIZ_EXECUTOR", raising=False)
    at = train_page()
    assert "Jobs run on: this machine" in [c.value for c in at.caption]
