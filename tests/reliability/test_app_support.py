"""What the app's reliability tests share (test_app_*.py): the app through its router, and the data folders.

The router helper itself is tests/pages/routed_app.py, the one the page tests use.
"""

from __future__ import annotations

import os

from tests.pages.routed_app import DATA, ROOT, app_on

__all__ = ["DATA", "ROOT", "no_traceback", "open_app", "share"]


def open_app(page: str | None = None, query: dict | None = None, timeout: float = 120):
    """A new session of the app with ``query`` as its URL, opening on ``page`` (nothing runs until ``run()``)."""
    return app_on(page, query, timeout)


def share(monkeypatch, *folders) -> None:
    """Make ``folders`` the server's data folders (``BIOVIZ_DATA_DIRS``)."""
    monkeypatch.setenv("BIOVIZ_DATA_DIRS", os.pathsep.join(str(f) for f in folders))


def no_traceback(at) -> None:
    """The run raised nothing the page did not turn into a message."""
    assert not at.exception, [e.value for e in at.exception]
