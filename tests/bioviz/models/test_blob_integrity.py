"""Issue 41 finding 8b: a blob changed in place is noticed when a run that links it is loaded.

Runs hard-link their large files from ``BIOVIZ_HOME/blobs/<sha256>``, so writing into one of
them in place changed every run that links it, and nothing noticed at load. Now blobs are
stored read-only (0444: a casual writer is refused; root is not, hence the check), and loading
a run checks each of its linked files against the digest its blob is named by (once per file
state): a mismatch sets the blob aside and the load is one line naming the run.
"""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

import pytest

from bioviz.cache_files import CORRUPT_MARK
from bioviz.errors import ModelError
from bioviz.models import blob_store
from bioviz.models.blob_store import blobs_dir, check_run_blobs, file_digest, share_files, sweep_blobs
from bioviz.models.model_spec import ModelSpec
from bioviz.models.registry import load_encoder

BIG = blob_store.MIN_SHARED_BYTES


def _run(folder: Path, weights: bytes) -> Path:
    folder.mkdir(parents=True)
    (folder / "model.safetensors").write_bytes(weights)
    (folder / "config.json").write_text("{}")
    return folder


def _write_in_place(path: Path) -> None:
    os.chmod(path, 0o644)  # what a careless writer with the rights does first (root needs not)
    with open(path, "r+b") as handle:
        handle.seek(100)
        handle.write(b"\xff" * 8)


@pytest.fixture
def shared(tmp_home, tmp_path):
    weights = os.urandom(BIG + 5)
    a, b = _run(tmp_path / "a", weights), _run(tmp_path / "b", weights)
    share_files(a), share_files(b)
    return a, b, blobs_dir() / file_digest(a / "model.safetensors")


def test_blobs_are_stored_read_only(shared):
    a, b, blob = shared
    assert stat.S_IMODE(os.stat(blob).st_mode) == 0o444
    assert os.stat(a / "model.safetensors").st_ino == os.stat(blob).st_ino
    check_run_blobs(a, "run a")  # sound: nothing said


def test_a_blob_written_in_place_fails_the_load_of_every_run_linking_it_in_one_line(shared):
    a, b, blob = shared
    check_run_blobs(a, "run a")  # verified once, remembered by the file's state
    _write_in_place(a / "model.safetensors")
    with pytest.raises(ModelError) as caught:
        load_encoder(ModelSpec(str(a), "run", a, "run a · 1a2b"))
    message = str(caught.value)
    assert "run a · 1a2b" in message and "model.safetensors" in message and "\n" not in message
    assert not blob.exists(), "the bad blob is set aside: no new run links it"
    assert [p.name.split(CORRUPT_MARK)[0] for p in blobs_dir().iterdir()] == [blob.name]
    with pytest.raises(ModelError, match="run b"):  # b links the same bytes: damaged too
        check_run_blobs(b, "run b")
    shutil.rmtree(a), shutil.rmtree(b)
    assert len(sweep_blobs()) == 1 and not any(blobs_dir().iterdir()), "the set-aside blob goes with its last run"


def test_a_run_with_its_own_copies_is_not_checked(tmp_home, tmp_path):
    a = _run(tmp_path / "own", os.urandom(BIG))
    check_run_blobs(a, "own")  # no store, no links: nothing to check
