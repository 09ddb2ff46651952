"""Uploads are checked before anything is written, and the uploads folder keeps within a quota and an age.

The folder is shared by every user of a server: storing a file removes expired uploads and,
past the quota, the oldest others, never one the storing session still uses.
"""

from __future__ import annotations

import os
import time

import pytest

from bioviz.errors import SourceError
from bioviz.uploads import make_room, store_upload, upload_max_age_seconds, upload_quota_bytes, uploads_dir
from test_app_support import DATA, no_traceback, open_app

KB = 1024


@pytest.fixture
def uploads(tmp_home, monkeypatch):
    """An empty uploads folder with a 1 MiB quota and a one-day age limit."""
    monkeypatch.setenv("BIOVIZ_UPLOAD_QUOTA_MB", "1")
    monkeypatch.setenv("BIOVIZ_UPLOAD_MAX_AGE_DAYS", "1")
    monkeypatch.delenv("BIOVIZ_DATA_DIRS", raising=False)
    return uploads_dir()


def stored(folder) -> set[str]:
    return {p.name for p in folder.iterdir()}


def aged(path, days: float):
    past = time.time() - days * 86_400
    os.utime(path, (past, past))
    return path


def test_a_file_over_the_limit_is_refused_before_anything_is_written(uploads):
    with pytest.raises(SourceError, match="the limit is 1 MiB"):
        store_upload("big.tsv", b"x" * (2 * 2**20), max_bytes=2**20)
    with pytest.raises(SourceError, match="kinds: tsv, csv"):
        store_upload("pairs.obo", b"x", allowed=(".tsv", ".csv"))
    assert stored(uploads) == set()


def test_the_quota_removes_the_oldest_uploads_but_not_those_in_use(uploads):
    first = aged(store_upload("first.tsv", b"1" * 400 * KB), 0.3)
    second = aged(store_upload("second.tsv", b"2" * 400 * KB), 0.2)
    third = store_upload("third.tsv", b"3" * 400 * KB, keep=[second])  # 1.2 MiB: the oldest not in use goes
    assert stored(uploads) == {second.name, third.name} and not first.exists()
    with pytest.raises(SourceError, match="uploads are full"):
        store_upload("fourth.tsv", b"4" * 400 * KB, keep=[second, third])
    assert stored(uploads) == {second.name, third.name}, "a refused upload leaves nothing behind"


def test_expired_uploads_go_when_another_is_stored_unless_in_use(uploads):
    old = aged(store_upload("old.tsv", b"o" * KB), 2)
    old_in_use = aged(store_upload("old-in-use.tsv", b"u" * KB), 2)
    fresh = store_upload("fresh.tsv", b"f" * KB, keep=[old_in_use])
    assert stored(uploads) == {old_in_use.name, fresh.name} and not old.exists()
    assert store_upload("fresh.tsv", b"f" * KB) == fresh, "the same content is the same upload"


def test_a_file_larger_than_the_whole_quota_is_refused_at_once(uploads):
    store_upload("kept.tsv", b"k" * KB)
    with pytest.raises(SourceError, match="at most 1 MiB of uploads"):
        make_room(2 * 2**20)
    assert len(stored(uploads)) == 1


@pytest.mark.parametrize("name, value", [("BIOVIZ_UPLOAD_QUOTA_MB", "lots"), ("BIOVIZ_UPLOAD_QUOTA_MB", "-5"),
                                         ("BIOVIZ_UPLOAD_MAX_AGE_DAYS", "nan"), ("BIOVIZ_UPLOAD_MAX_AGE_DAYS", "0")])
def test_bad_settings_are_one_line_errors(uploads, monkeypatch, name, value):
    monkeypatch.setenv(name, value)
    with pytest.raises(SourceError, match=f"{name} must be a positive number"):
        upload_quota_bytes() if "QUOTA" in name else upload_max_age_seconds()


def test_a_benchmark_over_its_limit_is_refused_on_the_page_and_never_stored(uploads, fake_eval_models, monkeypatch):
    monkeypatch.setenv("BIOVIZ_UPLOAD_QUOTA_MB", "100")
    monkeypatch.setenv("BIOVIZ_DATA_DIRS", str(DATA))
    at = open_app("app_pages/6_Evaluation.py", {"source": str(DATA / "mini.obo"), "depth": "1"}).run()
    too_big = b"a\tb\t1\n" * (21 * 2**20 // 6)  # 21 MiB: under the uploader's 200, over a benchmark's 20
    at.file_uploader(key="_eval_upload").set_value(("pairs.tsv", too_big, "text/tab-separated-values")).run()
    no_traceback(at)
    assert any("a benchmark file is at most 20 MiB" in e.value for e in at.error), [e.value for e in at.error]
    assert stored(uploads) == set()
    at.file_uploader(key="_eval_upload").set_value(("pairs.tsv", b"heart attack\tmyocardial infarction\t4\n",
                                                     "text/tab-separated-values")).run()
    no_traceback(at)
    assert len(stored(uploads)) == 1


def test_the_home_page_keeps_the_sessions_source_when_making_room(uploads, monkeypatch):
    monkeypatch.setenv("BIOVIZ_UPLOAD_QUOTA_MB", "0.02")  # 20 KiB
    others = aged(store_upload("others.tsv", b"o" * 8 * KB), 0.5)  # another user's, older
    table = (DATA / "views_table.tsv").read_bytes()
    at = open_app(None).run()
    at.file_uploader(key="_home_upload").set_value(("mine.tsv", table, "text/tab-separated-values")).run()
    no_traceback(at)
    mine = at.session_state["source"]
    assert "mine" in mine and os.path.exists(mine) and not at.error
    padded = table + b"\n" * (12 * KB)  # 8 + 1.5 + 13.5 KiB: past the quota
    at.file_uploader(key="_home_upload").set_value(("second.tsv", padded, "text/tab-separated-values")).run()
    no_traceback(at)
    assert os.path.exists(mine), "the upload this session still shows was kept"
    assert not others.exists(), "the oldest upload of no use to this session made room"
