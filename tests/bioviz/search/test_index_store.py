"""Approximate indexes stored in BIOVIZ_HOME/indexes: round trip, damaged files set aside, progress."""

import logging

import numpy as np
import pytest

from bioviz.search import index_store
from bioviz.search.index import NeighbourIndex
from bioviz.space import Space, l2_normalise


def clustered_space(n=2000, dim=16, seed=0):
    rng = np.random.default_rng(seed)
    centres = l2_normalise(rng.standard_normal((n // 20, dim)))
    vectors = l2_normalise(centres[rng.integers(0, len(centres), n)] + 0.2 * rng.standard_normal((n, dim)))
    return Space(tuple(f"n{i}" for i in range(n)), vectors, "test")


def stored(tmp_home):
    return sorted((tmp_home / index_store.FOLDER).glob(f"*{index_store.SUFFIX}"))


def rows_and_scores(index, queries):
    return [[(h.row, h.score) for h in hits] for hits in index.search(queries, k=10)]


@pytest.mark.parametrize("kind", ["ivf", "hnsw"])
def test_a_built_index_is_stored_and_read_back_with_equal_results(tmp_home, kind):
    space = clustered_space()
    first = NeighbourIndex(space, kind=kind, persist=True)
    assert not first.from_disk and len(stored(tmp_home)) == 1
    again = NeighbourIndex(space, kind=kind, persist=True)
    assert again.from_disk
    queries = space.vectors[:20]
    assert rows_and_scores(again, queries) == rows_and_scores(first, queries)


def test_other_vectors_or_settings_get_their_own_file(tmp_home):
    space = clustered_space()
    NeighbourIndex(space, kind="ivf", persist=True)
    assert not NeighbourIndex(clustered_space(seed=1), kind="ivf", persist=True).from_disk
    assert not NeighbourIndex(space, kind="ivf", nlist=8, persist=True).from_disk
    assert len(stored(tmp_home)) == 3


def test_small_indexes_are_not_stored_unless_asked(tmp_home):
    NeighbourIndex(clustered_space(), kind="ivf")
    NeighbourIndex(clustered_space(), kind="exact", persist=True)  # only approximate kinds are stored
    assert stored(tmp_home) == []


@pytest.mark.parametrize("how", ["garbage", "truncated", "empty", "another index"])
def test_a_damaged_or_unfit_index_file_is_set_aside_and_rebuilt(tmp_home, caplog, how):
    space = clustered_space()
    first = NeighbourIndex(space, kind="ivf", persist=True)
    [path] = stored(tmp_home)
    raw = path.read_bytes()
    if how == "garbage":
        path.write_bytes(np.random.default_rng(5).integers(0, 256, len(raw), dtype=np.uint8).tobytes())
    elif how == "truncated":
        path.write_bytes(raw[: len(raw) // 2])
    elif how == "empty":
        path.write_bytes(b"")
    else:  # a sound file of fewer rows under this name
        import faiss

        faiss.write_index(NeighbourIndex(space.subset(range(500)), kind="ivf").index, str(path))
    with caplog.at_level(logging.WARNING):
        again = NeighbourIndex(space, kind="ivf", persist=True)
    assert not again.from_disk
    assert any("set aside" in r.getMessage() for r in caplog.records)
    assert len(list(path.parent.glob(f"{path.name}.corrupt-*"))) == 1
    assert rows_and_scores(again, space.vectors[:20]) == rows_and_scores(first, space.vectors[:20])
    assert NeighbourIndex(space, kind="ivf", persist=True).from_disk  # the rebuilt index was stored again


def test_a_write_the_disk_refuses_is_skipped(tmp_home, monkeypatch, caplog):
    import faiss

    def refuse(index, path):
        raise RuntimeError("Error: 'f' failed: could not open for writing: No space left on device")

    monkeypatch.setattr(faiss, "write_index", refuse)
    with caplog.at_level(logging.WARNING):
        index = NeighbourIndex(clustered_space(), kind="ivf", persist=True)
    assert len(index.search(index.vectors[0], k=5)) == 5
    assert list((tmp_home / index_store.FOLDER).glob("*")) == []  # no half-written file left
    assert any("not storing the search index" in r.getMessage() for r in caplog.records)


def test_build_progress_counts_rows_added_in_chunks(tmp_home, monkeypatch):
    from bioviz.search import index as index_module

    monkeypatch.setattr(index_module, "ADD_CHUNK", 700)
    space = clustered_space()
    calls = []
    NeighbourIndex(space, kind="ivf", persist=True, progress=lambda done, total: calls.append((done, total)))
    assert calls == [(0, 2000), (700, 2000), (1400, 2000), (2000, 2000)]
    calls.clear()
    NeighbourIndex(space, kind="ivf", persist=True, progress=lambda done, total: calls.append((done, total)))
    assert calls == [(2000, 2000)]  # read from disk: done at once
