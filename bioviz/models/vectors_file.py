"""A vectors file as a model: names and the vectors someone computed elsewhere, opened memory-mapped.

A file (:mod:`bioviz.models.vectors_formats`) is converted once into a plain ``.npy`` of unit
float32 rows and a names file under ``BIOVIZ_HOME/vectors``, named by a hash of the file's
content (the model's fingerprint), then opened memory-mapped: a million 384-dimensional rows
(1.5 GB) open in milliseconds, pages are read on first touch and shared through the page cache by
every process, and no second copy is made. A pointer per (path, size, mtime) remembers the content
hash, so an unchanged file is not hashed again.

While converting, every row is checked: NaN or infinite values, zero rows, duplicate names, empty
names each refuse the file in one line (a :class:`~bioviz.errors.ModelError`): never a silent
zero vector. An optional model card beside the file (``<stem>.json``: ``name``, ``dimension``,
``source``) gives the label and is checked against the file.

Conversions are safe between processes (two app workers, the CLI and a page opening one file at
once): a lock file per content key (``BIOVIZ_HOME/vectors/<key>.lock``, ``fcntl.flock``: the
system releases it when its process dies) lets one process convert while the others wait, then
open its copy. Each conversion writes its own temporary file (``<key>.<random>.part``) and removes
only that one; a conversion that starts removes the temporary files of dead ones (their key's lock
is free, or they are older than :data:`STALE_TEMP_S`). Every copy is read back before it is first
used, chunk by chunk (no second copy of a million rows): a row that is not finite or not of unit
norm sets the copy aside (:func:`bioviz.cache_files.set_aside`) and it is converted again; a sound
copy is noted (``<key>.checked``: its size, mtime and inode), so later opens of that same file
skip the read. A home the disk
refuses (full, read-only) is one line naming the file and the folder, never a raw ``OSError``.

Names are matched exactly, then normalised (invisible characters dropped, case-folded, inner spaces
collapsed: :func:`bioviz.ontology.model.normalise_name`); :meth:`VectorsFile.rows` says which
names have no vector, and :mod:`bioviz.models.vectors_coverage` says so on the pages and the CLI.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import json
import logging
import os
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from bioviz.cache_files import set_aside
from bioviz.errors import ModelError, shown
from bioviz.models.vectors_formats import chunk_rows, read_chunks, source_files
from bioviz.ontology.model import normalise_name
from bioviz.paths import atomic_path, current_umask, home, write_text_atomic
from bioviz.text_clean import strip_invisible

logger = logging.getLogger(__name__)

SCHEMA = 1  # bump when the converted form changes
CARD_MAX_BYTES = 64 * 1024
_HASH_CHUNK = 8 * 2**20
_LOCK = threading.Lock()
LOCK_WAIT_S = 3600.0  # longest wait for another process's conversion (a million rows take about a minute)
STALE_TEMP_S = 3600.0  # a temporary file this old, not of a key being converted, belongs to a dead conversion
UNIT_TOLERANCE = 1e-3  # |norm - 1| of a stored row; float32 rounding is about 1e-7
_OPEN: dict[str, "VectorsFile"] = {}


@dataclass(frozen=True)
class VectorsCard:
    """The optional model card beside a vectors file (``<stem>.json``).

    Attributes
    ----------
    name : str
        Readable name (the label on pages); the file's stem when there is no card.
    dimension : int or None
        The vectors' dimension, checked against the file.
    source : str
        Where the vectors came from (a model, a paper), shown with the coverage.
    """

    name: str
    dimension: int | None = None
    source: str = ""


def card_path(path: Path) -> Path:
    """Where a vectors file's model card lies: ``<stem>.json`` beside it (a TSV pair's: ``<stem>.json`` too)."""
    return path.with_suffix(".json")


def read_card(path: Path) -> VectorsCard:
    """The model card of a vectors file, or one made of its file name when there is none.

    Raises
    ------
    ModelError
        A card that is too large, not JSON, or whose fields have the wrong types.
    """
    card = card_path(path)
    fallback = VectorsCard(path.stem)
    if not card.is_file():
        return fallback
    if card.stat().st_size > CARD_MAX_BYTES:
        raise ModelError(f"{card.name}: a model card is at most {CARD_MAX_BYTES // 1024} KB")
    try:
        data = json.loads(card.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        raise ModelError(f"{card.name}: the model card is not JSON") from None
    if not isinstance(data, dict):
        raise ModelError(f"{card.name}: the model card is a JSON object (name, dimension, source)")
    name, dimension, source = data.get("name", path.stem), data.get("dimension"), data.get("source", "")
    if not isinstance(name, str) or not name.strip() or not isinstance(source, str) or \
            (dimension is not None and (not isinstance(dimension, int) or isinstance(dimension, bool)
                                        or dimension <= 0)):
        raise ModelError(f"{card.name}: the model card's name and source are text, its dimension a positive integer")
    return VectorsCard(" ".join(name.split())[:80], dimension, " ".join(source.split())[:200])


def _signature(files: tuple[Path, ...]) -> str:
    """Hash of the files' real paths, sizes, mtimes and inodes: the pointer to a known content hash."""
    parts = []
    for file in files:
        stat = file.stat()
        parts.append(f"{os.path.realpath(file)}\0{stat.st_size}\0{stat.st_mtime_ns}\0{stat.st_ino}")
    return hashlib.sha256("\x1f".join(parts).encode()).hexdigest()[:24]


