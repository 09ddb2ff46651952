"""Where bioviz keeps its state: one home directory, and atomic writes into it.

``BIOVIZ_HOME`` (default ``./.bioviz``) holds the source cache, the embedding cache,
trained runs and the job database. Nothing is written anywhere else unless the user
names a path.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import secrets
import threading
from pathlib import Path

logger = logging.getLogger(__name__)

# What a disk answers when it will not take a write: a read-only mount, no permission, full, a
# quota, a file-size limit (``ulimit -f``). Every cache and folder write under the home treats
# these the same: skipped, said once (note_refusal), never raised.
WRITE_REFUSALS = frozenset({errno.EROFS, errno.EACCES, errno.EPERM, errno.ENOSPC, errno.EDQUOT, errno.EFBIG})
READ_ONLY = frozenset({errno.EROFS, errno.EACCES, errno.EPERM})  # lasting refusals: say once, not per file
_refusal: list[str] = []  # the first refusal's notice in this process (a list: set once under the lock)
_refusal_lock = threading.Lock()


def is_write_refusal(error: BaseException) -> bool:
    """True for an ``OSError`` whose errno is one of :data:`WRITE_REFUSALS`."""
    return isinstance(error, OSError) and error.errno in WRITE_REFUSALS


def note_refusal(path: Path | str, error: OSError) -> None:
    """Record that a write under the home was refused; the first refusal in a process is logged, once.

    The command line then prints one ``WARNING`` line; pages show :func:`refused_writes` once.
    """
    _note(path, error.strerror or os.strerror(error.errno or 0))


def check_home_writable() -> bool:
    """Whether ``BIOVIZ_HOME`` takes writes; when not, say so once (:func:`note_refusal`) before any work.

    Commands and pages call it first: a command that reads only what is cached would otherwise
    never try a write and never say that nothing it computes is kept.
    """
    if home_writable():
        return True
    _note(_home_path(), "read-only or not writable")
    return False


def _note(path: Path | str, reason: str) -> None:
    notice = (f"cannot write under BIOVIZ_HOME ({reason}: {path}): working from what is already cached; "
              "nothing will be saved")
    with _refusal_lock:
        first = not _refusal
        if first:
            _refusal.append(notice)
    if first:
        logger.warning(notice)


def refused_writes() -> str | None:
    """The notice of the first write refused in this process (:func:`note_refusal`), or None."""
    return _refusal[0] if _refusal else None


def home_writable() -> bool:
    """Whether ``BIOVIZ_HOME`` takes writes (``access(2)``: a read-only mount answers no even to root)."""
    path = _home_path()
    return os.access(path if path.exists() else path.parent, os.W_OK)


def make_dirs(path: Path | str) -> bool:
    """Create a folder (and its parents) under the home; False, said once, when the disk refuses.

    Raises
    ------
    OSError
        Anything but a refusal (a file where the folder should be, a name too long).
    """
    try:
        Path(path).mkdir(parents=True, exist_ok=True)
    except OSError as error:
        if not is_write_refusal(error):
            raise
        note_refusal(path, error)
        return False
    return True


def _home_path() -> Path:
    return Path(os.environ.get("BIOVIZ_HOME", ".bioviz")).expanduser().resolve()


def home_path() -> Path:
    """``BIOVIZ_HOME`` resolved, never created: for what a page says about it (:func:`home` creates it)."""
    return _home_path()


def home() -> Path:
    """Return the bioviz home directory, creating it if needed (and if the disk lets it).

    Returns
    -------
    pathlib.Path
        ``$BIOVIZ_HOME`` if set, else ``./.bioviz``. On a read-only disk it is returned as it is:
        readers find what is cached there, writers are refused and skip (:func:`make_dirs`).
    """
    path = _home_path()
    make_dirs(path)
    return path


def subdir(name: str) -> Path:
    """Return ``home()/name``, created if missing (and if the disk lets it: :func:`make_dirs`)."""
    path = home() / name
    make_dirs(path)
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


def append_line(path: Path, line: str) -> None:
    """Append ``line`` and a newline to ``path`` whole, or not at all.

    One ``write`` on an ``O_APPEND`` descriptor; when the disk refuses part of it (full, a quota),
    the file is cut back to its old length, so a reader never finds half an event
    (``trainer.jobs.progress.read_progress`` also trusts only lines that end in a newline).

    Raises
    ------
    OSError
        The disk refused the write (after the cut).
    """
    data = (line + "\n").encode("utf-8")
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
    try:
        size = os.fstat(fd).st_size
        try:
            written = os.write(fd, data)
            if written != len(data):  # a short write: the disk filled up in the middle of the line
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))
        except OSError as error:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, size)
            if error.filename is None:
                error.filename = str(path)
            raise
    finally:
        os.close(fd)


def current_umask() -> int:
    """The process's umask, read without changing it (``/proc/self/status``; 0o022 where it cannot be read).

    ``os.umask`` can only be read by setting it, which races with other threads creating files.
    """
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    return 0o022


def share_tree(path: Path | str) -> None:
    """Give every file under ``path`` mode 0666 and every folder 0777, less the umask (0644/0755 under 022).

    For a folder written with ``tempfile`` (0700) or by libraries that create their files 0600,
    before it is renamed into place: a run is then readable by whom the user's umask admits, as
    docs/security.md promises for every file the atomic writer creates.
    """
    mask = current_umask()
    for folder, _dirs, files in os.walk(path):
        os.chmod(folder, 0o777 & ~mask)
        for name in files:
            os.chmod(os.path.join(folder, name), 0o666 & ~mask)
