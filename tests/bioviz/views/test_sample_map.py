"""bioviz.views.sample_map and its figure: a PCA map of a sample of the names encoded so far."""

import numpy as np

from bioviz.figures.projection import sample_map_figure
from bioviz.models.encoding_session import PartialVectors
from bioviz.ontology import LevelSpec
from bioviz.space import l2_normalise
from bioviz.views.sample_map import SampleMap, sample_map


def partial_of(labels, stored, dim=16, seed=0):
    """PartialVectors of the rows ``stored`` (in a shuffled read order), class-clustered unit vectors."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(labels.max() + 1, dim)) * 2
    vectors = l2_normalise(centres[labels] + rng.normal(size=(len(labels), dim)) * 0.3).astype(np.float32)
    rows = rng.permutation(np.asarray(stored, dtype=np.int64))
    return PartialVectors(len(labels), rows, vectors[rows])


def test_the_sample_is_bounded_keeps_every_class_and_is_deterministic():
    labels = np.array([0] * 6_000 + [1] * 300 + [2] * 20)
    stored = np.arange(0, len(labels), 2)  # half the names encoded, every class among them
    partial = partial_of(labels, stored)
    found = sample_map(partial, labels, cap=1_000)
    assert isinstance(found, SampleMap) and found.coords.shape == (1_000, 2) and found.coords.dtype == np.float32
    assert set(found.rows) <= set(stored) and np.all(np.diff(found.rows) > 0)
    assert set(labels[found.rows]) == {0, 1, 2}  # the small class is not lost in the sample
    assert found.names_encoded == len(stored) and found.total == len(labels) and not found.complete
    assert found.marker == f"sample map: {len(stored):,} of {len(labels):,} names encoded, refining"
    # the same stored rows read in another order give the same map
    again = sample_map(partial_of(labels, stored, seed=0), labels, cap=1_000)
    reread = PartialVectors(partial.total, partial.rows[::-1].copy(), partial.vectors[::-1].copy())
    for other in (again, sample_map(reread, labels, cap=1_000)):
        assert np.array_equal(other.rows, found.rows) and np.allclose(other.coords, found.coords, atol=1e-5)


def test_nothing_encoded_gives_an_empty_map_and_everything_a_complete_one():
    labels = np.array([0, 0, 1, 1, 2])
    empty = sample_map(PartialVectors.empty(5, 16), labels)
    assert len(empty.rows) == 0 and empty.coords.shape == (0, 2) and empty.marker.startswith("sample map: 0 of 5")
    full = sample_map(partial_of(labels, np.arange(5)), labels)
    assert full.complete and full.marker == "complete: all 5 names encoded" and len(full.rows) == 5


def test_the_figure_is_a_titled_pca_map_coloured_by_class(data_dir):
    view = LevelSpec(str(data_dir / "views_table.tsv"), depth=1).load()
    stored = np.arange(0, len(view.names), 3)
    sample = sample_map(partial_of(np.asarray(view.labels), stored), view.labels)
    fig = sample_map_figure(view, sample, "minilm")
    title = fig.layout.title.text
    assert title.startswith(f"PCA sample map of {len(stored):,} names · minilm · ") and view.title in title
    points = [row for trace in fig.data for row in (trace.customdata if trace.customdata is not None else [])]
    assert sorted(int(p[0]) for p in points) == stored.tolist()
    classes = {trace.legendgroup for trace in fig.data if trace.customdata is not None}
    assert {view.classes[c] for c in np.unique(np.asarray(view.labels)[stored])} <= classes