def content_key(files: tuple[Path, ...]) -> str:
    """Hash of the files' bytes (and the converted form's schema): names the converted copy, keys the caches."""
    digest = hashlib.sha256(f"schema {SCHEMA}".encode())
    for file in files:
        with open(file, "rb") as handle:
            while chunk := handle.read(_HASH_CHUNK):
                digest.update(chunk)
        digest.update(b"\0")
    return digest.hexdigest()[:24]


def cached_key(files: tuple[Path, ...]) -> str:
    """The content key, read from the pointer of an unchanged file or hashed (and the pointer written)."""
    pointer = home() / "vectors" / f"sig-{_signature(files)}.txt"
    try:
        key = pointer.read_text(encoding="utf-8").strip()
        if len(key) == 24:
            return key
    except OSError:
        pass
    key = content_key(files)
    try:
        write_text_atomic(pointer, key)
    except OSError as error:  # a disk that refuses: only costs hashing again next time
        logger.warning("cannot remember the content hash of %s: %s", files[0], error)
    return key


def _check_rows(rows: np.ndarray, names: list[str], start: int, path: Path) -> np.ndarray:
    """Unit float32 rows of a chunk; non-finite or zero rows refuse the file (never a silent zero vector)."""
    bad = ~np.isfinite(rows).all(axis=1)
    if bad.any():
        first = int(np.flatnonzero(bad)[0])
        raise ModelError(f"{path.name}: {int(bad.sum()):,} rows hold NaN or infinity "
                         f"(first: row {start + first + 1:,}, {shown(names[first])})")
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    if (norms == 0).any():
        first = int(np.flatnonzero(norms[:, 0] == 0)[0])
        raise ModelError(f"{path.name}: row {start + first + 1:,} ({shown(names[first])}) is a zero vector")
    return (rows / norms).astype(np.float32)


def _check_names(names: list[str], path: Path) -> None:
    """Refuse empty names, names with a line break (cannot be stored one a line) and duplicates."""
    seen: set[str] = set()
    for row, name in enumerate(names):
        if not isinstance(name, str) or not name.strip() or "\n" in name or "\r" in name:
            raise ModelError(f"{path.name}: the name of row {row + 1:,} is empty or holds a line break")
        if name in seen:
            dupes = len(names) - len(set(names))
            raise ModelError(f"{path.name}: {dupes:,} duplicate names (first: {shown(name)} at row {row + 1:,}); "
                             "one vector per name")
        seen.add(name)


