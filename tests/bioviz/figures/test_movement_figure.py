"""bioviz.figures.movement: capped arrows coloured by split part, on one shared scale."""

import numpy as np

from bioviz.figures.movement import MAX_ARROWS, movement_figure
from bioviz.figures.theme import part_colours
from bioviz.ontology import make_split
from bioviz.views.movement import arrow_rows, measure_movement
from tests.bioviz.figures.figure_samples import hpo_view, movement_sample, umap_like_coords


def test_arrows_are_coloured_by_part_and_point_where_the_name_went():
    view = hpo_view(names_per_class=30)
    coords_a, coords_b = umap_like_coords(view)
    parts = make_split(view, shots=5).part_of(len(view.names))
    parts[parts == "unused"] = "test"  # most names in the split: arrows by part (else by class)
    fig = movement_sample(view, coords_a, coords_b, parts, "residual · HPO d1 · 15-shot")
    heads = [t for t in fig.data if t.marker is not None and t.marker.symbol == "arrow" and t.customdata is not None]
    assert heads, "no arrowheads"
    colours = part_colours()
    assert {h.marker.color for h in heads} <= set(colours.values())
    assert sum(len(h.x) for h in heads) == 150
    legend = [t.name for t in fig.data if t.showlegend is not False]
    assert any(name.startswith("train (") for name in legend)
    assert fig.layout.yaxis.scaleanchor == "x"  # one scale: the drawn angle is the data's direction
    assert fig.layout.title.text.startswith("What training moved · minilm → residual")
    row = int(heads[0].customdata[0][0])
    assert heads[0].customdata[0][1] == view.names[row]


def test_arrow_count_is_capped_and_angles_follow_the_move():
    view = hpo_view(names_per_class=40)
    rows = np.arange(len(view.names))
    coords_a = np.random.default_rng(0).normal(size=(len(rows), 2))
    coords_b = coords_a + [1.0, 0.0]  # every name moves right: 90° clockwise from up
    vectors = np.eye(len(rows), 8, dtype=np.float32) + 0.01
    movement = measure_movement(vectors, vectors, view.labels, rows=rows, coords_a=coords_a, coords_b=coords_b, k=3)
    fig = movement_figure(view, movement, coords_a, coords_b, arrows=arrow_rows(movement, view.labels, count=5_000))
    heads = [t for t in fig.data if t.marker is not None and t.marker.symbol == "arrow" and t.customdata is not None]
    assert sum(len(h.x) for h in heads) == MAX_ARROWS
    assert np.allclose(np.concatenate([np.asarray(h.marker.angle) for h in heads]), 90.0)
