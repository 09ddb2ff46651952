"""Where bioviz keeps its state: one home directory, and atomic writes into it.

``BIOVIZ_HOME`` (default ``./.bioviz``) holds the source cache, the embedding cache,
trained runs and the job database. Nothing is written anywhere else unless the user
names a path.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path


def home() -> Path:
    """Return the bioviz home directory, creating it if needed.

    Returns
    -------
    pathlib.Path
        ``$BIOVIZ_HOME`` if set, else ``./.bioviz``.
    """
    path = Path(os.environ.get("BIOVIZ_HOME", ".bioviz")).expanduser().resolve()
    path.mkdir(parents=True, exist_ok=True)
    return path


def subdir(name: str) -> Path:
    """Return ``home()/name``, created if missing."""
    path = home() / name
    path.mkdir(parents=True, exist_ok=True)
    return path


@contextlib.contextmanager
def atomic_path(target: Path | str, suffix: str = ""):
    """Yield a temporary path next to ``target``; rename it onto ``target`` on success.

    A crash or an exception leaves ``target`` as it was (readers never see half a file).

    Parameters
    ----------
    target : path-like
        Final location of the file.
    suffix : str
        Suffix for the temporary file (some writers infer the format from it).
    """
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=suffix + ".tmp", dir=target.parent)
    os.close(fd)
    try:
        yield Path(tmp)
        os.replace(tmp, target)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)


def write_text_atomic(target: Path | str, text: str) -> None:
    """Write ``text`` to ``target`` atomically (temp file, then rename)."""
    with atomic_path(target) as tmp:
        tmp.write_text(text, encoding="utf-8")


def write_bytes_atomic(target: Path | str, data: bytes) -> None:
    """Write ``data`` to ``target`` atomically (temp file, then rename)."""
    with atomic_path(target) as tmp:
        tmp.write_bytes(data)
