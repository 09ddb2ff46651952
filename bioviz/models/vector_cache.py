"""On-disk cache of name vectors, keyed by model fingerprint and exact text.

One SQLite database (``BIOVIZ_HOME/embeddings/vectors.sqlite``) in WAL mode: readers never
block the writer, and several processes (the app, a CLI call, a training job) can write at
once; SQLite serialises the writers and every insert is one transaction, so a killed
process never leaves half a batch. Vectors are stored as raw float32 bytes (no pickle).
Lookups fetch only the texts asked for, so memory stays proportional to the request, not
to the size of the cache.

A request for many names at once (a whole level) is also stored as one *block*: a ``.npy``
file under ``embeddings/blocks`` named by the fingerprint and a hash of the exact text list,
so reopening that level is one file read instead of a lookup per name.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import sqlite3
import time
from pathlib import Path

import numpy as np

from bioviz.paths import atomic_path, subdir

logger = logging.getLogger(__name__)

DB_NAME = "vectors.sqlite"
BLOCK_MIN = 2000  # requests of at least this many texts are also stored as a block
_WRITE_CHUNK = 4000  # rows per insert transaction: short enough for other writers to interleave
_LOOKUP_CHUNK = 20_000  # texts per lookup statement (bounds the JSON argument's size)
_BUSY_TIMEOUT_MS = 60_000

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
    updated REAL
);
"""


def default_path() -> Path:
    """``BIOVIZ_HOME/embeddings/vectors.sqlite``."""
    return subdir("embeddings") / DB_NAME


class VectorCache:
    """Vectors of texts per model fingerprint, in one SQLite file.

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
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self._connect() as conn:
            conn.executescript(_SCHEMA)

    @contextlib.contextmanager
    def _connect(self):
        # A connection per call: cheap, safe across threads (Streamlit) and forks (jobs).
        conn = sqlite3.connect(self.path, timeout=_BUSY_TIMEOUT_MS / 1000, isolation_level=None)
        try:
            conn.execute(f"PRAGMA busy_timeout={_BUSY_TIMEOUT_MS}")
            conn.execute("PRAGMA journal_mode=WAL")
            # NORMAL is durable at each checkpoint and never corrupts in WAL mode; FULL would
            # fsync every insert for vectors that can always be recomputed.
            conn.execute("PRAGMA synchronous=NORMAL")
            yield conn
        finally:
            conn.close()

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
            ``text -> float32 vector`` for the texts found; missing texts are absent.
        """
        texts = list(dict.fromkeys(texts))
        found: dict[str, np.ndarray] = {}
        with self._connect() as conn:
            for start in range(0, len(texts), _LOOKUP_CHUNK):
                # one statement per chunk, the texts passed as one JSON array: far fewer
                # round trips than a parameter per text
                rows = conn.execute(
                    "SELECT text, vector FROM vectors WHERE model = ? AND text IN (SELECT value FROM json_each(?))",
                    (model, json.dumps(texts[start:start + _LOOKUP_CHUNK])),
                )
                for text, blob in rows:
                    vector = np.frombuffer(blob, dtype=np.float32)
                    if dim is None or vector.shape[0] == dim:
                        found[text] = vector
        return found

    def _block_path(self, model: str, texts: list[str]) -> Path:
        digest = hashlib.sha256("\x1f".join(texts).encode("utf-8")).hexdigest()[:24]
        return self.path.parent / "blocks" / f"{model}-{digest}.npy"

    def get_block(self, model: str, texts) -> np.ndarray | None:
        """Vectors of exactly this list of texts (order included), if stored as a block."""
        texts = list(texts)
        path = self._block_path(model, texts)
        try:
            block = np.load(path, allow_pickle=False)
        except (OSError, ValueError):
            return None
        return block if block.ndim == 2 and len(block) == len(texts) else None

    def put_block(self, model: str, texts, vectors: np.ndarray) -> Path:
        """Store the vectors of a whole list of texts as one ``.npy`` (atomically)."""
        path = self._block_path(model, list(texts))
        with atomic_path(path, suffix=".npy") as tmp, open(tmp, "wb") as handle:
            np.save(handle, np.ascontiguousarray(vectors, dtype=np.float32), allow_pickle=False)
        return path

    def put(self, model: str, texts, vectors: np.ndarray, label: str | None = None) -> int:
        """Store ``vectors`` (rows aligned with ``texts``) for ``model``.

        Existing entries are kept (equal fingerprints give equal vectors, so whichever
        writer came first is right). Each chunk is one short transaction, so concurrent
        writers interleave instead of waiting for a whole level to be encoded.

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
        with self._connect() as conn:
            for start in range(0, len(texts), _WRITE_CHUNK):
                rows = [(model, t, v.tobytes()) for t, v in
                        zip(texts[start:start + _WRITE_CHUNK], vectors[start:start + _WRITE_CHUNK])]
                conn.execute("BEGIN IMMEDIATE")
                try:
                    before = conn.total_changes
                    conn.executemany("INSERT OR IGNORE INTO vectors (model, text, vector) VALUES (?, ?, ?)", rows)
                    written += conn.total_changes - before
                    conn.execute(
                        "INSERT INTO models (model, label, dim, updated) VALUES (?, ?, ?, ?) "
                        "ON CONFLICT(model) DO UPDATE SET label = excluded.label, updated = excluded.updated",
                        (model, label, int(vectors.shape[1]), time.time()),
                    )
                    conn.execute("COMMIT")
                except BaseException:
                    conn.execute("ROLLBACK")
                    raise
        return written

    def stats(self) -> list[dict]:
        """One row per model: fingerprint, label, dim, vectors, last update (epoch seconds)."""
        with self._connect() as conn:
            counts = dict(conn.execute("SELECT model, COUNT(*) FROM vectors GROUP BY model"))
            models = conn.execute("SELECT model, label, dim, updated FROM models ORDER BY updated DESC").fetchall()
        rows = [{"model": m, "label": label, "dim": dim, "vectors": counts.pop(m, 0), "updated": updated}
                for m, label, dim, updated in models]
        rows += [{"model": m, "label": None, "dim": None, "vectors": n, "updated": None} for m, n in counts.items()]
        return [r for r in rows if r["vectors"]]

    def size_bytes(self) -> int:
        """Bytes on disk (database, write-ahead log and blocks)."""
        files = [*self.path.parent.glob(self.path.name + "*"), *(self.path.parent / "blocks").glob("*.npy")]
        return sum(p.stat().st_size for p in files if p.is_file())

    def clear(self, model: str | None = None) -> int:
        """Delete the vectors of one model fingerprint, or of every model.

        Other processes may keep reading and writing meanwhile (rows are deleted in a
        transaction; the file is never removed under them). Space is given back to the
        file system when everything is cleared.

        Returns
        -------
        int
            Number of vectors deleted.
        """
        with self._connect() as conn:
            conn.execute("BEGIN IMMEDIATE")
            try:
                if model is None:
                    deleted = conn.execute("DELETE FROM vectors").rowcount
                    conn.execute("DELETE FROM models")
                else:
                    deleted = conn.execute("DELETE FROM vectors WHERE model = ?", (model,)).rowcount
                    conn.execute("DELETE FROM models WHERE model = ?", (model,))
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            for block in (self.path.parent / "blocks").glob(f"{model or ''}*.npy"):
                with contextlib.suppress(FileNotFoundError):
                    block.unlink()
            if model is None:
                with contextlib.suppress(sqlite3.OperationalError):  # busy readers: reclaim later
                    conn.execute("VACUUM")
                    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        logger.info("cleared %d cached vectors%s", deleted, f" of {model}" if model else "")
        return deleted
