"""VectorCache.stats reads stored counts (pages call it on every rerun) instead of counting the table."""

from __future__ import annotations

import sqlite3

import numpy as np
import pytest

from bioviz.models import vector_cache
from bioviz.models.vector_cache import VectorCache, default_path


def vectors(n, dim=4, seed=0):
    return np.random.default_rng(seed).standard_normal((n, dim)).astype(np.float32)


@pytest.fixture
def statements(monkeypatch):
    """The SQL statements the cache runs, recorded."""
    seen: list[str] = []
    connect = sqlite3.connect

    def recording(*args, **kwargs):
        conn = connect(*args, **kwargs)
        conn.set_trace_callback(seen.append)
        return conn

    monkeypatch.setattr(vector_cache.sqlite3, "connect", recording)
    return seen


def counts(cache: VectorCache) -> dict:
    return {row["model"]: row["vectors"] for row in cache.stats()}


def test_stats_read_stored_counts_without_scanning_the_vectors(tmp_home, statements):
    cache = VectorCache()
    cache.put("fp-a", [f"a{i}" for i in range(30)], vectors(30), label="a")
    cache.put("fp-a", [f"a{i}" for i in range(20, 40)], vectors(20), label="a")  # 10 already there
    cache.put("fp-b", ["x"], vectors(1), label="b")
    statements.clear()
    assert counts(cache) == {"fp-a": 40, "fp-b": 1}
    assert not [s for s in statements if "COUNT(" in s.upper() or "FROM VECTORS" in s.upper()], statements
    assert cache.summary() == {"vectors": 41, "models": 2, "bytes": cache.size_bytes()}
    cache.clear("fp-a")
    assert counts(cache) == {"fp-b": 1}
    cache.clear()
    assert cache.stats() == [] and cache.summary()["vectors"] == 0


def legacy_database(path, rows: dict[str, int], registered: tuple[str, ...]):
    """A vectors.sqlite as written before models.vectors existed (``rows``: model -> vectors)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with sqlite3.connect(path) as conn:
        conn.executescript("""
            CREATE TABLE vectors (model TEXT NOT NULL, text TEXT NOT NULL, vector BLOB NOT NULL,
                                  PRIMARY KEY (model, text)) WITHOUT ROWID;
            CREATE TABLE models (model TEXT PRIMARY KEY, label TEXT, dim INTEGER, updated REAL);
        """)
        for model, n in rows.items():
            conn.executemany("INSERT INTO vectors VALUES (?, ?, ?)",
                             [(model, f"t{i}", vectors(1)[0].tobytes()) for i in range(n)])
        conn.executemany("INSERT INTO models VALUES (?, ?, 4, 1.0)", [(m, f"label {m}") for m in registered])


def test_a_database_from_before_the_counts_is_counted_once_and_then_kept(tmp_home):
    legacy_database(default_path(), {"old": 5, "orphan": 2}, registered=("old", "empty"))
    cache = VectorCache()
    with sqlite3.connect(default_path()) as conn:  # counted once, on first open, into the models table
        assert dict(conn.execute("SELECT model, vectors FROM models")) == {"old": 5, "orphan": 2, "empty": 0}
    assert counts(cache) == {"old": 5, "orphan": 2}  # a model with vectors but no models row is listed too
    cache.put("old", ["t1", "new"], vectors(2))
    assert counts(VectorCache()) == {"old": 6, "orphan": 2}
    assert cache.get("old", ["t0"]) and len(cache.get("old", [f"t{i}" for i in range(5)])) == 5


def test_a_database_that_cannot_be_given_counts_is_counted(tmp_home, monkeypatch):
    legacy_database(default_path(), {"old": 3}, registered=("old",))

    def read_only(conn):
        raise sqlite3.OperationalError("attempt to write a readonly database")

    monkeypatch.setattr(vector_cache, "_transaction", read_only)
    cache = VectorCache()
    assert counts(cache) == {"old": 3} and cache.summary()["vectors"] == 3
