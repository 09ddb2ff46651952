"""Which server paths the app may open: only those inside the folders the server shares.

The app is reached by remote users who are not the machine's user, so a path that reaches
it (a link's ``source`` or ``model_a``, the home page's server path, a model directory typed
in) is honoured only inside a *data folder*: ``BIOVIZ_HOME/uploads``, plus the folders listed
in ``BIOVIZ_DATA_DIRS`` (``os.pathsep``-separated; empty by default). Trained runs under
``BIOVIZ_HOME/runs`` are shared as models too. The command line, run by the machine's own
user, does not call this module and keeps accepting any path.

The check runs on the text alone, before any loader looks at the path: symlinks and ``..``
are resolved (``os.path.realpath``) first, and every refusal is the same message whether the
path exists, is missing, is a file or a folder, so a refusal reveals nothing about the
server's disk. Relative paths are read inside the data folders, never in the server's
working directory.

Only ``ui/`` calls this module, and :meth:`bioviz.models.model_spec.ModelSpec.shared` (the
policy for models, which the app alone calls).
"""

from __future__ import annotations

import os
from pathlib import Path

from bioviz.errors import BiovizError
from bioviz.paths import home

DATA_DIRS_ENV = "BIOVIZ_DATA_DIRS"
# The names that are never paths: the bundled sources (as the loaders spell them).
BUNDLED_SOURCES = ("icd10", "icd10cm", "hpo")
_SHOWN_CHARS = 120  # a refused path is echoed back at most this long
_NAME_MAX, _PATH_MAX = 255, 4096  # Linux's limits (os.pathconf): no longer file name or path exists


class UnsharedPathError(BiovizError):
    """A server path outside the data folders (the same message whether or not it exists)."""


def refusal(text: str) -> UnsharedPathError:
    """The one error for every refused path: it names the text as given and nothing about the disk.

    >>> str(refusal("/etc/passwd"))
    "'/etc/passwd' is not in a data folder this server shares (BIOVIZ_DATA_DIRS)"
    """
    shown = text if len(text) <= _SHOWN_CHARS else text[:_SHOWN_CHARS] + "…"
    return UnsharedPathError(f"{shown!r} is not in a data folder this server shares ({DATA_DIRS_ENV})")


def data_dirs() -> tuple[Path, ...]:
    """The folders whose files the app may open: those in ``BIOVIZ_DATA_DIRS``, then ``BIOVIZ_HOME/uploads``.

    Each is resolved (``realpath``) so that a symlinked data folder still contains its files.
    """
    listed = [entry.strip() for entry in os.environ.get(DATA_DIRS_ENV, "").split(os.pathsep)]
    # The listed folders first: a relative path names a file there (uploads are named by hash).
    folders = [*(Path(entry).expanduser() for entry in listed if entry), home() / "uploads"]
    return tuple(dict.fromkeys(Path(os.path.realpath(folder)) for folder in folders))


def model_dirs() -> tuple[Path, ...]:
    """The folders whose model directories the app may load: the data folders and ``BIOVIZ_HOME/runs``."""
    return (*data_dirs(), Path(os.path.realpath(home() / "runs")))


def _inside(path: Path, folders: tuple[Path, ...]) -> bool:
    return any(path == folder or path.is_relative_to(folder) for folder in folders)


def _nameable(path: Path) -> bool:
    """Whether the system could name ``path`` (no part longer than NAME_MAX, the whole within PATH_MAX).

    Longer names cannot exist, so refusing them reveals nothing; passed on, they would make
    the loaders fail with "File name too long" instead of a message.
    """
    return len(str(path)) < _PATH_MAX and all(len(part.encode()) <= _NAME_MAX for part in path.parts)


def shared_path(text: str, folders: tuple[Path, ...] | None = None) -> Path:
    """The real path ``text`` names, if it lies inside one of ``folders``; else the one refusal.

    Parameters
    ----------
    text : str
        A path as a user gave it: absolute, ``~``-relative, or relative to a data folder.
    folders : tuple of Path, optional
        Where paths may lie (default :func:`data_dirs`); already real paths.

    Returns
    -------
    pathlib.Path
        The resolved path (symlinks and ``..`` gone): open this, not ``text``, so the file
        read is the file checked. A relative path found in several folders is the first
        one that exists, else the first folder's.

    Raises
    ------
    UnsharedPathError
        Outside every folder, empty, too long or unreadable as a path: always the same message.
    """
    folders = data_dirs() if folders is None else folders
    raw = str(text)
    candidate = raw.strip()
    if not candidate or "\0" in candidate:
        raise refusal(raw)
    candidate = os.path.expanduser(candidate)
    # An absolute path must land in one of the folders; a relative one is read in each folder
    # and must stay inside that folder every time (no "..", no symlink out of it).
    tries = [(candidate, folders)] if os.path.isabs(candidate) else \
        [(os.path.join(folder, candidate), (folder,)) for folder in folders]
    inside = []
    for attempt, allowed in tries:
        try:
            real = Path(os.path.realpath(attempt))
        except (OSError, ValueError):  # a symlink loop, a name too long for the system
            raise refusal(raw) from None
        if not (_inside(real, allowed) and _nameable(real)):
            raise refusal(raw)
        inside.append(real)
    if not inside:
        raise refusal(raw)
    # Only paths already known to lie inside a shared folder are looked at on disk.
    return next((path for path in inside if os.path.lexists(path)), inside[0])


def shared_source(source: str) -> str:
    """A SOURCE string the app may load: a bundled name as is, else the real path inside a data folder.

    Raises
    ------
    UnsharedPathError
        A path outside the data folders.
    """
    if str(source).strip() in BUNDLED_SOURCES:
        return str(source).strip()
    return str(shared_path(source))
