"""A hub id in a link downloads nothing until the user says so; one typed in the sidebar loads as asked.

The server is made "online" and the download itself is replaced by a recorder, so nothing
leaves the machine: the test checks when the app would start a download.
"""

from __future__ import annotations

import pytest

from bioviz.errors import ModelError
from test_app_support import DATA, no_traceback, open_app, share

PAGE = "app_pages/4_Neighbours.py"
LINK = {"source": str(DATA / "mini.obo"), "depth": "1", "two": "0", "query": "asthma"}
QUESTION = "Download someone/huge-repo from the Hugging Face Hub?"


@pytest.fixture
def downloads(tmp_home, monkeypatch, tmp_path):
    """Hub ids the model loader was asked to fetch (online, with an empty Hugging Face cache)."""
    from bioviz.models import model_spec
    from ui import models

    asked = []

    def fetch(repo_id):
        asked.append(repo_id)
        raise ModelError(f"{repo_id} was not downloaded (test)")

    share(monkeypatch, DATA)
    monkeypatch.setattr(models, "hub_offline", lambda: False)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf-cache"))
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_CACHE", str(tmp_path / "hf-cache"))
    monkeypatch.setattr(model_spec, "hub_snapshot", fetch)
    return asked


def buttons(at) -> list[str]:
    return [b.label for b in at.button]


def test_a_hub_id_from_a_link_waits_for_the_users_go_ahead(downloads):
    at = open_app(PAGE, {**LINK, "model_a": "someone/huge-repo"}).run()
    no_traceback(at)
    assert downloads == [], "nothing is fetched before the user agrees"
    assert QUESTION in buttons(at) and not at.dataframe
    assert any("downloads the whole repository" in w.value for w in at.warning)
    next(b for b in at.button if b.label == QUESTION).click().run()
    no_traceback(at)
    assert downloads and set(downloads) == {"someone/huge-repo"}
    assert any("was not downloaded (test)" in e.value for e in at.error)


def test_only_a_download_needs_the_question(downloads, tmp_path, monkeypatch):
    from ui import models

    at = open_app(PAGE, {**LINK, "model_a": "someone/huge-repo"}).run()
    assert QUESTION in buttons(at) and downloads == []
    # in the local Hugging Face cache: loaded at once
    cached = tmp_path / "hf-cache" / "models--someone--cached-repo"
    (cached / "snapshots" / "abc123").mkdir(parents=True)
    (cached / "snapshots" / "abc123" / "config.json").write_text("{}")
    (cached / "refs").mkdir()
    (cached / "refs" / "main").write_text("abc123")
    at = open_app(PAGE, {**LINK, "model_a": "someone/cached-repo"}).run()
    no_traceback(at)
    assert not any(label.startswith("Download someone") for label in buttons(at))
    assert downloads == ["someone/cached-repo"], "loaded at once (the recorder stands in for the cache)"
    # offline nothing can be downloaded: the loader's own one-line error, no question
    monkeypatch.setattr(models, "hub_offline", lambda: True)
    at = open_app(PAGE, {**LINK, "model_a": "someone/huge-repo"}).run()
    no_traceback(at)
    assert not any(label.startswith("Download") for label in buttons(at))
    assert "someone/huge-repo" in downloads, "the loader (offline: from the cache only) was asked"


def test_a_hub_id_typed_in_the_sidebar_loads_at_once(downloads):
    at = open_app(PAGE, LINK).run()
    at.text_input(key="_custom_model").set_value("someone/other-repo").run()
    next(b for b in at.button if b.label == "Use model").click().run()
    no_traceback(at)
    assert downloads and set(downloads) == {"someone/other-repo"}
    assert not any(label.startswith("Download someone") for label in buttons(at))
