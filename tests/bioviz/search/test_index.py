"""NeighbourIndex: exact top-k (single and batch), class restriction, exclusion, ranks, approximate kinds."""

import numpy as np
import pytest

from bioviz.errors import BiovizError
from bioviz.search.index import NeighbourIndex
from bioviz.ontology import level_view, load_source
from bioviz.space import Space, l2_normalise


def space_of(vectors, prefix="n"):
    vectors = l2_normalise(np.asarray(vectors, dtype=np.float32))
    return Space(tuple(f"{prefix}{i}" for i in range(len(vectors))), vectors, "test")


@pytest.fixture
def small():
    # four names on a circle: n0 and n1 close, n2 opposite, n3 orthogonal
    space = space_of([[1, 0], [0.9, 0.1], [-1, 0], [0, 1]])
    return NeighbourIndex(space, concept_ids=["C0", "C1", "C2", "C3"], classes=["a", "a", "b", "b"],
                          class_labels=["Class A", "Class A", "Class B", "Class B"])


def test_single_query_returns_ranked_hits_with_metadata(small):
    hits = small.search(np.array([1, 0], dtype=np.float32), k=3)
    assert [h.name for h in hits] == ["n0", "n1", "n3"]
    assert [h.rank for h in hits] == [1, 2, 3]
    assert hits[0].concept_id == "C0" and hits[0].class_id == "a" and hits[0].class_label == "Class A"
    assert hits[0].score == pytest.approx(1.0) and hits[0].score >= hits[1].score >= hits[2].score
    assert hits[1].as_dict()["row"] == 1


def test_batch_query_returns_one_list_per_query(small):
    queries = small.vectors[[0, 2]]
    results = small.search(queries, k=2)
    assert [[h.name for h in hits] for hits in results] == [["n0", "n1"], ["n2", "n3"]]


def test_restrict_to_a_class_and_exclude_rows(small):
    query = small.vectors[0]
    assert [h.name for h in small.search(query, k=5, restrict_class="b")] == ["n3", "n2"]
    assert [h.name for h in small.search(query, k=2, exclude_rows=[0])] == ["n1", "n3"]
    with pytest.raises(BiovizError, match="unknown class"):
        small.search(query, restrict_class="zzz")


def test_k_larger_than_the_index_and_bad_inputs(small):
    assert len(small.search(small.vectors[0], k=50)) == 4
    with pytest.raises(BiovizError, match="dimensions"):
        small.search(np.ones(3, dtype=np.float32))
    with pytest.raises(BiovizError, match="k must be"):
        small.search(small.vectors[0], k=0)
    with pytest.raises(BiovizError, match="unknown index kind"):
        NeighbourIndex(small.space, kind="lsh")


def test_ranks_in_the_full_ranking(small):
    ranks = small.ranks(small.vectors[0], [2, 0, 3])
    assert ranks.tolist() == [4, 1, 3]
    assert small.ranks(small.vectors[0], [3], exclude_rows=[0]).tolist() == [2]


def test_exact_kind_equals_flat_search_even_with_near_ties():
    rng = np.random.default_rng(0)
    base = rng.standard_normal((300, 32)).astype(np.float32)
    # near-duplicates make float16 ties at the cut-off, forcing the float32 fallback
    vectors = np.vstack([base, base + 1e-4 * rng.standard_normal(base.shape).astype(np.float32), base[:50]])
    space = space_of(vectors)
    exact, flat = NeighbourIndex(space, kind="exact"), NeighbourIndex(space, kind="flat")
    queries = l2_normalise(vectors[:100] + 0.01 * rng.standard_normal((100, 32)).astype(np.float32))
    for got, want in zip(exact.search(queries, k=10), flat.search(queries, k=10)):
        np.testing.assert_allclose([h.score for h in got], [h.score for h in want], atol=1e-6)
        cut = want[-1].score + 1e-6  # rows strictly above the cut-off are the same rows
        assert {h.row for h in got if h.score > cut} == {h.row for h in want if h.score > cut}


@pytest.mark.parametrize("kind", ["hnsw", "ivf"])
def test_approximate_kinds_find_most_true_neighbours(kind):
    rng = np.random.default_rng(1)
    space = space_of(rng.standard_normal((3000, 16)))
    approx, flat = NeighbourIndex(space, kind=kind), NeighbourIndex(space, kind="flat")
    queries = space.vectors[:50]
    recall = np.mean([len({h.row for h in a} & {h.row for h in f}) / 10
                      for a, f in zip(approx.search(queries, k=10), flat.search(queries, k=10))])
    assert recall > 0.8
    assert approx.kind == kind


