"""A path the user names for output, checked before the work and named in every failure.

A command that writes its result at the end (``bioviz code --out``, ``trainer pretrain
--save-pairs``) must not build everything and then fail on a folder, a missing parent or a
read-only place, nor report the failure under the name of its temporary file. These checks
run before the work; :func:`reporting_as` turns a failure of the final write into one line
that names the user's path. A missing parent is refused, not created: a typo in a folder
name would otherwise make a new tree.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from pathlib import Path

from bioviz.errors import BiovizError


def _check_parent(path: Path, option: str, shown: str) -> None:
    parent = path.parent
    if not parent.exists():
        raise BiovizError(f"{option} {shown}: no such folder {parent}")
    if not parent.is_dir():
        raise BiovizError(f"{option} {shown}: {parent} is not a folder")
    # Permission bits do not tell (root, read-only mounts, /proc): create a file as the writer would.
    try:
        fd, probe = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".check", dir=parent)
    except OSError as error:
        raise BiovizError(f"{option} {shown}: cannot write in {parent} ({error.strerror or error})") from None
    os.close(fd)
    os.unlink(probe)


def check_output_file(path: str | Path, option: str = "--out") -> Path:
    """Refuse an output file path that cannot be written, before any work.

    Parameters
    ----------
    path : str or Path
        The file the user named; it may exist (it is replaced) if it is a regular file.
    option : str
        The option that named it, for the message.

    Returns
    -------
    Path
        ``path`` with ``~`` expanded.

    Raises
    ------
    BiovizError
        ``path`` is a folder or not a regular file (a device, a pipe), its folder does not
        exist, or no file can be created in it.
    """
    target = Path(path).expanduser()
    if target.is_dir():
        raise BiovizError(f"{option} {path} is a folder: give a file name")
    if target.exists() and not stat.S_ISREG(target.stat().st_mode):
        # Replacing it would swap a device node or a pipe for a file.
        raise BiovizError(f"{option} {path} is not a regular file")
    _check_parent(target, option, str(path))
    return target


def check_output_dir(path: str | Path, option: str = "--out") -> Path:
    """Refuse an output directory whose place cannot take it, before any work.

    Whether the directory itself may be used (new, empty) is the command's own rule.

    Returns
    -------
    Path
        ``path`` with ``~`` expanded.

    Raises
    ------
    BiovizError
        ``path`` is a file, its parent folder does not exist, or nothing can be created in it.
    """
    target = Path(path).expanduser()
    if target.exists() and not target.is_dir():
        raise BiovizError(f"{option} {path} is a file, not a folder")
    if not target.exists():
        _check_parent(target, option, str(path))
    return target


@contextlib.contextmanager
def reporting_as(path: str | Path, option: str = "--out"):
    """Turn an ``OSError`` of writing ``path`` (through a temporary file) into one line naming ``path``.

    Examples
    --------
    >>> with reporting_as("coded.csv"):
    ...     raise OSError(28, "No space left on device", ".coded.csv.abc.tmp")
    Traceback (most recent call last):
    ...
    bioviz.errors.BiovizError: --out coded.csv: cannot write it (No space left on device)
    """
    try:
        yield
    except OSError as error:
        raise BiovizError(f"{option} {path}: cannot write it ({error.strerror or error})") from None