def _convert(path: Path, target: Path, card: VectorsCard) -> None:
    """Read ``path`` chunk by chunk into ``target`` (``.npy``, unit rows) and ``target.names``.

    The rows go straight into a temporary ``.npy`` of this conversion's own (its header rewritten
    with the row count at the end), renamed onto ``target`` last: the file is never held twice,
    in memory or on the disk, and a reader never sees half of it.
    """
    names: list[str] = []
    dim = None
    fd, temp = tempfile.mkstemp(prefix=f"{target.stem}.", suffix=".part", dir=target.parent)
    try:
        os.chmod(fd, 0o666 & ~current_umask())  # mkstemp makes it 0600: the copy is shared like any cache file
        with os.fdopen(fd, "wb") as out:
            _write_header(out, (10**15, 10**6))  # room for any shape: rewritten when the rows are counted
            start = out.tell()
            for chunk_names, rows in read_chunks(path):
                if rows.ndim != 2 or rows.shape[1] == 0:
                    raise ModelError(f"{path.name}: vectors have no values")
                if dim is not None and rows.shape[1] != dim:
                    raise ModelError(f"{path.name}: rows of different dimensions ({dim} and {rows.shape[1]})")
                dim = rows.shape[1]
                if card.dimension is not None and dim != card.dimension:
                    raise ModelError(f"{path.name}: vectors of dimension {dim}, but its model card says "
                                     f"{card.dimension}")
                out.write(_check_rows(rows, chunk_names, len(names), path).tobytes())
                names.extend(chunk_names)
            if not names:
                raise ModelError(f"{path.name} holds no vectors")
            _check_names(names, path)
            out.seek(0)
            _write_header(out, (len(names), dim), start)
            out.flush()
            os.fsync(out.fileno())
        with atomic_path(target.with_suffix(".names"), suffix=".names") as tmp:
            Path(tmp).write_text("\n".join(names), encoding="utf-8")
        os.replace(temp, target)  # the rows last: a reader finding them finds their names
    finally:
        with contextlib.suppress(OSError):  # never in place of the first error (a read-only home refuses this too)
            os.unlink(temp)


def _write_header(out, shape: tuple[int, int], length: int | None = None) -> None:
    """An ``.npy`` header of float32 rows; the same ``length`` in bytes as the placeholder it replaces."""
    np.lib.format.write_array_header_1_0(out, {"descr": "<f4", "fortran_order": False, "shape": shape})
    if length is not None and out.tell() != length:
        raise OSError(errno.EIO, f"npy header of {out.tell()} bytes where {length} were kept")


def _unit_rows(vectors: np.ndarray) -> str | None:
    """Why a converted copy cannot serve (a row not finite or not of unit norm), None when every row is sound.

    Read a chunk at a time: a million 384-dimensional rows are checked without a second copy.
    """
    step = chunk_rows(vectors.shape[1]) if vectors.ndim == 2 else 1
    for start in range(0, len(vectors), step):
        block = np.asarray(vectors[start:start + step])
        squares = np.einsum("ij,ij->i", block, block, dtype=np.float64)
        bad = ~np.isfinite(squares) | (np.abs(np.sqrt(squares) - 1) > UNIT_TOLERANCE)
        if bad.any():
            return f"{int(bad.sum()):,} rows of {start + step:,} read are not unit vectors (first: row " \
                   f"{start + int(np.flatnonzero(bad)[0]) + 1:,})"
    return None


class _FileLock:
    """An exclusive ``fcntl.flock`` on ``path``, released when its process dies (a lock file is kept).

    Not :mod:`filelock`: on a folder that refuses the lock file it retries for ever instead of
    raising, and a read-only home must still open the copies it holds.
    """

    def __init__(self, path: Path) -> None:
        self.path, self.fd = path, None

    def acquire(self, wait_s: float) -> bool:
        """Take the lock, waiting at most ``wait_s`` (0: try once); False when it is held elsewhere.

        Raises
        ------
        OSError
            The lock file cannot be created (a read-only or full home).
        """
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o666)
        deadline = time.monotonic() + wait_s
        while True:
            try:
                fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return True
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    self.release()
                    return False
                time.sleep(0.05)

    def release(self) -> None:
        """Let the lock go (closing the file releases it)."""
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


def _temp_key(name: str) -> str:
    """The content key a temporary file of the vectors folder belongs to ('' for another's: a pointer's)."""
    key = name.lstrip(".")[:24]
    return key if len(key) == 24 and all(c in "0123456789abcdef" for c in key) else ""


