"""What the page tests share: the app opened through its router (app.py) on a chosen page."""

from __future__ import annotations

import os

import pytest

from tests.pages.routed_app import DATA, app_on


@pytest.fixture(autouse=True)
def shared_test_folders(monkeypatch, tmp_path_factory):
    """Share tests/data and the tests' temporary folders as the server's data folders (BIOVIZ_DATA_DIRS).

    The page tests open those files by path, as a server's users open the folders its owner
    shares; any other path is refused by the app's path policy (bioviz.server_paths).
    """
    monkeypatch.setenv("BIOVIZ_DATA_DIRS", os.pathsep.join([str(DATA), str(tmp_path_factory.getbasetemp())]))


@pytest.fixture
def open_app():
    """``open_app(page=None, query=None, timeout=240)``: the app through its router (:func:`tests.pages.routed_app.app_on`)."""
    return app_on


@pytest.fixture
def app_home(shared_home, monkeypatch):
    """The session-wide BIOVIZ_HOME (parsed sources, vectors and layouts cached once) for page tests."""
    monkeypatch.setenv("BIOVIZ_HOME", str(shared_home))
    return shared_home
