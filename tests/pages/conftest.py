"""What the page tests share: the app opened through its router (app.py) on a chosen page."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

ROOT = Path(__file__).resolve().parents[2]
APP = ROOT / "app.py"
DATA = ROOT / "tests" / "data"


class RoutedApp(AppTest):
    """AppTest of the router whose first ``run()`` opens on ``page`` (a script path, None = home).

    AppTest finds the pages ``st.navigation`` registers only after the router has run once,
    so the first run shows the home page, then switches; both runs see the URL parameters
    set before it, as a link opened in the browser does.
    """

    def __init__(self, page: str | None = None, timeout: float = 240):
        super().__init__(str(APP), default_timeout=timeout)
        self._opening = page

    def run(self, *, timeout: float | None = None) -> AppTest:
        if self._opening:
            page, self._opening = self._opening, None
            super().run(timeout=timeout)
            self.switch_page(page)
        return super().run(timeout=timeout)


def app_on(page: str | None = None, query: dict | None = None, timeout: float = 240) -> RoutedApp:
    """A new session of the app with ``query`` as its URL parameters, opening on ``page``.

    ``page`` is the file as ``ui.navigation.PAGES`` lists it (``app_pages/4_Neighbours.py``);
    None is the home page. Nothing runs until ``run()``.
    """
    at = RoutedApp(page, timeout)
    at.query_params.update(query or {})
    return at


@pytest.fixture(autouse=True)
def shared_test_folders(monkeypatch, tmp_path_factory):
    """Share tests/data and the tests' temporary folders as the server's data folders (BIOVIZ_DATA_DIRS).

    The page tests open those files by path, as a server's users open the folders its owner
    shares; any other path is refused by the app's path policy (bioviz.server_paths).
    """
    monkeypatch.setenv("BIOVIZ_DATA_DIRS", os.pathsep.join([str(DATA), str(tmp_path_factory.getbasetemp())]))


@pytest.fixture
def open_app():
    """``open_app(page=None, query=None, timeout=240)``: the app through its router (see :func:`app_on`)."""
    return app_on


@pytest.fixture
def app_home(shared_home, monkeypatch):
    """The session-wide BIOVIZ_HOME (parsed sources, vectors and layouts cached once) for page tests."""
    monkeypatch.setenv("BIOVIZ_HOME", str(shared_home))
    return shared_home
