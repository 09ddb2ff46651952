"""AppTest of the router's warm-up banner and start (ui/warmup_banner.py, app.py)."""

from __future__ import annotations

import json
import os
import time

import pytest

from bioviz import warmup
from ui import warmup_banner


@pytest.fixture
def mini_home(tmp_home, open_app, data_dir):
    """A session on the home page with the tiny fixture ontology selected (nothing large to parse)."""
    return lambda: open_app(None, {"source": str(data_dir / "mini.obo")}, timeout=60)


def write_state(home, **state):
    (home / warmup.STATE_FILE).write_text(json.dumps({
        "state": "running", "pid": os.getpid(), "model": "minilm", "levels": ["ICD-10 chapters", "HPO level 1"],
        "level": "HPO level 1", "level_index": 1, "done": 2_544, "total": 24_461, "encoded": 14_000, "rate": 42.4,
        "eta_s": 517.0,
        "started": time.time() - 60, "updated": time.time(), "error": None, **state}))


def banners(at) -> list[str]:
    return [element.proto.text for element in at.get("progress")]


def test_a_running_warm_up_shows_its_progress_on_every_page(tmp_home, mini_home):
    write_state(tmp_home)
    at = mini_home().run()
    assert not at.exception
    assert banners(at) == ["Preparing the bundled model's vectors in the background: HPO level 1 (level 2 of 2), "
                           "2,544 of 24,461 names · 42 names/s · about 9 min left. Pages work meanwhile; a level "
                           "not prepared yet is encoded when a page needs it."]
    assert at.metric, "the page itself is drawn under the banner"
    at.switch_page("app_pages/1_Train.py").run()
    assert not at.exception and len(banners(at)) == 1


@pytest.mark.parametrize("change", [{"state": "done", "eta_s": None}, {"state": "failed", "error": "disk full"},
                                    {"pid": 2**22 + 12345}])
def test_no_banner_once_the_warm_up_has_ended_or_died(tmp_home, mini_home, change):
    write_state(tmp_home, **change)
    at = mini_home().run()
    assert not at.exception and banners(at) == []


def test_while_a_level_loads_the_banner_says_so(tmp_home, mini_home):
    write_state(tmp_home, level="ICD-10 chapters", level_index=0, done=0, total=0, rate=None, eta_s=None)
    [text] = banners(mini_home().run())
    assert text.startswith("Preparing the bundled model's vectors in the background: loading ICD-10 chapters "
                           "(level 1 of 2).")


def test_no_banner_without_a_warm_up(tmp_home, mini_home):
    at = mini_home().run()
    assert not at.exception and banners(at) == [] and at.metric


def test_the_warm_up_starts_once_per_server_not_per_session(tmp_home, mini_home, monkeypatch):
    started = []
    monkeypatch.setattr(warmup, "start_background", lambda: started.append(1))
    warmup_banner.start_once.clear()
    try:
        mini_home().run()
        mini_home().run()
    finally:
        warmup_banner.start_once.clear()
    assert started == [1]
