"""One copy of each large run file on the disk: runs hard-link them from ``BIOVIZ_HOME/blobs``.

A head run is its input model's own modules followed by the head (:mod:`trainer.export`):
sentence-transformers writes the frozen base transformer into every run again, 91 MB of a
``minilm`` run's 153 MB, byte for byte the same in each run on that base. So, before a run is
published, every large file of its folder is put in a content-addressed store,
``BIOVIZ_HOME/blobs/<sha256 of its bytes>``, and the run's file becomes a hard link to that
blob: the second run on a base costs only its head.

- A hard link is an ordinary file: a run loads exactly as before (``SentenceTransformer(run)``
  anywhere, by bioviz or not), and removing a run (``rm -r``, a job's deletion) removes its
  names only; the bytes stay while any other run links them.
- A blob appears at once and complete: it *is* the run's file, already written and flushed,
  linked under its digest in one ``link(2)``; a name taken meanwhile by another export means
  the same bytes (checked, byte for byte, before anything is linked to it).
- Where the disk will not link (another file system than the home, a file system without
  hard links, a read-only or full home, too many links) the run keeps its own copy, as
  before: sharing saves space, it never fails an export.
- :func:`sweep_blobs` removes the blobs no run links any more (one link left: the store's),
  on the way as runs are listed. A run's file never depends on the store's name: a blob
  swept while a run links it (the instant between the count and the removal) costs only the
  sharing of the next run.

Files are shared from :data:`MIN_SHARED_BYTES` up: the weights and the tokenizer, not the
run's own records (``run.json`` is rewritten when a run is renamed: never a shared inode).

A blob is every linking run's file at once, so writing into it in place would change them all.
Blobs are therefore stored read-only (mode 0444: a casual writer is refused; root is not), and
loading a run (:func:`check_run_blobs`, from :func:`bioviz.models.registry.load_encoder`)
checks each of its files that is a blob against the digest the blob is named by, once per file
state (inode, size, mtime, ctime) in a process. A blob whose bytes no longer match is set aside
(:func:`bioviz.cache_files.set_aside`: no later run links it) and the load is one line naming
the run; every other run linking it is refused the same way (issue 41).
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import re
import secrets
import stat
import threading
from dataclasses import dataclass
from pathlib import Path

from bioviz.cache_files import CORRUPT_MARK, set_aside
from bioviz.errors import ModelError
from bioviz.paths import fsync_dir, fsync_file, home_path

logger = logging.getLogger(__name__)

BLOBS = "blobs"  # the store's folder under BIOVIZ_HOME
MIN_SHARED_BYTES = 256 * 1024  # smaller files are not worth a link (configs, run.json, split.json)
NEVER_SHARED = frozenset({"run.json", "split.json"})  # a run's own records: rewritten in place by renames
_DIGEST = re.compile(r"[0-9a-f]{64}")  # a blob's name; anything else in the store is left alone
_BLOCK = 1 << 22
BLOB_MODE = 0o444  # a blob is every linking run's file: nobody writes into it in place
# File states (dev, inode, size, mtime, ctime) whose bytes were checked against their blob's name in
# this process: a load re-reads a blob only after it changed (a write, or a link: ctime moves).
_VERIFIED: set[tuple[int, ...]] = set()
_VERIFIED_LOCK = threading.Lock()


@dataclass(frozen=True)
class ShareReport:
    """What :func:`share_files` did with a folder's large files.

    Attributes
    ----------
    linked : int
        Files replaced by a link to a blob another run had stored already (their bytes saved).
    stored : int
        Files that became a new blob (the first run with these bytes).
    kept : int
        Files left as the folder's own copy (the disk refused a link, or the store is unusable).
    saved_bytes : int
        The bytes of the ``linked`` files: what this folder no longer takes on the disk.
    """

    linked: int = 0
    stored: int = 0
    kept: int = 0
    saved_bytes: int = 0


def blobs_dir() -> Path:
    """``BIOVIZ_HOME/blobs`` (not created: :func:`share_files` creates it when it first stores)."""
    return home_path() / BLOBS


def file_digest(path: Path | str) -> str:
    """The SHA-256 of a file's bytes, as 64 hex digits (a blob's name)."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(_BLOCK), b""):
            digest.update(block)
    return digest.hexdigest()


