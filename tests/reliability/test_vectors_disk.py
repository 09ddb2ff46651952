"""Converting a vectors file under a home the disk refuses, and what dead conversions leave (issue 41, 7 and 8a).

A full or read-only home made an unconverted vectors file unusable with a raw ``OSError`` naming
no file (and on a read-only home the cleanup's ``EROFS`` replaced the first error); now it is one
line naming the vectors file and the folder, and a copy converted before still opens. A
conversion killed mid-way left its temporary file for good; now the next conversion in the
folder removes the temporary files of dead conversions and keeps those of running ones.
"""

import builtins
import errno
import fcntl
import io
import os
import time
from pathlib import Path

import numpy as np
import pytest

from bioviz.errors import ModelError
from bioviz.models import vectors_file
from bioviz.models.vectors_file import open_vectors
from tests.reliability.state_support import _FillingFile, full_disk

NAMES = ["heart attack", "asthma", "pneumonia"]


@pytest.fixture(autouse=True)
def _fresh_process(monkeypatch):
    """Nothing opened yet in this process (the open files are kept per content, across tests)."""
    monkeypatch.setattr(vectors_file, "_OPEN", {})


def _write(path: Path) -> Path:
    np.savez(path, names=np.array(NAMES), vectors=np.random.default_rng(0).normal(size=(3, 5)).astype(np.float32))
    return path


def _temps(home: Path) -> list[str]:
    folder = home / "vectors"
    return sorted(p.name for p in folder.iterdir() if p.suffix in (".part", ".tmp")) if folder.is_dir() else []


def _read_only(monkeypatch, folder: Path) -> None:
    """Every write under ``folder`` (create, open for writing, rename, remove) fails as on a read-only mount."""
    folder = folder.resolve()

    def refuse(path) -> None:
        if Path(os.fspath(path)).resolve().is_relative_to(folder):
            raise OSError(errno.EROFS, os.strerror(errno.EROFS), os.fspath(path))

    real_open, real_os_open = builtins.open, os.open

    def fake_open(file, mode="r", *args, **kwargs):
        if isinstance(file, (str, os.PathLike)) and any(c in mode for c in "wax+"):
            refuse(file)
        return real_open(file, mode, *args, **kwargs)

    def fake_os_open(path, flags, *args, **kwargs):
        if flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT):
            refuse(path)
        return real_os_open(path, flags, *args, **kwargs)

    def wrap(real):
        def fake(path, *args, **kwargs):
            refuse(path)
            return real(path, *args, **kwargs)
        return fake

    monkeypatch.setattr(builtins, "open", fake_open)
    monkeypatch.setattr(io, "open", fake_open)
    monkeypatch.setattr(os, "open", fake_os_open)
    for name in ("unlink", "rename", "replace", "mkdir"):
        monkeypatch.setattr(os, name, wrap(getattr(os, name)))


def test_a_read_only_home_refuses_a_conversion_in_one_line(tmp_home, tmp_path, monkeypatch):
    file = _write(tmp_path / "v.npz")
    (tmp_home / "vectors").mkdir()
    _read_only(monkeypatch, tmp_home)
    with pytest.raises(ModelError) as caught:
        open_vectors(file)
    assert str(caught.value) == f"cannot convert v.npz under {tmp_home / 'vectors'}: Read-only file system"


def test_a_read_only_home_still_opens_a_copy_converted_before(tmp_home, tmp_path, monkeypatch):
    file = _write(tmp_path / "v.npz")
    first = open_vectors(file)
    monkeypatch.setattr(vectors_file, "_OPEN", {})  # another process: nothing opened yet
    _read_only(monkeypatch, tmp_home)
    again = open_vectors(file)
    assert again.names == first.names and np.array_equal(again.vectors, first.vectors)


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes through a folder's mode bits")
def test_a_folder_without_write_permission_refuses_a_conversion_in_one_line(tmp_home, tmp_path):
    file = _write(tmp_path / "v.npz")
    (tmp_home / "vectors").mkdir()
    (tmp_home / "vectors").chmod(0o555)
    try:
        with pytest.raises(ModelError, match=r"^cannot convert v\.npz under .*vectors: Permission denied$"):
            open_vectors(file)
    finally:
        (tmp_home / "vectors").chmod(0o755)


def test_a_full_disk_while_writing_names_is_one_line_and_leaves_nothing(tmp_home, tmp_path, monkeypatch):
    file = _write(tmp_path / "v.npz")
    (tmp_home / "vectors").mkdir()
    with full_disk(monkeypatch, tmp_home / "vectors", room=8), pytest.raises(ModelError) as caught:
        open_vectors(file)
    assert str(caught.value) == f"cannot convert v.npz under {tmp_home / 'vectors'}: No space left on device"
    assert _temps(tmp_home) == []


def test_a_full_disk_while_writing_rows_is_one_line_and_leaves_nothing(tmp_home, tmp_path, monkeypatch):
    file = _write(tmp_path / "v.npz")
    real_open, real_fdopen = builtins.open, os.fdopen

    def filling_open(target, mode="r", *args, **kwargs):
        handle = real_open(target, mode, *args, **kwargs)
        if "w" in mode and str(target).endswith(".part"):
            return _FillingFile(handle, 16, errno.ENOSPC)
        return handle

    def filling_fdopen(fd, mode="r", *args, **kwargs):
        handle = real_fdopen(fd, mode, *args, **kwargs)
        return _FillingFile(handle, 16, errno.ENOSPC) if "w" in mode else handle

    monkeypatch.setattr(builtins, "open", filling_open)
    monkeypatch.setattr(os, "fdopen", filling_fdopen)
    with pytest.raises(ModelError) as caught:
        open_vectors(file)
    assert str(caught.value) == f"cannot convert v.npz under {tmp_home / 'vectors'}: No space left on device"
    assert _temps(tmp_home) == []


def test_temporary_files_of_dead_conversions_are_swept_and_running_ones_kept(tmp_home, tmp_path):
    folder = tmp_home / "vectors"
    folder.mkdir()
    dead, running, legacy = "a" * 24, "b" * 24, "c" * 24
    (folder / f"{dead}.k2j3h4.part").write_bytes(b"\0" * 1024)  # killed: its lock is free
    (folder / f"{running}.x8y7z6.part").write_bytes(b"\0" * 1024)
    (folder / f"{legacy}.part").write_bytes(b"\0" * 1024)  # the fixed name of earlier versions
    (folder / f".{dead}.names.q1w2.names.tmp").write_text("x")
    old_pointer = folder / ".sig-0123.txt.9f8e.tmp"
    old_pointer.write_text("x")
    os.utime(old_pointer, (time.time() - 7200, time.time() - 7200))
    fresh_pointer = folder / ".sig-4567.txt.1a2b.tmp"  # maybe being written right now: kept
    fresh_pointer.write_text("x")
    holder = os.open(folder / f"{running}.lock", os.O_RDWR | os.O_CREAT)
    fcntl.flock(holder, fcntl.LOCK_EX)  # another process converting (flock: per open file, so it binds here too)
    try:
        open_vectors(_write(tmp_path / "v.npz"))
    finally:
        os.close(holder)
    assert _temps(tmp_home) == sorted([".sig-4567.txt.1a2b.tmp", f"{running}.x8y7z6.part"])
