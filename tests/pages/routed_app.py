"""The app opened through its router (app.py) on a chosen page: shared by the page tests and the app's reliability tests.

tests/pages/conftest.py gives it as the ``open_app`` fixture; tests outside tests/pages
import it (``from tests.pages.routed_app import app_on``).
"""

from __future__ import annotations

from pathlib import Path

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
