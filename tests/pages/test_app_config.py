"""The server settings the app ships in .streamlit/config.toml (read as Streamlit reads them)."""

from __future__ import annotations

import tomllib
from pathlib import Path

from streamlit import config as streamlit_config

CONFIG = Path(__file__).resolve().parents[2] / ".streamlit" / "config.toml"


def shipped() -> dict:
    with CONFIG.open("rb") as handle:
        return tomllib.load(handle)


def allowed_values(option: str) -> str:
    """The description Streamlit gives an option (it lists the allowed values)."""
    return streamlit_config._config_options_template[option].description


def test_the_file_watcher_is_off_so_the_project_tree_is_not_watched():
    # Watching the tree (.venv and BIOVIZ_HOME inside it) overflowed inotify's queue (issue 14, bug 4).
    watcher = shipped()["server"]["fileWatcherType"]
    assert watcher == "none"
    assert f'"{watcher}"' in allowed_values("server.fileWatcherType")


def test_the_toolbar_shows_viewer_options_only_so_no_deploy_button():
    mode = shipped()["client"]["toolbarMode"]
    assert mode in ("viewer", "minimal")
    assert f'"{mode}"' in allowed_values("client.toolbarMode")
