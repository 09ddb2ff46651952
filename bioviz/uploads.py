"""Storing user-uploaded files safely under BIOVIZ_HOME/uploads, within a quota and an age limit.

Uploads are size-bounded (checked before anything is written), named by the user's file
name percent-encoded (no "/", "..", or leading dot survives: no path tricks) and their content
hash, and only ever parsed by the loaders, never executed or unpickled. :func:`original_name`
reads the user's file name back, for titles and pickers: never the server's path. The folder
is shared by every user of a server, so storing a file first removes uploads older than ``BIOVIZ_UPLOAD_MAX_AGE_DAYS`` and, when the
folder would exceed ``BIOVIZ_UPLOAD_QUOTA_MB``, the oldest others, but never the files the
storing session still uses (its ``keep`` paths).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import stat
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote, unquote

from bioviz.errors import SourceError
from bioviz.paths import home, is_write_refusal, subdir, write_bytes_atomic
from bioviz.settings import env_number

MAX_UPLOAD_BYTES = 200 * 1024 * 1024
ALLOWED_SUFFIXES = (".obo", ".tsv", ".csv")
QUOTA_ENV, MAX_AGE_ENV = "BIOVIZ_UPLOAD_QUOTA_MB", "BIOVIZ_UPLOAD_MAX_AGE_DAYS"
DEFAULT_QUOTA_MB = 2048  # ten maximal uploads
DEFAULT_MAX_AGE_DAYS = 30
_STEM_CHARS = 120  # of the encoded file name kept in the stored name (names stay far below NAME_MAX)
_HASH_CHARS = 12
_STORED_NAME = re.compile(rf"^(?P<stem>.+)-[0-9a-f]{{{_HASH_CHARS}}}(?P<suffix>\.[a-z]+)$")


SESSION_FILES_ENV, SESSION_MB_ENV, MEMORY_MB_ENV = (
    "BIOVIZ_UPLOAD_SESSION_FILES", "BIOVIZ_UPLOAD_SESSION_MB", "BIOVIZ_UPLOAD_MEMORY_MB")
DEFAULT_SESSION_FILES = 6  # the app's uploaders (ontology, benchmark, gold, terms) with room to replace one
DEFAULT_SESSION_MB = 256  # one largest ontology upload (200 MiB) and small files beside it
DEFAULT_MEMORY_MB = 768  # three sessions' worth: past it uploads wait until others are released


@dataclass(frozen=True)
class UploadMemoryLimits:
    """How much of the server's memory uploads may hold before anything is stored on disk.

    Streamlit keeps every uploaded file's bytes in the server's memory until its session
    ends; these bound them (enforced by ``ui.upload_memory``).

    Attributes
    ----------
    session_files : int
        File ids one session may hold; past it the session's oldest file is released.
    session_bytes : int
        Bytes one session may hold; past it the session's oldest files are released.
    server_bytes : int
        Bytes all sessions may hold together; past it an upload is refused (HTTP 413).
    """

    session_files: int
    session_bytes: int
    server_bytes: int


def upload_memory_limits() -> UploadMemoryLimits:
    """The upload memory bounds from ``BIOVIZ_UPLOAD_SESSION_FILES``, ``..._SESSION_MB``, ``..._MEMORY_MB``.

    Raises
    ------
    SourceError
        A setting that is not a positive number (:func:`bioviz.settings.env_number`).
    """
    return UploadMemoryLimits(
        session_files=max(1, int(env_number(SESSION_FILES_ENV, DEFAULT_SESSION_FILES))),
        session_bytes=int(env_number(SESSION_MB_ENV, DEFAULT_SESSION_MB) * 2**20),
        server_bytes=int(env_number(MEMORY_MB_ENV, DEFAULT_MEMORY_MB) * 2**20))


def upload_quota_bytes() -> int:
    """The most bytes all stored uploads may take together (``BIOVIZ_UPLOAD_QUOTA_MB``, default 2048)."""
    return int(env_number(QUOTA_ENV, DEFAULT_QUOTA_MB) * 2**20)


def upload_max_age_seconds() -> float:
    """How long an upload is kept (``BIOVIZ_UPLOAD_MAX_AGE_DAYS``, default 30): older ones are removed."""
    return env_number(MAX_AGE_ENV, DEFAULT_MAX_AGE_DAYS) * 86_400


def uploads_dir() -> Path:
    """``BIOVIZ_HOME/uploads`` (created if missing).

    Raises
    ------
    SourceError
        The folder is a symbolic link: clean-up removes files in it, so a link to another
        folder would make uploads delete files there; refused until the link is replaced.
    """
    path = home() / "uploads"
    if path.is_symlink():
        raise SourceError(f"the uploads folder {path} is a symbolic link; this server stores uploads only in a "
                          "real folder (replace the link with a folder)")
    return subdir("uploads")


def _stored_files(folder: Path) -> list[tuple[float, int, Path]]:
    """``(mtime, size, path)`` of every stored upload in ``folder``, oldest first.

    Only names :func:`store_upload` gives (``<stem>-<12 hex>.<suffix>``) and only plain files:
    anything else someone put there (a note, a folder, a link, a temporary file of a write in
    progress) is never removed by the quota or the age limit. Files vanishing meanwhile are skipped.
    """
    found = []
    for path in folder.iterdir():
        if _STORED_NAME.match(path.name) is None:
            continue
        with contextlib.suppress(FileNotFoundError):
            info = path.lstat()
            if stat.S_ISREG(info.st_mode):
                found.append((info.st_mtime, info.st_size, path))
    return sorted(found)


def make_room(incoming: int, keep=(), now: float | None = None) -> None:
    """Remove expired uploads, then the oldest others until ``incoming`` more bytes fit the quota.

    Parameters
    ----------
    incoming : int
        Size of the file about to be stored.
    keep : iterable of path-like
        Uploads still in use by the caller's session: never removed.
    now : float, optional
        The current time (``time.time()``); for tests.

    Raises
    ------
    SourceError
        The file does not fit even after removing everything that may go.
    """
    quota, max_age = upload_quota_bytes(), upload_max_age_seconds()
    if incoming > quota:
        raise SourceError(f"the file is {incoming / 2**20:.1f} MiB; this server keeps at most "
                          f"{quota / 2**20:.0f} MiB of uploads ({QUOTA_ENV})")
    now = time.time() if now is None else now
    kept = {os.path.realpath(p) for p in keep}
    files = _stored_files(uploads_dir())
    total = sum(size for _, size, _ in files)
    for mtime, size, path in files:  # oldest first
        expired = now - mtime > max_age
        if os.path.realpath(path) in kept or not (expired or total + incoming > quota):
            continue
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        total -= size
    if total + incoming > quota:
        raise SourceError(f"uploads are full ({total / 2**20:.1f} of {quota / 2**20:.0f} MiB in use by files "
                          f"still open): try again later or ask the server's owner to raise {QUOTA_ENV}")


def check_upload_size(filename: str, size: int, max_bytes: int = MAX_UPLOAD_BYTES) -> None:
    """Refuse an upload of ``size`` bytes over ``max_bytes``, before its content is read.

    An uploader's own limit is enforced by the browser only: a scripted upload reaches the
    server with up to the server's global limit (``server.maxUploadSize``). Pages call this
    with the uploaded file's ``size`` before ``getvalue()``, so an oversized file is not copied
    and parsed first.

    Raises
    ------
    SourceError
        ``size`` is over ``max_bytes``.
    """
    if size > max_bytes:
        raise SourceError(f"{filename} is {size / 2**20:.1f} MiB; the limit is {max_bytes / 2**20:.0f} MiB")


def read_user_file(path, max_bytes: int, what: str) -> bytes:
    """The bytes of a file a user named on the command line, its size checked before it is read.

    Parameters
    ----------
    path : str or Path
    max_bytes : int
        The same bound the app puts on the same kind of upload.
    what : str
        What the file is, for the message (``terms file``, ``gold file``).

    Raises
    ------
    SourceError
        No such file, or one over ``max_bytes`` (:func:`check_upload_size`).
    """
    file = Path(path)
    if not file.is_file():
        raise SourceError(f"no {what} {str(path)!r}")
    check_upload_size(file.name, file.stat().st_size, max_bytes)
    return file.read_bytes()


def store_upload(filename: str, data: bytes, *, max_bytes: int = MAX_UPLOAD_BYTES,
                 allowed: tuple[str, ...] = ALLOWED_SUFFIXES, keep=()) -> Path:
    """Save an uploaded file and return its path; everything is checked before anything is written.

    Parameters
    ----------
    filename : str
        The name the user's browser sent (only its suffix and a cleaned stem are used).
    data : bytes
        File content.
    max_bytes : int
        Refuse larger files.
    allowed : tuple of str
        Accepted suffixes (lower case, with the dot).
    keep : iterable of path-like
        Uploads the caller's session still uses: never removed to make room.

    Raises
    ------
    SourceError
        Too large, empty, not an accepted kind of file, or no room left under the quota.
    """
    suffix = Path(filename).suffix.lower()
    if suffix not in allowed:
        kinds = ", ".join(s.lstrip(".") for s in allowed)
        raise SourceError(f"cannot use {filename!r}: upload a file of one of these kinds: {kinds}")
    if not data:
        raise SourceError(f"{filename} is empty")
    if len(data) > max_bytes:
        raise SourceError(f"{filename} is {len(data) / 2**20:.1f} MiB; the limit is {max_bytes / 2**20:.0f} MiB")
    target = uploads_dir() / f"{_encoded_stem(filename)}-{hashlib.sha256(data).hexdigest()[:_HASH_CHARS]}{suffix}"
    if target.exists():
        return target
    make_room(len(data), keep=[*keep, target])
    try:
        write_bytes_atomic(target, data)
    except OSError as error:
        if not is_write_refusal(error):
            raise
        raise SourceError(f"cannot store {filename}: the server's disk refused it ({error.strerror}); "
                          "nothing was saved") from error
    return target


def _encoded_stem(filename: str) -> str:
    """The stem of the user's file name as a safe file name: percent-encoded, dots too, cut at a whole escape.

    >>> _encoded_stem("HPO subset (v2).obo")
    'HPO%20subset%20%28v2%29'
    >>> _encoded_stem("../../etc/passwd.tsv")
    '%2E%2E%2F%2E%2E%2Fetc%2Fpasswd'
    """
    name = filename.replace("\\", "/").strip()
    stem = name[: -len(Path(name).suffix)] if Path(name).suffix else name
    encoded = ""
    for char in stem:  # whole characters only: a cut inside one's escapes would not decode
        escaped = quote(char, safe="").replace(".", "%2E")
        if len(encoded) + len(escaped) > _STEM_CHARS:
            break
        encoded += escaped
    return encoded or "upload"


def original_name(path) -> str | None:
    """The file name the user uploaded ``path`` as (``HPO subset (v2).obo``); None for a path that is no upload.

    Uploads stored before names were kept whole give their cleaned name (``mini.obo``).
    """
    try:
        path = Path(os.path.realpath(path))
    except (OSError, ValueError):  # a NUL byte, a symlink loop: no upload's path
        return None
    if path.parent != Path(os.path.realpath(home() / "uploads")):
        return None
    match = _STORED_NAME.match(path.name)
    if match is None:
        return None
    return unquote(match["stem"]) + match["suffix"]
