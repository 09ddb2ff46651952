"""The app's start also starts umap-learn's numba warm-up (bioviz.warmup.start_background)."""

import pytest

from bioviz import warmup
from bioviz.views import fast_umap


@pytest.fixture
def no_processes(monkeypatch, tmp_home):
    """start_background without a real encoding process or UMAP warm-up: both recorded."""
    started = []
    monkeypatch.setattr(warmup.subprocess, "Popen", lambda *args, **kwargs: started.append("encoding") or "process")
    monkeypatch.setattr(fast_umap, "start_warm_up", lambda: started.append("umap"))
    return started


def test_the_app_start_warms_umap_up_in_the_background(monkeypatch, no_processes):
    monkeypatch.setenv(warmup.ENABLED_ENV, "1")
    assert warmup.start_background() == "process"
    assert sorted(no_processes) == ["encoding", "umap"]


def test_no_umap_warm_up_when_warm_ups_are_off(monkeypatch, no_processes):
    monkeypatch.setenv(warmup.ENABLED_ENV, "0")
    assert warmup.start_background() is None and no_processes == []
