"""What the app's reliability tests share (test_app_*.py): the app opened through its router, on a chosen page.

The same opening as tests/pages/conftest.py (AppTest finds the pages ``st.navigation``
registers only after the router has run once), for tests that live outside tests/pages.
"""

from __future__ import annotations

import os
from pathlib import Path

from streamlit.testing.v1 import AppTest

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data"


class RoutedApp(AppTest):
    """AppTest of app.py whose first ``run()`` opens on ``page`` (a script path; None: the home page)."""

    def __init__(self, page: str | None = None, timeout: float = 120):
        super().__init__(str(ROOT / "app.py"), default_timeout=timeout)
        self._opening = page

    def run(self, *, timeout: float | None = None) -> AppTest:
        if self._opening:
            page, self._opening = self._opening, None
            super().run(timeout=timeout)
            self.switch_page(page)
        return super().run(timeout=timeout)


def open_app(page: str | None = None, query: dict | None = None, timeout: float = 120) -> RoutedApp:
    """A new session of the app with ``query`` as its URL, opening on ``page`` (nothing runs until ``run()``)."""
    at = RoutedApp(page, timeout)
    at.query_params.update(query or {})
    return at


def share(monkeypatch, *folders) -> None:
    """Make ``folders`` the server's data folders (``BIOVIZ_DATA_DIRS``)."""
    monkeypatch.setenv("BIOVIZ_DATA_DIRS", os.pathsep.join(str(f) for f in folders))


def no_traceback(at) -> None:
    """The run raised nothing the page did not turn into a message."""
    assert not at.exception, [e.value for e in at.exception]
