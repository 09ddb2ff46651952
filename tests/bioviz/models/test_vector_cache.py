"""The SQLite vector cache: exact round trips, per-model keys, clearing, concurrent writers."""

import multiprocessing
import sqlite3
from pathlib import Path

import numpy as np

from bioviz.models.vector_cache import VectorCache, default_path


def vectors(n, dim=8, seed=0):
    return np.random.default_rng(seed).standard_normal((n, dim)).astype(np.float32)


def test_round_trip_is_bit_exact_and_only_asked_texts_come_back(tmp_home):
    cache = VectorCache()
    assert cache.path == default_path() and str(tmp_home) in str(cache.path)
    data = vectors(3)
    assert cache.put("fp-a", ["fever", "Fever", "cough"], data, label="a") == 3
    found = cache.get("fp-a", ["Fever", "headache"])
    assert list(found) == ["Fever"]  # exact text: case matters, unknown texts are absent
    np.testing.assert_array_equal(found["Fever"], data[1])


def test_entries_are_per_model_fingerprint(tmp_home):
    cache = VectorCache()
    cache.put("fp-a", ["fever"], vectors(1, seed=1))
    cache.put("fp-b", ["fever"], vectors(1, seed=2))
    np.testing.assert_array_equal(cache.get("fp-a", ["fever"])["fever"], vectors(1, seed=1)[0])
    np.testing.assert_array_equal(cache.get("fp-b", ["fever"])["fever"], vectors(1, seed=2)[0])
    assert cache.get("fp-c", ["fever"]) == {}


def test_existing_entries_are_kept_and_wrong_dims_ignored(tmp_home):
    cache = VectorCache()
    cache.put("fp", ["fever"], vectors(1, seed=1))
    assert cache.put("fp", ["fever"], vectors(1, seed=2)) == 0
    np.testing.assert_array_equal(cache.get("fp", ["fever"])["fever"], vectors(1, seed=1)[0])
    assert cache.get("fp", ["fever"], dim=16) == {}


def test_large_requests_cross_the_parameter_chunks(tmp_home):
    cache = VectorCache()
    texts = [f"name {i}" for i in range(2500)]
    data = vectors(2500, dim=4)
    cache.put("fp", texts, data)
    found = cache.get("fp", texts[::-1] + ["absent"])
    assert len(found) == 2500
    np.testing.assert_array_equal(found["name 1234"], data[1234])


def test_stats_and_clear(tmp_home):
    cache = VectorCache()
    cache.put("fp-a", ["a", "b"], vectors(2), label="model a")
    cache.put("fp-b", ["a"], vectors(1), label="model b")
    stats = {row["model"]: row for row in cache.stats()}
    assert stats["fp-a"]["vectors"] == 2 and stats["fp-a"]["label"] == "model a" and stats["fp-a"]["dim"] == 8
    assert cache.size_bytes() > 0
    assert cache.clear("fp-a") == 2
    assert cache.get("fp-a", ["a", "b"]) == {} and len(cache.get("fp-b", ["a"])) == 1
    assert cache.clear() == 1 and cache.stats() == []


def _writer(path, worker, rounds):
    cache = VectorCache(path)
    for r in range(rounds):
        # overlapping texts: every worker writes names 0..59 of each round, plus its own
        texts = [f"shared {r}-{i}" for i in range(60)] + [f"own {worker}-{r}-{i}" for i in range(20)]
        rows = np.array([[hash(t) % 1000, len(t), worker == -1, r] for t in texts], dtype=np.float32)
        rows[:, 2] = 0  # identical vectors for identical texts, whoever writes them
        cache.put("fp", texts, rows)
        cache.get("fp", texts[:10])


