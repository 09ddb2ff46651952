"""Storing user-uploaded source files safely under BIOVIZ_HOME/uploads.

Uploads are size-bounded, named by their content hash (never by the user's file name,
so no path tricks), and only ever parsed by the loaders, never executed or unpickled.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from bioviz.errors import SourceError
from bioviz.paths import subdir, write_bytes_atomic

MAX_UPLOAD_BYTES = 200 * 1024 * 1024
ALLOWED_SUFFIXES = (".obo", ".tsv", ".csv")


def store_upload(filename: str, data: bytes, max_bytes: int = MAX_UPLOAD_BYTES) -> Path:
    """Save an uploaded source file and return its path.

    Parameters
    ----------
    filename : str
        The name the user's browser sent (only its suffix is used).
    data : bytes
        File content.
    max_bytes : int
        Refuse larger files.

    Raises
    ------
    SourceError
        Too large, empty, or not an accepted kind of file.
    """
    suffix = Path(filename).suffix.lower()
    if suffix not in ALLOWED_SUFFIXES:
        raise SourceError(f"cannot use {filename!r}: upload an .obo, .tsv or .csv file")
    if not data:
        raise SourceError(f"{filename} is empty")
    if len(data) > max_bytes:
        raise SourceError(f"{filename} is {len(data) / 2**20:.0f} MiB; the limit is {max_bytes / 2**20:.0f} MiB")
    stem = "".join(ch for ch in Path(filename).stem if ch.isalnum() or ch in "-_")[:40] or "upload"
    target = subdir("uploads") / f"{stem}-{hashlib.sha256(data).hexdigest()[:12]}{suffix}"
    if not target.exists():
        write_bytes_atomic(target, data)
    return target