def sweep_stale(folder: Path, own_key: str) -> list[Path]:
    """Remove the temporary files of dead conversions in ``folder``: their key's lock is free, or they are old.

    A conversion killed (SIGKILL, the machine's power) left its ``.part`` (as large as the
    vectors) until the same file was converted again. Called when a conversion starts, under its
    own key's lock; a temporary file of a conversion still running elsewhere (its lock held) is kept.

    Returns
    -------
    list of Path
        The files removed.
    """
    removed = []
    now = time.time()
    for temp in [*folder.glob("*.part"), *folder.glob(".*.tmp")]:
        key = _temp_key(temp.name)
        try:
            old = now - temp.stat().st_mtime > STALE_TEMP_S
        except OSError:
            continue
        if key and key != own_key and not old:
            lock = _FileLock(folder / f"{key}.lock")
            try:
                if not lock.acquire(0):
                    continue  # its conversion is running
            except OSError:
                continue
            try:
                with contextlib.suppress(FileNotFoundError):
                    temp.unlink()
                    removed.append(temp)
            finally:
                lock.release()
        elif key == own_key or old:
            with contextlib.suppress(FileNotFoundError):
                temp.unlink()
                removed.append(temp)
    for temp in removed:
        logger.info("removed %s, left by a conversion that did not finish", temp)
    return removed


@dataclass(frozen=True, eq=False)
class VectorsFile:
    """A converted vectors file: names, unit float32 rows (memory-mapped) and the card.

    Attributes
    ----------
    path : pathlib.Path
        The file as given (its real path).
    key : str
        Hash of its content (the model's fingerprint is ``vectors-<key>``).
    names : tuple of str
        The file's names, in row order.
    vectors : numpy.ndarray
        ``(len(names), dim)`` float32 unit rows, a read-only memory map.
    card : VectorsCard
        Its model card (or one made of the file name).
    """

    path: Path
    key: str
    names: tuple[str, ...]
    vectors: np.ndarray
    card: VectorsCard
    _rows: dict = field(default_factory=dict, repr=False)

    @property
    def dim(self) -> int:
        """The vectors' dimension."""
        return int(self.vectors.shape[1])

    @property
    def fingerprint(self) -> str:
        """``vectors-<content hash>``: equal fingerprints give equal vectors."""
        return f"vectors-{self.key}"

    def _index(self, kind: str) -> dict[str, int]:
        """``exact`` or ``loose`` (normalised) name -> row, built on first use (the first row wins a clash)."""
        if kind not in self._rows:
            loose: dict[str, int] = {}
            if kind == "loose":
                for row, name in enumerate(self.names):
                    loose.setdefault(match_key(name), row)
            self._rows[kind] = loose if kind == "loose" else {name: row for row, name in enumerate(self.names)}
        return self._rows[kind]

    def rows(self, texts) -> np.ndarray:
        """Row of each text (exact name, else normalised), ``-1`` where the file has no vector."""
        exact = self._index("exact")
        found = np.array([exact.get(t, -1) for t in texts], dtype=np.int64)
        missed = np.flatnonzero(found < 0)
        if len(missed):  # the normalised index only when a name is not found as it is (a million keys)
            loose = self._index("loose")
            texts = list(texts)
            found[missed] = [loose.get(match_key(texts[i]), -1) for i in missed]
        return found


def match_key(text: str) -> str:
    """The key under which a level's name meets a file's name: invisible characters dropped, then
    :func:`~bioviz.ontology.model.normalise_name`.

    Examples
    --------
    >>> match_key("  Acute\\u200b  Kidney Failure ")
    'acute kidney failure'
    """
    return normalise_name(strip_invisible(text))


