"""On-disk cache of name vectors, keyed by model fingerprint and exact text.

One SQLite database (``BIOVIZ_HOME/embeddings/vectors.sqlite``) in WAL mode: readers never
block the writer, and several processes (the app, a CLI call, a training job) can write at
once; SQLite serialises the writers and every insert is one transaction, so a killed
process never leaves half a batch. Vectors are stored as raw float32 bytes (no pickle).
Lookups fetch only the texts asked for, so memory stays proportional to the request, not
to the size of the cache.

A request for many names at once (a whole level) is also stored as one *block*: a ``.npy``
file under ``embeddings/blocks`` named by the fingerprint and a hash of the exact text list,
so reopening that level is one file read instead of a lookup per name. Blocks are opened
memory-mapped (read-only): a million 384-dimensional float32 rows (1.5 GB) open in
milliseconds instead of seconds, the pages are read on first touch and shared through the
page cache by every process (and every Space) that maps the same block, and no second copy
is made. They stay float32, so a block gives exactly the vectors the database gives.

Each model's number of vectors is kept in the ``models`` table, updated by every write in
the same transaction, so :meth:`VectorCache.stats` (shown by a page on every rerun) reads a
few rows instead of counting the whole table. A database written before this count existed
gets it once, on first open.

Both are only a cache (:mod:`bioviz.cache_files`): a database or block that cannot be read
(garbage, truncated) is set aside as ``<name>.corrupt-<time>`` with a logged warning and
rebuilt, and a write the disk refuses (full, a file-size limit, read-only) is skipped with a
warning: the vectors are still computed and returned, only not stored.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import sqlite3
import time
from pathlib import Path

import numpy as np
from filelock import FileLock, Timeout

from bioviz.cache_files import CORRUPT_MARK, describe, file_identity, read_cache, set_aside, write_cache
from bioviz.paths import home

logger = logging.getLogger(__name__)

DB_NAME = "vectors.sqlite"
BLOCK_MIN = 2000  # requests of at least this many texts are also stored as a block
_WRITE_CHUNK = 4000  # rows per insert transaction: short enough for other writers to interleave
_LOOKUP_CHUNK = 20_000  # texts per lookup statement (bounds the JSON argument's size)
_BUSY_TIMEOUT_MS = 60_000
_SET_ASIDE_TIMEOUT_S = 30  # waiting for another process that is setting the same damaged file aside

# SQLite result codes (primary codes; extended codes carry them in their low byte) of a file
# that is not a readable database, and of a disk that refuses to write (full, a file-size
# limit: EFBIG surfaces as an I/O error, read-only, the file cannot be created).
_CORRUPT = {sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB}
_UNWRITABLE = {sqlite3.SQLITE_FULL, sqlite3.SQLITE_IOERR, sqlite3.SQLITE_READONLY, sqlite3.SQLITE_CANTOPEN}
# The same, for errors that carry no code (raised by a wrapper, or by a test's fault injection)
_CORRUPT_MESSAGES = ("file is not a database", "database disk image is malformed")
_UNWRITABLE_MESSAGES = ("database or disk is full", "disk i/o error", "readonly database",
                        "unable to open database file")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS vectors (
    model TEXT NOT NULL,
    text TEXT NOT NULL,
    vector BLOB NOT NULL,
    PRIMARY KEY (model, text)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS models (
    model TEXT PRIMARY KEY,
    label TEXT,
    dim INTEGER,
    updated REAL,
    vectors INTEGER NOT NULL DEFAULT 0
);
"""
# A database made before models.vectors existed: add the column and count once (a full scan,
# the last one: every write keeps the count from then on).
_ADD_COUNTS = """
ALTER TABLE models ADD COLUMN vectors INTEGER NOT NULL DEFAULT 0;
INSERT OR IGNORE INTO models (model) SELECT DISTINCT model FROM vectors;
UPDATE models SET vectors = (SELECT COUNT(*) FROM vectors WHERE vectors.model = models.model);
"""


def default_path() -> Path:
    """``BIOVIZ_HOME/embeddings/vectors.sqlite`` (the folder is created on first use, by the cache)."""
    return home() / "embeddings" / DB_NAME


def failure_kind(error: sqlite3.Error) -> str | None:
    """``corrupt`` (not a readable database), ``unwritable`` (the disk refused), ``no-schema`` (a fresh
    file: another process set the damaged one aside), or None (anything else)."""
    if "no such table" in str(error):
        return "no-schema"
    code = getattr(error, "sqlite_errorcode", None)
    if code is not None:
        code &= 0xFF
        return "corrupt" if code in _CORRUPT else "unwritable" if code in _UNWRITABLE else None
    text = str(error).lower()
    if any(m in text for m in _CORRUPT_MESSAGES):
        return "corrupt"
    if any(m in text for m in _UNWRITABLE_MESSAGES):
        return "unwritable"
    return None





