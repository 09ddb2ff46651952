"""Upload clean-up removes only stored uploads, and never through a symlinked uploads folder (issue 32, finding 7).

With ``uploads/`` a link to another folder, storing an upload deleted a 60-day-old file
there (and, past the quota, a recent one); a stray file in the real folder went the same way.
"""

from __future__ import annotations

import os
import time

import pytest

from bioviz.errors import SourceError
from bioviz.paths import home
from bioviz.uploads import store_upload, uploads_dir


def aged(path, days: float):
    past = time.time() - days * 86_400
    os.utime(path, (past, past))
    return path


@pytest.fixture
def tight(tmp_home, monkeypatch):
    monkeypatch.setenv("BIOVIZ_UPLOAD_QUOTA_MB", "1")
    monkeypatch.setenv("BIOVIZ_UPLOAD_MAX_AGE_DAYS", "30")


def test_a_symlinked_uploads_folder_is_refused_and_nothing_there_is_touched(tight, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    old = elsewhere / "thesis-0123456789ab.tsv"
    old.write_text("precious")
    aged(old, 60)
    recent = elsewhere / "data.tsv"
    recent.write_bytes(b"x" * 900_000)
    (home() / "uploads").symlink_to(elsewhere)
    with pytest.raises(SourceError, match="symbolic link"):
        store_upload("mine.tsv", b"a\tb\n" * 100_000)
    assert old.read_text() == "precious" and recent.stat().st_size == 900_000
    assert sorted(p.name for p in elsewhere.iterdir()) == ["data.tsv", "thesis-0123456789ab.tsv"]


def test_clean_up_touches_only_stored_upload_names(tight):
    folder = uploads_dir()
    stray = folder / "README.txt"
    stray.write_text("the admin's note")
    aged(stray, 60)
    big = folder / "not-an-upload.tsv"
    big.write_bytes(b"x" * 900_000)
    expired = store_upload("old.tsv", b"a\tb\n")
    aged(expired, 60)
    stored = store_upload("new.tsv", b"c\td\n" * 100_000)
    assert stored.exists() and not expired.exists()  # the expired upload went
    assert stray.read_text() == "the admin's note" and big.stat().st_size == 900_000
