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

Names are matched exactly, then normalised (invisible characters dropped, case-folded, inner spaces
collapsed: :func:`bioviz.ontology.model.normalise_name`); :meth:`VectorsFile.rows` says which
names have no vector, and :mod:`bioviz.models.vectors_coverage` says so on the pages and the CLI.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from bioviz.cache_files import set_aside
from bioviz.errors import ModelError, shown
from bioviz.models.vectors_formats import read_chunks, source_files
from bioviz.ontology.model import normalise_name
from bioviz.paths import atomic_path, home, write_text_atomic
from bioviz.text_clean import strip_invisible

logger = logging.getLogger(__name__)

SCHEMA = 1  # bump when the converted form changes
CARD_MAX_BYTES = 64 * 1024
_HASH_CHUNK = 8 * 2**20
_LOCK = threading.Lock()
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
    """Read ``path`` chunk by chunk into ``target`` (``.npy``, unit rows) and ``target.names``."""
    names: list[str] = []
    parts = target.with_suffix(".part")  # rows appended as they are checked: the file is never held twice
    dim = None
    with open(parts, "wb") as out:
        for chunk_names, rows in read_chunks(path):
            if rows.ndim != 2 or rows.shape[1] == 0:
                raise ModelError(f"{path.name}: vectors have no values")
            if dim is not None and rows.shape[1] != dim:
                raise ModelError(f"{path.name}: rows of different dimensions ({dim} and {rows.shape[1]})")
            dim = rows.shape[1]
            if card.dimension is not None and dim != card.dimension:
                raise ModelError(f"{path.name}: vectors of dimension {dim}, but its model card says {card.dimension}")
            out.write(_check_rows(rows, chunk_names, len(names), path).tobytes())
            names.extend(chunk_names)
    if not names:
        raise ModelError(f"{path.name} holds no vectors")
    _check_names(names, path)
    with atomic_path(target.with_suffix(".names"), suffix=".names") as tmp:
        Path(tmp).write_text("\n".join(names), encoding="utf-8")
    with atomic_path(target, suffix=".npy") as tmp, open(tmp, "wb") as out, open(parts, "rb") as rows_in:
        np.lib.format.write_array_header_1_0(out, {"descr": "<f4", "fortran_order": False, "shape": (len(names), dim)})
        while block := rows_in.read(_HASH_CHUNK):
            out.write(block)


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

    Raises
    ------
    ModelError
        A file that cannot be read, is too large, or fails a check (one line).
    """
    path = Path(os.path.realpath(path))
    card = read_card(path)
    files = source_files(path)
    with _LOCK:
        key = cached_key(files)
        if key in _OPEN and _OPEN[key].card == card:
            return _OPEN[key]
        target = home() / "vectors" / f"{key}.npy"
        opened = _read_converted(target, path, key, card)
        if opened is None:
            target.parent.mkdir(parents=True, exist_ok=True)
            try:
                _convert(path, target, card)
            finally:
                target.with_suffix(".part").unlink(missing_ok=True)
            opened = _read_converted(target, path, key, card)
            if opened is None:
                raise ModelError(f"{path.name}: its converted copy under {target.parent} cannot be read back")
        _OPEN[key] = opened
        return opened


def _read_converted(target: Path, path: Path, key: str, card: VectorsCard) -> VectorsFile | None:
    """The converted copy, memory-mapped; None when there is none (a damaged one is set aside)."""
    names_file = target.with_suffix(".names")
    if not target.is_file() or not names_file.is_file():
        return None
    try:
        vectors = np.load(target, mmap_mode="r", allow_pickle=False)
        names = tuple(names_file.read_text(encoding="utf-8").split("\n"))
        if vectors.ndim != 2 or vectors.dtype != np.float32 or len(vectors) != len(names):
            raise ValueError(f"{len(names)} names but a {vectors.dtype} matrix of shape {vectors.shape}")
    except (OSError, ValueError) as error:
        set_aside(target, f"converted vectors unreadable: {error}")
        set_aside(names_file, "names of unreadable converted vectors")
        return None
    if card.dimension is not None and card.dimension != vectors.shape[1]:
        raise ModelError(f"{path.name}: vectors of dimension {vectors.shape[1]}, but its model card says "
                         f"{card.dimension}")
    return VectorsFile(path, key, names, vectors, card)
