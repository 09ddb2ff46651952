"""Where bioviz keeps its state: one home directory, and atomic writes into it.

``BIOVIZ_HOME`` (default ``./.bioviz``) holds the source cache, the embedding cache,
trained runs and the job database. Nothing is written anywhere else unless the user
names a path.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
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
    The file is flushed to the disk before the rename and the directory after it: without
    the first, a power loss can leave the new name pointing at an empty file (the rename
    reached the disk, the data did not); without the second, the rename itself can be lost.

    Parameters
    ----------
    target : path-like
        Final location of the file.
    suffix : str
        Suffix for the temporary file (some writers infer the format from it).
    """
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = _new_file(target.parent, f".{target.name}.", suffix + ".tmp")
    try:
        yield Path(tmp)
        fsync_file(tmp)
        os.replace(tmp, target)
        fsync_dir(target.parent)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)


def _new_file(folder: Path, prefix: str, suffix: str) -> str:
    """Create a new empty file with a random name in ``folder``, with the user's umask applied.

    ``tempfile.mkstemp`` creates its files 0600 whatever the umask: renamed into place, an
    exported CSV or pair file was then unreadable by the colleagues a shared machine's umask
    lets read the user's caches (0644). Created with mode 0666, the kernel applies the umask
    (and a directory's default ACL), as for any file the user writes; no umask is read or
    changed, so other threads' files are never created under a wrong one.
    """
    flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_BINARY", 0)
    for _ in range(100):
        path = os.path.join(folder, f"{prefix}{secrets.token_hex(6)}{suffix}")
        try:
            fd = os.open(path, flags, 0o666)
        except FileExistsError:
            continue
        os.close(fd)
        return path
    raise FileExistsError(errno.EEXIST, "no unused temporary file name", str(folder))


def write_text_atomic(target: Path | str, text: str) -> None:
    """Write ``text`` to ``target`` atomically (temp file, then rename)."""
    with atomic_path(target) as tmp:
        tmp.write_text(text, encoding="utf-8")


def write_bytes_atomic(target: Path | str, data: bytes) -> None:
    """Write ``data`` to ``target`` atomically (temp file, then rename)."""
    with atomic_path(target) as tmp:
        tmp.write_bytes(data)


def fsync_file(path: Path | str) -> None:
    """Flush a file's data to the disk (whoever wrote it, through whatever handle)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_dir(path: Path | str) -> None:
    """Flush a directory's entries to the disk, so a rename or a new file in it survives a power loss.

    Some file systems cannot fsync a directory (EINVAL) and some platforms cannot open one;
    there is nothing more to flush on those.
    """
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except (IsADirectoryError, PermissionError):  # Windows: directories cannot be opened
        return
    try:
        os.fsync(fd)
    except OSError as error:
        if error.errno not in (errno.EINVAL, errno.ENOTSUP):
            raise
    finally:
        os.close(fd)


def fsync_tree(path: Path | str) -> None:
    """Flush every file and directory under ``path`` (``path`` included), deepest first.

    Before a directory written file by file is renamed into place: after a power loss it
    is then either absent or complete, never a complete-looking shell of empty files.
    """
    for folder, _dirs, files in os.walk(path, topdown=False):
        for name in files:
            fsync_file(os.path.join(folder, name))
        fsync_dir(folder)
