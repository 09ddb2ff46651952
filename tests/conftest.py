"""Shared fixtures. Add fixtures here; do not change existing ones."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

DATA = Path(__file__).parent / "data"
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def data_dir() -> Path:
    """Directory of the tiny real fixtures."""
    return DATA


@pytest.fixture
def tmp_home(tmp_path, monkeypatch) -> Path:
    """A fresh BIOVIZ_HOME for one test."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("BIOVIZ_HOME", str(home))
    return home


@pytest.fixture(scope="session")
def shared_home(tmp_path_factory) -> Path:
    """A BIOVIZ_HOME shared by a whole test session (parsed sources and vectors cached once).

    Use it for tests that load the bundled ontologies or encode many names; set it with
    ``monkeypatch.setenv("BIOVIZ_HOME", str(shared_home))``.
    """
    return tmp_path_factory.mktemp("shared-home")