def _connect_read_only(path: Path) -> sqlite3.Connection:
    """The database on a read-only disk: ``immutable`` (no lock, no WAL or -shm file), ``mode=ro``.

    Nothing can change it while the disk takes no writes, which is what ``immutable`` asks; a
    write through this connection fails as "readonly database" and is skipped like a full disk's.
    """
    uri = f"{path.resolve().as_uri()}?mode=ro&immutable=1"
    return sqlite3.connect(uri, uri=True, isolation_level=None)


def texts_digest(texts: list[str]) -> str:
    """A short hash of an exact list of texts (order included): names a level's block and its encoding claim."""
    return hashlib.sha256("\x1f".join(texts).encode("utf-8")).hexdigest()[:24]

class VectorCache:
    """Vectors of texts per model fingerprint, in one SQLite file.

    Never fails its caller over the file itself: a damaged database is set aside and started
    afresh, and a write the disk refuses is skipped (see the module docstring).

    Parameters
    ----------
    path : path-like, optional
        Database file; :func:`default_path` by default.

    Examples
    --------
    >>> cache = VectorCache()                                   # doctest: +SKIP
    >>> cache.put("fp", ["fever"], np.ones((1, 3), np.float32))  # doctest: +SKIP
    >>> cache.get("fp", ["fever", "cough"])                     # doctest: +SKIP
    {'fever': array([1., 1., 1.], dtype=float32)}
    """

    def __init__(self, path: str | Path | None = None) -> None:
        self.path = Path(path) if path else default_path()
        self._has_schema = False
        self._warned: set[str] = set()
        self._writes_skipped_until = 0.0  # monotonic time: see _run, a write lock held past the busy timeout
        # On a folder that takes no writes (access(2) says so of a read-only mount, even to root), an
        # existing database is read as it is: a WAL database cannot even be opened for reading there
        # without its -shm file.
        self._read_only = self.path.is_file() and not os.access(self.path.parent, os.W_OK)
        self._run("open", lambda conn: None, None)

    @contextlib.contextmanager
    def _connect(self):
        # A connection per call: cheap, safe across threads (Streamlit) and forks (jobs).
        if self._read_only:
            with contextlib.closing(_connect_read_only(self.path)) as conn:
                yield conn
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(self.path, timeout=_BUSY_TIMEOUT_MS / 1000, isolation_level=None)
        try:
            conn.execute(f"PRAGMA busy_timeout={_BUSY_TIMEOUT_MS}")
            # Asked before it is set: setting it, even to what it is, waits for a process stopped inside
            # a transaction (SIGSTOP, a debugger) for the whole busy timeout, then fails the open.
            if str(conn.execute("PRAGMA journal_mode").fetchone()[0]).lower() != "wal":
                conn.execute("PRAGMA journal_mode=WAL")
            # NORMAL is durable at each checkpoint and never corrupts in WAL mode; FULL would
            # fsync every insert for vectors that can always be recomputed.
            conn.execute("PRAGMA synchronous=NORMAL")
            if not self._has_schema:
                self._create_schema(conn)
            yield conn
        finally:
            conn.close()

    def _create_schema(self, conn: sqlite3.Connection) -> None:
        if _has_tables(conn) and _has_counts(conn):  # read, not written: no write lock to wait for
            self._has_schema = True
            return
        try:
            conn.executescript(_SCHEMA)
            if not _has_counts(conn):
                with _transaction(conn):
                    if not _has_counts(conn):  # checked again under the write lock: another process may have added it
                        for statement in filter(str.strip, _ADD_COUNTS.split(";")):
                            conn.execute(statement)
        except sqlite3.Error as error:
            if failure_kind(error) != "unwritable":
                raise
            # A disk that refuses writes: what is stored can still be read (a missing table
            # is then retried, and given up, by _run; missing counts are counted by stats).
            return
        self._has_schema = True

    def _run(self, what: str, operation, fallback):
        """``operation(conn)``; a damaged file is set aside and the operation retried once on a
        fresh one, and a disk that refuses gives ``fallback`` with a warning.

        A write that finds the database's write lock held past the busy timeout (a process stopped
        or hung inside a transaction: SIGSTOP, a debugger, a frozen VM) is skipped with a warning,
        and so is every write of the next timeout's length: the vectors are returned, not stored,
        and whoever holds the lock stores its own when it wakes. Waiting a minute per chunk, or
        failing a page, for vectors that can always be recomputed would be worse. Other database
        errors (a bug) propagate.
        """
        if what == "write" and time.monotonic() < self._writes_skipped_until:
            return fallback
        for attempt in range(2):
            identity = file_identity(self.path)
            try:
                with self._connect() as conn:
                    return operation(conn)
            except sqlite3.Error as error:
                kind = failure_kind(error)
                if kind is None and what == "write" and _lock_timed_out(error):
                    self._writes_skipped_until = time.monotonic() + _BUSY_TIMEOUT_MS / 1000
                    self._warn("locked", f"vector cache {self.path}: writes skipped for {_BUSY_TIMEOUT_MS // 1000} s "
                                         "(another process has held the write lock that long: stopped or hung); "
                                         "vectors are computed, not cached")
                    return fallback
                if kind is None:
                    raise
                if kind == "no-schema" and attempt == 0:
                    self._has_schema = False
                    continue
                if kind == "corrupt" and attempt == 0:
                    self._set_aside(identity, error)
                    continue
                self._warn(kind, f"vector cache {self.path}: {what} skipped ({describe(error)}); "
                                 "vectors are computed, not cached")
                return fallback
            except OSError as error:  # the folder itself cannot be created (full disk, read-only)
                self._warn("folder", f"vector cache {self.path}: {what} skipped ({describe(error)})")
                return fallback
        return fallback

    def _warn(self, kind: str, message: str) -> None:
        # once per kind and cache object: a full disk would otherwise warn on every chunk
        if kind not in self._warned:
            self._warned.add(kind)
            logger.warning(message)

    def _set_aside(self, identity: tuple[int, int] | None, error: sqlite3.Error) -> None:
        """Move the damaged database (with its WAL and shared-memory files) out of the way.

        Under a file lock, and only if the file is still the one that failed: when several
        processes find the same damaged file, the first sets it aside and the others must
        not set aside the fresh database it has started meanwhile.
        """
        try:
            with FileLock(f"{self.path}.lock", timeout=_SET_ASIDE_TIMEOUT_S):
                if identity is None:
                    return
                moved = set_aside(self.path, describe(error), identity)  # None: replaced by another process
                for extra in ("-wal", "-shm"):
                    companion = Path(f"{self.path}{extra}")
                    if moved is not None and companion.exists():
                        with contextlib.suppress(OSError):
                            os.rename(companion, f"{moved}{extra}")
        except (OSError, Timeout) as lock_error:
            logger.warning("vector cache %s could not be set aside: %s", self.path, describe(lock_error))
        self._has_schema = False

    def get(self, model: str, texts, dim: int | None = None) -> dict[str, np.ndarray]:
        """Cached vectors of ``texts`` for ``model``.

        Parameters
        ----------
        model : str
            Model fingerprint.
        texts : iterable of str
            Exact texts (no normalisation: "Fever" and "fever" are different entries).
        dim : int, optional
            Expected dimensionality; rows of another size are ignored (treated as missing).

        Returns
        -------
        dict
            ``text -> float32 vector`` for the texts found; missing texts are absent (all of
            them when the cache cannot be read).
        """
        texts = list(dict.fromkeys(texts))

        def lookup(conn) -> dict[str, np.ndarray]:
            found: dict[str, np.ndarray] = {}
            for start in range(0, len(texts), _LOOKUP_CHUNK):
                # one statement per chunk, the texts passed as one JSON array: far fewer
                # round trips than a parameter per text
                rows = conn.execute(
                    "SELECT text, vector FROM vectors WHERE model = ? AND text IN (SELECT value FROM json_each(?))",
                    (model, json.dumps(texts[start:start + _LOOKUP_CHUNK])),
                )
                for text, blob in rows:
                    if not isinstance(blob, bytes) or len(blob) % 4:
                        continue  # not float32 bytes: a damaged row counts as missing
                    vector = np.frombuffer(blob, dtype=np.float32)
                    if dim is None or vector.shape[0] == dim:
                        found[text] = vector
            return found

        return self._run("lookup", lookup, {}) if texts else {}

    def cached_texts(self, model: str, texts) -> set[str]:
        """Which of ``texts`` have a vector for ``model``, without reading the vectors.

        What an estimate counts as missing before encoding (:mod:`bioviz.models.encoding_estimate`)
        and what a claimant encodes (:mod:`bioviz.models.shared_encoding`).
        """
        texts = list(dict.fromkeys(texts))

        def select(conn) -> set[str]:
            found: set[str] = set()
            for start in range(0, len(texts), _LOOKUP_CHUNK):
                found.update(text for (text,) in conn.execute(
                    "SELECT text FROM vectors WHERE model = ? AND text IN (SELECT value FROM json_each(?))",
                    (model, json.dumps(texts[start:start + _LOOKUP_CHUNK]))))
            return found

        return self._run("lookup", select, set()) if texts else set()

    def has_block(self, model: str, texts) -> bool:
        """True when exactly this list of texts is stored as a block for ``model`` (the file exists)."""
        return self._block_path(model, list(texts)).is_file()

    def _block_path(self, model: str, texts: list[str]) -> Path:
        return self.path.parent / "blocks" / f"{model}-{texts_digest(texts)}.npy"

    def get_block(self, model: str, texts) -> np.ndarray | None:
        """Vectors of exactly this list of texts (order included), if stored as a block.

        The array is memory-mapped read-only (see the module docstring): writing to it raises;
        copy it first to change it. Blocks are only ever replaced by a rename, never rewritten
        in place, so the mapping stays valid even when the file is set aside or cleared.
        A block that cannot be read (cut short, a damaged header), or does not hold one
        float32 row per text, is set aside.
        """
        texts = list(texts)

        def read(path: Path) -> np.ndarray:
            # mmap_mode checks the header and that the file holds all the rows it declares
            block = np.load(path, mmap_mode="r", allow_pickle=False)
            if block.ndim != 2 or len(block) != len(texts) or block.dtype != np.float32:
                raise ValueError(f"a {block.dtype} block of shape {block.shape} for {len(texts)} texts")
            return block

        return read_cache(self._block_path(model, texts), read)

    def put_block(self, model: str, texts, vectors: np.ndarray) -> Path | None:
        """Store the vectors of a whole list of texts as one ``.npy`` (atomically).

        Returns
        -------
        pathlib.Path or None
            The block's file, or None when the disk refused the write (logged, not raised).
        """
        path = self._block_path(model, list(texts))
        array = np.ascontiguousarray(vectors, dtype=np.float32)
        written = write_cache(path, lambda handle: np.save(handle, array, allow_pickle=False), suffix=".npy")
        return path if written else None

    def put(self, model: str, texts, vectors: np.ndarray, label: str | None = None) -> int:
        """Store ``vectors`` (rows aligned with ``texts``) for ``model``.

        Existing entries are kept (equal fingerprints give equal vectors, so whichever
        writer came first is right). Each chunk is one short transaction, so concurrent
        writers interleave instead of waiting for a whole level to be encoded. A chunk the
        disk refuses is rolled back and the rest skipped, with a warning.

        Returns
        -------
        int
            Number of rows written.
        """
        texts = list(texts)
        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        if len(texts) != len(vectors):
            raise ValueError(f"{len(texts)} texts but {len(vectors)} vectors")
        if not texts:
            return 0
        written = 0

        def insert(conn) -> int:
            nonlocal written
            written = 0  # a retry on a fresh file (the damaged one set aside) starts the count again
            for start in range(0, len(texts), _WRITE_CHUNK):
                rows = [(model, t, v.tobytes()) for t, v in
                        zip(texts[start:start + _WRITE_CHUNK], vectors[start:start + _WRITE_CHUNK])]
                with _transaction(conn):
                    before = conn.total_changes
                    conn.executemany("INSERT OR IGNORE INTO vectors (model, text, vector) VALUES (?, ?, ?)", rows)
                    changed = conn.total_changes - before
                    conn.execute(
                        "INSERT INTO models (model, label, dim, updated, vectors) VALUES (?, ?, ?, ?, ?) "
                        "ON CONFLICT(model) DO UPDATE SET label = excluded.label, updated = excluded.updated, "
                        "vectors = models.vectors + excluded.vectors",
                        (model, label, int(vectors.shape[1]), time.time(), changed),
                    )
                written += changed  # counted once the chunk is committed
            return written

        self._run("write", insert, None)
        return written

    def stats(self) -> list[dict]:
        """One row per model with vectors: fingerprint, label, dim, vectors, last update (epoch seconds).

        Reads the stored counts (a few rows, whatever the size of the cache); only a database
        that could not be given them (a read-only disk) is counted row by row.
        """

        def read(conn):
            if _has_counts(conn):
                return conn.execute("SELECT model, label, dim, updated, vectors FROM models "
                                    "WHERE vectors > 0 ORDER BY updated DESC").fetchall()
            counts = dict(conn.execute("SELECT model, COUNT(*) FROM vectors GROUP BY model"))
            models = conn.execute("SELECT model, label, dim, updated FROM models ORDER BY updated DESC").fetchall()
            rows = [(m, label, dim, updated, counts.pop(m, 0)) for m, label, dim, updated in models]
            return rows + [(m, None, None, None, n) for m, n in counts.items()]

        rows = self._run("statistics", read, [])
        return [{"model": m, "label": label, "dim": dim, "vectors": n, "updated": updated}
                for m, label, dim, updated, n in rows if n]

    def count(self, model: str) -> int:
        """How many vectors ``model`` has stored (the kept count: one row read).

        It grows with every chunk written, so a reader of an encoding's partial vectors
        (:meth:`bioviz.models.encoding_session.EncodingSession.partial`) looks its names up again
        only when it has moved.
        """

        def read(conn) -> int:
            if not _has_counts(conn):
                return conn.execute("SELECT COUNT(*) FROM vectors WHERE model = ?", (model,)).fetchone()[0]
            row = conn.execute("SELECT vectors FROM models WHERE model = ?", (model,)).fetchone()
            return int(row[0]) if row else 0

        return self._run("count", read, 0)

    def summary(self) -> dict:
        """``vectors`` (all models together), ``models`` and ``bytes`` on disk: a page's one-line caption."""
        rows = self.stats()
        return {"vectors": sum(r["vectors"] for r in rows), "models": len(rows), "bytes": self.size_bytes()}

    def size_bytes(self) -> int:
        """Bytes on disk (database, write-ahead log, blocks, and damaged copies set aside)."""
        files = [*self.path.parent.glob(self.path.name + "*"), *(self.path.parent / "blocks").glob("*.npy*")]
        total = 0
        for file in files:
            with contextlib.suppress(OSError):  # removed meanwhile by another process
                total += file.stat().st_size if file.is_file() else 0
        return total

    def clear(self, model: str | None = None) -> int:
        """Delete the vectors of one model fingerprint, or of every model.

        Other processes may keep reading and writing meanwhile (rows are deleted in a
        transaction; the file is never removed under them). Space is given back to the
        file system when everything is cleared; clearing everything also removes the
        damaged copies that were set aside.

        Returns
        -------
        int
            Number of vectors deleted.
        """

        def delete(conn) -> int:
            with _transaction(conn):
                if model is None:
                    deleted = conn.execute("DELETE FROM vectors").rowcount
                    conn.execute("DELETE FROM models")
                else:
                    deleted = conn.execute("DELETE FROM vectors WHERE model = ?", (model,)).rowcount
                    conn.execute("DELETE FROM models WHERE model = ?", (model,))
            if model is None:
                with contextlib.suppress(sqlite3.OperationalError):  # busy readers: reclaim later
                    conn.execute("VACUUM")
                    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            return deleted

        deleted = self._run("clear", delete, 0)
        blocks = self.path.parent / "blocks"
        doomed = list(blocks.glob(f"{model or ''}*.npy"))
        if model is None:
            doomed += [*self.path.parent.glob(f"{self.path.name}{CORRUPT_MARK}*"), *blocks.glob(f"*{CORRUPT_MARK}*")]
        for file in doomed:
            with contextlib.suppress(FileNotFoundError):
                file.unlink()
        logger.info("cleared %d cached vectors%s", deleted, f" of {model}" if model else "")
        return deleted


def _has_tables(conn: sqlite3.Connection) -> bool:
    """True when the ``vectors`` and ``models`` tables exist."""
    found = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    return {"vectors", "models"} <= found


def _has_counts(conn: sqlite3.Connection) -> bool:
    """True when the ``models`` table keeps each model's count of vectors."""
    return any(row[1] == "vectors" for row in conn.execute("PRAGMA table_info(models)"))


def _lock_timed_out(error: sqlite3.Error) -> bool:
    """Whether ``error`` is SQLite's "database is locked" after the busy timeout (SQLITE_BUSY)."""
    return getattr(error, "sqlite_errorname", "") == "SQLITE_BUSY" or "database is locked" in str(error)


@contextlib.contextmanager
def _transaction(conn: sqlite3.Connection):
    """``BEGIN IMMEDIATE`` ... ``COMMIT``, rolled back on any error (the error propagates)."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
        conn.execute("COMMIT")
    except BaseException:
        # a failed COMMIT or a damaged file may have ended the transaction already
        with contextlib.suppress(sqlite3.Error):
            conn.execute("ROLLBACK")
        raise