@pytest.mark.parametrize("kind", ["ivf", "hnsw"])
def test_a_large_class_is_searched_in_the_approximate_index_without_a_copy(kind):
    rng = np.random.default_rng(6)
    centres = l2_normalise(rng.standard_normal((100, 16)))
    space = space_of(centres[rng.integers(0, 100, 3000)] + 0.2 * rng.standard_normal((3000, 16)))
    classes = ["big" if i % 3 else "small" for i in range(3000)]
    approx = NeighbourIndex(space, classes=classes, kind=kind, approximate_above=1500)
    flat = NeighbourIndex(space, classes=classes, kind="flat")
    queries = space.vectors[:40]
    for name in ("big", "small"):
        got = approx.search(queries, k=10, restrict_class=name, exclude_rows=[0])
        want = flat.search(queries, k=10, restrict_class=name, exclude_rows=[0])
        assert all(h.class_id == name and h.row != 0 for hits in got for h in hits)
        assert all(len(hits) == 10 for hits in got)
        assert np.mean([len({h.row for h in g} & {h.row for h in w}) / 10 for g, w in zip(got, want)]) >= 0.95
    rows, searcher = approx._class_rows["big"]
    assert len(rows) == 2000 and not hasattr(searcher, "ntotal")  # a bitmap selector, not a copied index
    assert hasattr(approx._class_rows["small"][1], "ntotal")  # 1,000 rows: an exact copy


def test_auto_switches_to_ivf_above_the_threshold():
    space = space_of(np.random.default_rng(2).standard_normal((200, 8)))
    assert NeighbourIndex(space).kind == "exact"
    assert NeighbourIndex(space, approximate_above=100).kind == "ivf"


@pytest.mark.parametrize("kind", ["ivf", "hnsw"])
def test_approximate_kinds_keep_float16_codes_and_rank_by_exact_float32_scores(kind):
    # clustered names, as a level's are: the default settings find nearly all true neighbours
    rng = np.random.default_rng(4)
    centres = l2_normalise(rng.standard_normal((200, 32)))
    space = space_of(centres[rng.integers(0, 200, 4000)] + 0.15 * rng.standard_normal((4000, 32)))
    approx, flat = NeighbourIndex(space, kind=kind), NeighbourIndex(space, kind="flat")
    queries = l2_normalise(space.vectors[:100] + 0.05 * rng.standard_normal((100, 32)))
    assert approx.code_bytes_per_row == 2 * 32  # float16 codes: half the bytes of a float32 copy
    got, want = approx.search(queries, k=10), flat.search(queries, k=10)
    assert np.mean([len({h.row for h in g} & {h.row for h in w}) / 10 for g, w in zip(got, want)]) >= 0.98
    for query, hits in zip(queries, got):
        scores = [h.score for h in hits]
        assert scores == sorted(scores, reverse=True)
        # the float32 score of the row, not its float16 code's (off by ~1e-4)
        np.testing.assert_allclose(scores, space.vectors[[h.row for h in hits]] @ query, rtol=0, atol=1e-6)


def test_from_view_carries_concepts_and_classes(data_dir, tmp_home):
    view = level_view(load_source(str(data_dir / "mini.obo")), depth=1)
    rng = np.random.default_rng(3)
    space = space_of(rng.standard_normal((len(view.names), 8)))
    space = Space(tuple(view.names), space.vectors, "test")
    index = NeighbourIndex.from_view(space, view)
    hit = index.search(space.vectors[0], k=1)[0]
    assert hit.name == view.names[0] and hit.concept_id == view.name_concepts[0]
    assert hit.class_id == view.classes[view.labels[0]] and hit.class_label == view.class_labels[view.labels[0]]
    with pytest.raises(ValueError):
        NeighbourIndex.from_view(space.subset([0, 1]), view)


def test_subset_keeps_metadata_and_rows_named_normalises(small):
    part = small.subset([3, 1])
    assert part.space.names == ("n3", "n1") and part.concept_ids == ["C3", "C1"] and part.classes == ["b", "a"]
    assert [h.name for h in part.search(small.vectors[0], k=2)] == ["n1", "n3"]
    assert small.rows_named("  N1 ") == [1] and small.rows_named("absent") == []
