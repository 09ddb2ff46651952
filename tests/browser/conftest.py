"""Fixtures the real-browser tests share: one app server for the session, a chromium per file.

The server's BIOVIZ_HOME outlives a test file, so the level's vectors encoded by the first
file that opens a page are cached for the next ones (``BIOVIZ_SCREENSHOT_HOME`` reuses a
home whose vectors are already cached).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.browser.support import ROOT, chromium, require_browser, streamlit_app


@pytest.fixture(scope="session")
def server(tmp_path_factory):
    """The app (``streamlit run app.py``) on a free localhost port: its URL."""
    require_browser()
    home = os.environ.get("BIOVIZ_SCREENSHOT_HOME") or str(tmp_path_factory.mktemp("browser-home"))
    with streamlit_app(home, tmp_path_factory.mktemp("browser-log") / "streamlit.log") as url:
        yield url


@pytest.fixture(scope="module")
def browser(server):
    # Per module: playwright's sync API runs one event loop per thread, and the other files
    # start their own (test_figure_bounds, test_train_flow).
    with chromium() as browser:
        yield browser


@pytest.fixture(scope="session")
def shots(tmp_path_factory) -> Path:
    """Where screenshots go: ``BIOVIZ_SCREENSHOT_DIR`` (relative to the project) or a temp dir."""
    chosen = os.environ.get("BIOVIZ_SCREENSHOT_DIR")
    return (ROOT / chosen) if chosen else tmp_path_factory.mktemp("screenshots")