def _same_bytes(a: Path, b: Path) -> bool:
    with open(a, "rb") as left, open(b, "rb") as right:
        while True:
            x, y = left.read(_BLOCK), right.read(_BLOCK)
            if x != y:
                return False
            if not x:
                return True


def _store(store: Path | None) -> Path | None:
    """The store's folder, created if missing; None when it cannot be used (logged)."""
    store = Path(store) if store is not None else blobs_dir()
    try:
        if store.is_symlink():
            logger.warning("not sharing run files: %s is a symbolic link (the store must be a real folder)", store)
            return None
        store.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        logger.info("not sharing run files: cannot create %s (%s)", store, error.strerror or error)
        return None
    return store


def share_file(file: Path | str, store: Path | str) -> str:
    """Make ``file`` a hard link to its blob in ``store``: ``"linked"``, ``"stored"`` or ``"kept"``.

    ``"stored"``: ``file`` became the blob (no blob had its bytes); ``"linked"``: ``file`` was
    replaced, in one rename, by a link to the blob that had them; ``"kept"``: ``file`` is left as
    it is, its own copy (the disk refused a link, or a file of another content sits under its
    digest's name). ``file`` has its full content at every instant.

    Raises
    ------
    OSError
        Only where ``file`` itself cannot be read (a link the disk refuses is ``"kept"``).
    """
    file, store = Path(file), Path(store)
    digest = file_digest(file)
    blob = store / digest
    size = file.stat().st_size
    for _ in range(3):  # a blob swept, or stored by another export, between two steps: look again
        try:
            found = os.lstat(blob)
        except FileNotFoundError:
            try:
                fsync_file(file)  # the bytes on the disk before a name that promises them
                os.link(file, blob)
            except FileExistsError:
                continue
            except OSError as error:
                logger.info("run file %s kept as its own copy: the disk refused a link into %s (%s)",
                            file.name, store, error.strerror or error)
                return "kept"
            fsync_dir(store)
            _read_only(blob)
            return "stored"
        if found.st_ino == file.stat().st_ino and found.st_dev == file.stat().st_dev:
            _read_only(blob)
            return "linked"  # already this blob
        if not stat.S_ISREG(found.st_mode) or found.st_size != size or not _same_bytes(blob, file):
            logger.warning("run file %s kept as its own copy: %s holds other bytes than its name says", file.name, blob)
            return "kept"
        spare = file.with_name(f".{file.name}.link-{secrets.token_hex(4)}")
        try:
            os.link(blob, spare, follow_symlinks=False)
        except FileNotFoundError:
            continue  # swept meanwhile: this file becomes the blob
        except OSError as error:
            logger.info("run file %s kept as its own copy: the disk refused a link to %s (%s)",
                        file.name, blob, error.strerror or error)
            return "kept"
        try:
            os.replace(spare, file)
        except OSError:
            spare.unlink(missing_ok=True)
            raise
        _read_only(blob)  # a blob stored before blobs were read-only
        return "linked"
    return "kept"


def _read_only(blob: Path) -> None:
    """Make a blob (and so every run's link to it) read-only; a disk that refuses keeps it as it is."""
    with contextlib.suppress(OSError):
        if stat.S_IMODE(os.stat(blob).st_mode) != BLOB_MODE:
            os.chmod(blob, BLOB_MODE)


def _state(info: os.stat_result) -> tuple[int, ...]:
    return info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns


def _linked_files(run: Path) -> dict[tuple[int, int], Path]:
    """``(dev, inode) -> file`` of a run's regular files that have other names (blob links), hidden ones aside."""
    linked = {}
    for parent, dirs, files in os.walk(run):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        for name in files:
            if name.startswith("."):
                continue
            path = Path(parent, name)
            with contextlib.suppress(OSError):
                info = path.lstat()
                if stat.S_ISREG(info.st_mode) and info.st_nlink > 1:
                    linked[(info.st_dev, info.st_ino)] = path
    return linked