def test_concurrent_writers_from_several_processes_do_not_corrupt(tmp_home):
    path = default_path()
    VectorCache(path)
    ctx = multiprocessing.get_context("spawn")
    workers = [ctx.Process(target=_writer, args=(str(path), w, 15)) for w in range(4)]
    for p in workers:
        p.start()
    for p in workers:
        p.join(timeout=120)
    assert all(p.exitcode == 0 for p in workers)
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    cache = VectorCache(path)
    expected = [f"shared {r}-{i}" for r in range(15) for i in range(60)]
    expected += [f"own {w}-{r}-{i}" for w in range(4) for r in range(15) for i in range(20)]
    found = cache.get("fp", expected)
    assert len(found) == len(expected) == cache.stats()[0]["vectors"]
    assert found["shared 3-7"][1] == len("shared 3-7")


def test_blocks_store_a_whole_text_list_and_are_cleared_with_their_model(tmp_home):
    cache = VectorCache()
    texts = [f"name {i}" for i in range(50)]
    data = vectors(50)
    assert cache.get_block("fp-a", texts) is None
    cache.put_block("fp-a", texts, data)
    cache.put_block("fp-b", texts, data)
    np.testing.assert_array_equal(cache.get_block("fp-a", texts), data)
    assert cache.get_block("fp-a", texts[::-1]) is None  # keyed by the exact list, order included
    cache.clear("fp-a")
    assert cache.get_block("fp-a", texts) is None and cache.get_block("fp-b", texts) is not None
    cache.clear()
    assert cache.get_block("fp-b", texts) is None


def test_blocks_are_read_memory_mapped_and_read_only(tmp_home):
    cache = VectorCache()
    texts = [f"name {i}" for i in range(40)]
    data = vectors(40, dim=16)
    path = cache.put_block("fp", texts, data)
    block = cache.get_block("fp", texts)
    assert isinstance(block, np.memmap) and Path(block.filename) == path.resolve()  # no copy in memory
    np.testing.assert_array_equal(block, data)
    assert block.dtype == np.float32 and not block.flags.writeable
    cache.clear()  # a mapped block stays readable after its file is removed
    np.testing.assert_array_equal(block, data)
    path = cache.put_block("fp", texts, data)
    path.write_bytes(path.read_bytes()[:-16 * 4])  # the header declares 40 rows, the file holds 39
    assert cache.get_block("fp", texts) is None  # mapping checks the length: set aside, not a short array
    assert not path.exists() and len(list(path.parent.glob(f"{path.name}.corrupt-*"))) == 1


def test_cached_names_are_counted_without_reading_vectors(tmp_home):
    cache = VectorCache()
    texts = [f"t{i}" for i in range(30)]
    cache.put("fp", texts[:12], vectors(12))
    assert cache.cached_texts("fp", texts + texts[:5]) == set(texts[:12])  # distinct texts
    assert cache.cached_texts("other", texts) == set() and cache.cached_texts("fp", []) == set()
    assert not cache.has_block("fp", texts)
    cache.put_block("fp", texts, vectors(30))
    assert cache.has_block("fp", texts) and not cache.has_block("fp", texts[::-1])


def test_a_write_lock_held_past_the_busy_timeout_skips_writes_instead_of_failing(tmp_home, monkeypatch, caplog):
    """A process stopped inside a transaction (SIGSTOP, a debugger) holds the write lock: a page that took its
    claim over must get its vectors, not ``database is locked`` a minute later (seen in a full-suite run)."""
    import time

    from bioviz.models import vector_cache

    monkeypatch.setattr(vector_cache, "_BUSY_TIMEOUT_MS", 300)
    cache = VectorCache()
    holder = sqlite3.connect(cache.path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # the stopped process's open transaction
    vectors = np.eye(2, 4, dtype=np.float32)
    try:
        cache.put("m", ["a", "b"], vectors)  # waits the busy timeout once, then skips: no exception
        started = time.monotonic()
        cache.put("m", ["c", "d"], vectors)  # within the window: skipped at once, not another wait
        assert time.monotonic() - started < 0.2
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert [r.message for r in caplog.records].count(next(r.message for r in caplog.records
                                                          if "writes skipped" in r.message)) == 1
    assert cache.get("m", ["a", "b", "c", "d"]) == {}
    cache._writes_skipped_until = 0.0  # the window over, the lock released: stored again
    cache.put("m", ["a", "b"], vectors)
    assert set(cache.get("m", ["a", "b"])) == {"a", "b"}
