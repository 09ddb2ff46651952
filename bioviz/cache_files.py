"""Disk caches that can always be rebuilt: a damaged one is set aside, a failed write is skipped.

Everything under ``BIOVIZ_HOME``'s cache folders (name vectors and their blocks, projection
coordinates, the char-tfidf fit, evaluation results) can be computed again. So a cache never
fails a command or a page:

* reading: an unreadable file (garbage, truncated, the wrong shape) is renamed to
  ``<name>.corrupt-<UTC time>`` with a logged warning, out of the way of the rebuild but kept
  for whoever wants to see what happened, and the caller computes the value afresh;
* writing: a full disk, a file-size limit (``ulimit -f``), a read-only folder skips the write
  with a logged warning; the write goes through :func:`bioviz.paths.atomic_path`, so no
  partial file is ever left where a reader would find it.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO, TypeVar

from bioviz.paths import READ_ONLY, atomic_path, note_refusal

logger = logging.getLogger(__name__)

CORRUPT_MARK = ".corrupt-"
# What reading a damaged file raises: numpy (ValueError, EOFError for an empty file), zip
# archives behind .npz (BadZipFile), JSON and UTF-8 (ValueError), a missing array (KeyError),
# and the file system (OSError).
UNREADABLE = (OSError, ValueError, EOFError, KeyError, zipfile.BadZipFile)

T = TypeVar("T")


def file_identity(path: str | Path) -> tuple[int, int] | None:
    """``(device, inode)`` of a file, None when it does not exist: tells a file from its replacement."""
    try:
        stat = os.stat(path)
    except OSError:
        return None
    return stat.st_dev, stat.st_ino


def set_aside(path: str | Path, reason: str, identity: tuple[int, int] | None = None) -> Path | None:
    """Rename a damaged cache file to ``<name>.corrupt-<UTC time>`` and log a warning.

    Parameters
    ----------
    path : path-like
        The damaged file.
    reason : str
        Why it is damaged (goes into the warning).
    identity : (int, int), optional
        :func:`file_identity` of the file that was found damaged. When the file at ``path``
        is another one by now (another process set the damaged one aside and wrote a sound
        replacement), it is left alone.

    Returns
    -------
    pathlib.Path or None
        Where the file now lies; None when it was already gone or replaced, or could not be
        moved (then it is left for the next writer to replace).
    """
    path = Path(path)
    if identity is not None and file_identity(path) != identity:
        return None
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%S%fZ")
    target = path.with_name(f"{path.name}{CORRUPT_MARK}{stamp}")
    try:
        os.rename(path, target)
    except FileNotFoundError:
        return None
    except OSError as error:
        logger.warning("unreadable cache %s (%s) could not be set aside: %s", path, reason, error)
        return None
    logger.warning("unreadable cache %s (%s): set aside as %s, rebuilding", path, reason, target.name)
    return target


def describe(error: BaseException) -> str:
    """``ValueError: reason`` on one line, for warnings."""
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0]}" if text else type(error).__name__


def read_cache(path: str | Path, read: Callable[[Path], T]) -> T | None:
    """``read(path)``, or None when the file is absent or damaged (then it is set aside).

    Parameters
    ----------
    path : path-like
        The cache file.
    read : callable
        Reads and checks the file; raises one of :data:`UNREADABLE` (a ``ValueError`` for
        content of the wrong shape) when the file cannot serve.
    """
    path = Path(path)
    identity = file_identity(path)
    try:
        return read(path)
    except FileNotFoundError:  # never written, or removed by another process meanwhile
        return None
    except UNREADABLE as error:
        set_aside(path, describe(error), identity)
        return None


def write_cache(path: str | Path, write: Callable[[BinaryIO], None], suffix: str = "") -> bool:
    """Write a cache file atomically; a failed write is logged and skipped, never raised.

    Parameters
    ----------
    path : path-like
        The cache file.
    write : callable
        ``write(handle)`` writes the content to a binary file handle.
    suffix : str
        Suffix of the temporary file (some writers look at it).

    Returns
    -------
    bool
        True when the file was written; False when the disk refused (full, a file-size
        limit, read-only): the value stays uncached and no partial file is left.
    """
    path = Path(path)
    try:
        with atomic_path(path, suffix=suffix) as tmp, open(tmp, "wb") as handle:
            write(handle)
    except OSError as error:
        if error.errno in READ_ONLY:  # a read-only home: said once for the process, not once per file
            note_refusal(path, error)
            logger.debug("not caching %s: %s", path, error.strerror)
        else:
            logger.warning("not caching %s: %s", path, error.strerror or describe(error))
        return False
    return True