def open_vectors(path: Path | str) -> VectorsFile:
    """The vectors file at ``path``, converted on first use and memory-mapped (once per process and content).

    Converted under a lock file per content key: another process converting the same file is
    waited for, and its copy opened.

    Raises
    ------
    ModelError
        A file that cannot be read, is too large, fails a check, or cannot be converted under a
        home the disk refuses (one line).
    """
    path = Path(os.path.realpath(path))
    card = read_card(path)
    files = source_files(path)
    with _LOCK:
        key = cached_key(files)
        if key in _OPEN and _OPEN[key].card == card:
            return _OPEN[key]
        target = home() / "vectors" / f"{key}.npy"
        lock = _FileLock(target.with_suffix(".lock"))
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            if not lock.acquire(LOCK_WAIT_S):
                raise ModelError(f"{path.name}: another process has been converting it for "
                                 f"{LOCK_WAIT_S / 60:.0f} minutes (lock {target.with_suffix('.lock')})")
        except OSError as error:  # a read-only or full home: a copy already there still serves
            opened = _read_converted(target, path, key, card)
            if opened is None:
                raise _refused(path, target.parent, error) from None
        else:
            try:
                opened = _open_locked(path, target, key, card)
            finally:
                lock.release()
        _OPEN[key] = opened
        return opened


def _refused(path: Path, folder: Path, error: BaseException) -> ModelError:
    """One line for a conversion the disk refused: the file, the folder, the reason."""
    reason = error.strerror if isinstance(error, OSError) and error.strerror else \
        (str(error).strip().splitlines() or [type(error).__name__])[0]
    return ModelError(f"cannot convert {path.name} under {folder}: {reason}")


def _open_locked(path: Path, target: Path, key: str, card: VectorsCard) -> VectorsFile:
    """Under the key's lock: the sound converted copy, converting it when there is none."""
    opened = _read_converted(target, path, key, card)
    if opened is not None:
        return opened
    sweep_stale(target.parent, key)
    try:
        _convert(path, target, card)
    except ModelError:
        raise
    except MemoryError:
        raise ModelError(f"{path.name}: not enough memory to convert it") from None
    except (OSError, UnicodeError) as error:
        raise _refused(path, target.parent, error) from None
    opened = _read_converted(target, path, key, card)
    if opened is None:
        raise ModelError(f"{path.name}: its converted copy under {target.parent} cannot be read back")
    return opened


def _read_converted(target: Path, path: Path, key: str, card: VectorsCard) -> VectorsFile | None:
    """The converted copy, memory-mapped and checked row by row; None when there is none (a damaged one is set aside)."""
    names_file = target.with_suffix(".names")
    if not target.is_file() or not names_file.is_file():
        return None
    try:
        vectors = np.load(target, mmap_mode="r", allow_pickle=False)
        names = tuple(names_file.read_text(encoding="utf-8").split("\n"))
        if vectors.ndim != 2 or vectors.dtype != np.float32 or len(vectors) != len(names):
            raise ValueError(f"{len(names)} names but a {vectors.dtype} matrix of shape {vectors.shape}")
        if not _checked_before(target) and (problem := _unit_rows(vectors)):
            raise ValueError(problem)
    except (OSError, ValueError) as error:
        set_aside(target, f"converted vectors unreadable: {error}")
        set_aside(names_file, "names of unreadable converted vectors")
        return None
    _remember_checked(target)
    if card.dimension is not None and card.dimension != vectors.shape[1]:
        raise ModelError(f"{path.name}: vectors of dimension {vectors.shape[1]}, but its model card says "
                         f"{card.dimension}")
    return VectorsFile(path, key, names, vectors, card)


def _identity(target: Path) -> str:
    """Size, mtime and inode of a converted copy: another file (rewritten, replaced) has another."""
    stat = target.stat()
    return f"{stat.st_size} {stat.st_mtime_ns} {stat.st_ino}"


def _checked_before(target: Path) -> bool:
    """Whether this very copy was read back row by row before (its ``.checked`` note names it).

    The row check reads the whole copy (about a second a gigabyte): once per copy, not per
    process, keeps a later open in milliseconds.
    """
    try:
        return target.with_suffix(".checked").read_text(encoding="utf-8") == _identity(target)
    except OSError:
        return False


def _remember_checked(target: Path) -> None:
    """Note that this copy's rows were found sound; a disk that refuses only costs the check again."""
    try:
        if not _checked_before(target):
            write_text_atomic(target.with_suffix(".checked"), _identity(target))
    except OSError as error:
        logger.info("cannot note that %s was checked: %s", target, error)
