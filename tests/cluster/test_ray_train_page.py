"""The Train page names the executor: the Ray cluster with its free resources, or one error line."""

from __future__ import annotations

import pytest
from cluster_support import free_port

from trainer.jobs.store import JobStore

PAGE = "app_pages/1_Train.py"
pytestmark = pytest.mark.timeout(600)


def train_page(open_app, data_dir):
    return open_app(PAGE, {"source": str(data_dir / "mini.obo"), "depth": "1"}).run()


def test_train_page_offers_the_ray_cluster(ray_head, tmp_home, data_dir, open_app, monkeypatch):
    monkeypatch.setenv("BIOVIZ_EXECUTOR", "ray")
    at = train_page(open_app, data_dir)
    assert not at.exception and not at.error
    captions = [c.value for c in at.caption]
    line = next(c for c in captions if c.startswith("Jobs run on:"))
    assert f"Ray cluster at {ray_head}" in line.replace("\\", "") and "CPUs free" in line and "no GPUs" in line
    launch = next(b for b in at.button if b.label == "Launch training")
    assert not launch.disabled


def test_train_page_refuses_an_unreachable_cluster_with_one_line(tmp_home, data_dir, open_app, monkeypatch):
    pytest.importorskip("ray", reason="ray is not installed (pip install -r requirements-ray.txt; CI has it)")
    monkeypatch.setenv("BIOVIZ_EXECUTOR", "ray")
    monkeypatch.setenv("RAY_ADDRESS", f"127.0.0.1:{free_port()}")  # nothing listens there
    at = train_page(open_app, data_dir)
    assert not at.exception
    assert len(at.error) == 1 and "is unreachable" in at.error[0].value
    launch = next(b for b in at.button if b.label == "Launch training")
    assert launch.disabled
    assert JobStore().list() == []


def test_train_page_says_jobs_run_here_by_default(tmp_home, data_dir, open_app, monkeypatch):
    monkeypatch.delenv("BIOVIZ_EXECUTOR", raising=False)
    at = train_page(open_app, data_dir)
    assert "Jobs run on: this machine" in [c.value for c in at.caption]