def check_run_blobs(run: Path | str, label: str, store: Path | str | None = None) -> None:
    """Refuse a run one of whose files is a blob whose bytes no longer match the digest it is named by.

    Each file is read once per state (:data:`_VERIFIED`); a run with no linked files, or no
    store, costs a walk of its folder. A blob found bad is set aside, so no later run links it;
    a run linking a blob set aside before is refused without reading it.

    Parameters
    ----------
    run : path-like
        The run's folder.
    label : str
        How the message names the run (its readable name and short id).
    store : path-like, optional
        The blob folder (default :func:`blobs_dir`).

    Raises
    ------
    ModelError
        One line: which run and which file was changed in place since it was stored.
    """
    run = Path(run)
    linked = _linked_files(run)
    with _VERIFIED_LOCK:
        unchecked = {key: path for key, path in linked.items() if _file_state(path) not in _VERIFIED}
    if not unchecked:
        return
    store = Path(store) if store is not None else blobs_dir()
    try:
        entries = [] if store.is_symlink() else list(os.scandir(store))
    except OSError:
        return  # no store (or none readable): nothing names what the bytes should be
    for entry in entries:
        digest = entry.name.split(CORRUPT_MARK)[0]
        if not _DIGEST.fullmatch(digest):
            continue
        try:
            info = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        file = unchecked.get((info.st_dev, info.st_ino))
        if file is None:
            continue
        state = _file_state(file)
        if entry.name == digest and file_digest(file) == digest:
            with _VERIFIED_LOCK:
                _VERIFIED.add(state)
            continue
        if entry.name == digest:  # bytes changed in place since stored: no later run may link them
            set_aside(entry.path, f"its bytes no longer match its name; {file.relative_to(run)} of {label} links it")
        raise ModelError(f"run {label} is damaged: {file.relative_to(run)} was changed in place since it was stored "
                         f"(blobs/{digest[:12]}… holds other bytes now); delete the run or train it again")


def _file_state(path: Path) -> tuple[int, ...] | None:
    try:
        return _state(path.stat())
    except OSError:
        return None


def share_files(folder: Path | str, store: Path | str | None = None, *,
                min_bytes: int = MIN_SHARED_BYTES) -> ShareReport:
    """Put every large file under ``folder`` in the store and link it from there (:func:`share_file`).

    Called on a run's temporary export folder before it is renamed into place. Never raises
    over the store: a store that cannot be created or a link the disk refuses leaves the files
    as they are (logged), and the export goes on.

    Parameters
    ----------
    folder : path-like
        A run folder being exported (hidden files, ``run.json`` and ``split.json`` are left alone).
    store : path-like, optional
        The blob folder (default :func:`blobs_dir`).
    min_bytes : int
        Smaller files are left alone.

    Returns
    -------
    ShareReport
    """
    candidates = []
    for parent, dirs, files in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(files):
            path = Path(parent, name)
            if name.startswith(".") or name in NEVER_SHARED:
                continue
            info = path.lstat()
            if stat.S_ISREG(info.st_mode) and info.st_size >= min_bytes:
                candidates.append((path, info.st_size))
    if not candidates:
        return ShareReport()
    where = _store(store)
    if where is None:
        return ShareReport(kept=len(candidates))
    counts = {"linked": 0, "stored": 0, "kept": 0}
    saved = 0
    for path, size in candidates:
        outcome = share_file(path, where)
        counts[outcome] += 1
        saved += size if outcome == "linked" else 0
    report = ShareReport(counts["linked"], counts["stored"], counts["kept"], saved)
    logger.info("run files of %s: %d linked to stored copies (%.1f MB saved), %d stored, %d kept",
                Path(folder).name, report.linked, saved / 1e6, report.stored, report.kept)
    return report


def sweep_blobs(store: Path | str | None = None) -> list[Path]:
    """Remove the blobs no run links any more (their only name is the store's); return those removed.

    Never raises: a store that is missing, a link, unreadable or read-only is left as it is.
    Only names of the store's own form (64 hex digits, or a blob set aside: ``<digest>.corrupt-*``)
    and regular files are considered.
    """
    store = Path(store) if store is not None else blobs_dir()
    try:
        if store.is_symlink():
            return []
        entries = list(os.scandir(store))
    except OSError:
        return []
    removed = []
    for entry in entries:
        # a blob set aside as changed in place (check_run_blobs) goes too once no run links it
        if not _DIGEST.fullmatch(entry.name.split(CORRUPT_MARK)[0]):
            continue
        try:
            info = entry.stat(follow_symlinks=False)
            if stat.S_ISREG(info.st_mode) and info.st_nlink == 1:
                os.unlink(entry.path)
                removed.append(Path(entry.path))
        except OSError:
            continue
    if removed:
        logger.info("removed %d stored run file(s) no run uses any more", len(removed))
    return removed
