"""Helpers of the state reliability tests (test_state_*.py): a stand-in encoder, damaged files, full disks.

Nothing here loads a neural model: :class:`TrigramEncoder` stands in for one (hashed character
trigrams), so a whole corruption matrix runs in seconds.
"""

from __future__ import annotations

import builtins
import contextlib
import errno
import io
import os
import sqlite3
import zlib
from pathlib import Path

import numpy as np

from bioviz.models.encoders import Encoder

# How a cache file is damaged: random bytes, cut in half, emptied, its first bytes overwritten.
DAMAGES = ("garbage", "truncated", "empty", "scribbled header")


def damage(path: Path, how: str) -> None:
    """Damage ``path`` in place, as a crash, a bad disk or a stray write would."""
    raw = path.read_bytes()
    if how == "garbage":
        data = np.random.default_rng(13).integers(0, 256, max(len(raw), 512), dtype=np.uint8).tobytes()
    elif how == "truncated":
        data = raw[: len(raw) // 2]
    elif how == "empty":
        data = b""
    elif how == "scribbled header":
        data = b"\x00garbage\xff" * 12 + raw[120:]
    else:
        raise ValueError(how)
    path.write_bytes(data)


def set_aside_copies(folder: Path) -> list[Path]:
    """Files set aside as damaged (``<name>.corrupt-<time>``) under ``folder``."""
    return sorted(p for p in folder.rglob("*") if ".corrupt-" in p.name)


def stray_files(home: Path) -> list[Path]:
    """Temporary files of atomic writes left under ``home`` (there must be none)."""
    return sorted(p for p in home.rglob("*") if p.name.endswith(".tmp"))


class TrigramEncoder(Encoder):
    """A tiny deterministic encoder: hashed character trigrams, unit length; counts what it encodes."""

    def __init__(self, label: str = "trigram") -> None:
        self.spec = self.label = label
        self.fingerprint = f"{label}-fp"
        self.dim = 64
        self.encoded = 0

    def _encode(self, texts, batch_size):
        self.encoded += len(texts)
        out = np.zeros((len(texts), self.dim), np.float32)
        for row, text in enumerate(texts):
            padded = f"  {text.lower()} "
            for i in range(len(padded) - 2):
                out[row, zlib.crc32(padded[i:i + 3].encode()) % self.dim] += 1
        return out / np.linalg.norm(out, axis=1, keepdims=True)


def use_trigram_encoder(monkeypatch) -> TrigramEncoder:
    """Make every MODEL string load one :class:`TrigramEncoder` (the library and the CLI alike)."""
    from bioviz.models import registry
    from bioviz.search import neighbours

    encoder = TrigramEncoder()
    monkeypatch.setattr(registry, "load_encoder", lambda spec: encoder)
    monkeypatch.setattr(neighbours, "load_encoder", lambda spec: encoder)
    return encoder


# ------------------------------------------------------------------------------------ full disks


class _FillingFile:
    """A file whose writes fail with ``error`` once ``room`` bytes are written (what fits is written first)."""

    def __init__(self, handle, room: int, error: int) -> None:
        self._handle, self._room, self._error = handle, room, error

    def write(self, data):
        room = max(0, self._room)
        if len(data) > room:
            self._handle.write(data[:room])
            self._room = 0
            raise OSError(self._error, os.strerror(self._error))
        self._room -= len(data)
        return self._handle.write(data)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self._handle.close()

    def __getattr__(self, name):
        return getattr(self._handle, name)


@contextlib.contextmanager
def full_disk(monkeypatch, home: Path, room: int = 64, error: int = errno.ENOSPC):
    """Files opened for writing under ``home`` fail with ``error`` after ``room`` bytes.

    ``ENOSPC`` is a full disk, ``EFBIG`` a file-size limit (``ulimit -f``), ``EDQUOT`` a quota.
    Other files (pytest's own) are untouched.
    """
    real_open = builtins.open
    home = Path(home).resolve()

    def fake_open(file, mode="r", *args, **kwargs):
        handle = real_open(file, mode, *args, **kwargs)
        if isinstance(file, (str, os.PathLike)) and any(c in mode for c in "wax+") \
                and Path(file).resolve().is_relative_to(home):
            return _FillingFile(handle, room, error)
        return handle

    with monkeypatch.context() as patch:
        patch.setattr(builtins, "open", fake_open)
        patch.setattr(io, "open", fake_open)
        yield


class _FullDatabase:
    """A sqlite3 connection whose inserts fail as on a full disk."""

    def __init__(self, conn: sqlite3.Connection, message: str) -> None:
        self._conn, self._message = conn, message

    def _check(self, sql: str) -> None:
        words = sql.lstrip().upper()
        creates = words.startswith("CREATE") and not self._conn.execute("SELECT 1 FROM sqlite_master").fetchone()
        if words.startswith(("INSERT", "UPDATE", "DELETE")) or creates:  # CREATE ... IF NOT EXISTS writes only once
            raise sqlite3.OperationalError(self._message)

    def execute(self, sql, *args):
        self._check(sql)
        return self._conn.execute(sql, *args)

    def executemany(self, sql, *args):
        self._check(sql)
        return self._conn.executemany(sql, *args)

    def executescript(self, sql):
        self._check(sql)
        return self._conn.executescript(sql)

    def __getattr__(self, name):
        return getattr(self._conn, name)


@contextlib.contextmanager
def full_database(monkeypatch, message: str = "database or disk is full"):
    """Every sqlite3 connection opened meanwhile fails its inserts (and table creation) with ``message``."""
    real_connect = sqlite3.connect
    with monkeypatch.context() as patch:
        patch.setattr(sqlite3, "connect", lambda *a, **k: _FullDatabase(real_connect(*a, **k), message))
        yield
