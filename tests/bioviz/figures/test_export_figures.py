"""Figures that survive export (issue 27, item 3): the cases a real-browser walk found broken."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from bioviz.figures import similarity_figures
from bioviz.figures.text import plain
from tests.bioviz.figures.figure_samples import ICD10_CHAPTERS, similarity_comparison


def similar_tails():
    """Two terms that differ only after 60 characters, and a diagonal a hair below 1."""
    comparison = similarity_comparison(8)
    terms = list(comparison.terms)
    head = "Other specified disorders of white blood cells with abnormal laboratory findings"
    terms[3], terms[4] = f"{head}, type A", f"{head}, type B"
    b = comparison.b.copy()
    b[np.diag_indices(len(b))] = 1.0 - 1e-9
    return replace(comparison, terms=tuple(terms), b=b,
                   model_b="residual · ICD-10 d1 · 15-shot · a long run name that runs on")


def test_similarity_prints_no_negative_zero_and_tells_truncated_rows_apart():
    figs = similarity_figures(similar_tails(), subtitle="typed", colour_order=["III", "IV", "XVIII"],
                              group_labels=dict(ICD10_CHAPTERS))
    for fig in figs.values():
        for trace in fig.data:
            if trace.type == "heatmap" and trace.text is not None:
                cells = np.asarray(trace.text).ravel().tolist()
                assert not [c for c in cells if c.lstrip("+").startswith("-0.00")]
        rows = [plain(t) for t in fig.layout.yaxis.ticktext if t]
        assert len(rows) == len(set(rows)), rows
        columns = [plain(t) for t in fig.layout.xaxis.ticktext if t]
        assert len(columns) == len(set(columns)), columns
    # the difference's diagonal (1 - 1e-9 minus 1) reads 0.00, not -0.00
    diff = next(t for t in figs["difference"].data if t.type == "heatmap")
    assert np.asarray(diff.text)[0, 0] == "0.00"


def test_similarity_panel_titles_keep_the_whole_model_name():
    fig = similarity_figures(similar_tails(), subtitle="typed")["pair"]
    titles = " ".join(plain(a.text).replace("\n", " ") for a in fig.layout.annotations[:2])
    assert "a long run name that runs on" in titles and "…" not in titles


def label_boxes(fig, col: int, width: int = 1000) -> list[tuple[float, float, float, float]]:
    """Pixel boxes of the class names written on panel ``col`` of a labelled map."""
    from bioviz.figures.text import line_height, text_width

    suffix = "" if col == 1 else str(col)
    xaxis, yaxis = fig.layout[f"xaxis{suffix}"], fig.layout[f"yaxis{suffix}"]
    plot_w = width - fig.layout.margin.l - fig.layout.margin.r
    plot_h = fig.layout.height - fig.layout.margin.t - fig.layout.margin.b
    (x0, x1), (y0, y1) = xaxis.range, yaxis.range
    # scaleanchor: plotly draws both axes at the smaller of the two scales
    scale = min((xaxis.domain[1] - xaxis.domain[0]) * plot_w / (x1 - x0),
                (yaxis.domain[1] - yaxis.domain[0]) * plot_h / (y1 - y0))
    out = []
    for note in fig.layout.annotations:
        if note.xref != f"x{suffix}":
            continue
        w = text_width(note.text, note.font.size) + 8
        h = line_height(note.font.size) * (note.text.count("<br>") + 1) + 6
        cx, cy = note.x * scale, note.y * scale
        out.append((cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2))
    return out


def test_disparate_pair_keeps_both_panels_sized_with_apart_labels_and_no_bare_grid():
    from bioviz.figures import projection_pair_figure
    from bioviz.views.projection import procrustes_align
    from tests.bioviz.figures.figure_samples import disparate_coords, hpo_view

    view = hpo_view(names_per_class=30)
    a, b = disparate_coords(view)
    aligned, disparity = procrustes_align(a, b)
    assert disparity > 0.8
    fig = projection_pair_figure(view, np.arange(len(view.names)), a, aligned, model_a="char-tfidf", model_b="minilm",
                                 contours=True, disparity=disparity, width=1000)
    # each panel's own axes, said in the caption; the compared panel is not a small blob
    spans = [np.ptp(fig.layout[axis].range) for axis in ("xaxis", "xaxis2")]
    assert spans[1] / spans[0] > 0.5 and spans[0] / spans[1] > 0.5
    assert "each panel has its own axes" in " ".join(plain(a.text) for a in fig.layout.annotations)
    for axis in ("xaxis", "xaxis2", "yaxis", "yaxis2"):
        assert fig.layout[axis].showgrid is False and fig.layout[axis].showticklabels is False
    for col in (1, 2):
        boxes = label_boxes(fig, col)
        assert len(boxes) >= 10, f"panel {col}: only {len(boxes)} class names placed"
        for i, p in enumerate(boxes):
            for q in boxes[i + 1:]:
                overlap = min(p[2], q[2]) - max(p[0], q[0]), min(p[3], q[3]) - max(p[1], q[1])
                assert min(overlap) <= 0.5, f"panel {col}: class names overlap: {p} {q}"


def test_one_model_map_has_one_panel():
    from bioviz.figures import projection_map_figure
    from tests.bioviz.figures.figure_samples import hpo_view, umap_like_coords

    view = hpo_view(names_per_class=10)
    coords, _ = umap_like_coords(view)
    fig = projection_map_figure(view, np.arange(len(view.names)), coords, "char-tfidf", contours=True)
    assert "xaxis2" not in fig.layout and fig.layout.xaxis.showgrid is False
    assert "char-tfidf" in fig.layout.title.text and " vs " not in fig.layout.title.text
    assert {t.xaxis for t in fig.data} == {"x"}


def test_movement_arrows_outside_a_split_are_coloured_by_class():
    from bioviz.figures.theme import class_colours
    from tests.bioviz.figures.figure_samples import hpo_view, movement_sample, umap_like_coords

    view = hpo_view(names_per_class=30)
    coords_a, coords_b = umap_like_coords(view)
    unused = np.full(len(view.names), "unused", dtype=object)
    fig = movement_sample(view, coords_a, coords_b, unused, "minilm")
    heads = [t for t in fig.data if t.marker is not None and t.marker.symbol == "arrow" and t.customdata is not None]
    colours = {h.marker.color for h in heads}
    assert len(colours) > 5 and colours <= set(class_colours(view.classes).values())
    assert sum(len(h.x) for h in heads) == 150
    legend = " ".join(t.name for t in fig.data if t.showlegend is not False)
    assert "not in the split" not in legend and "Abnormality of" in legend
    assert "coloured by class" in " ".join(a.text for a in fig.layout.annotations)


def test_movement_is_offered_only_for_a_run_against_a_model_it_was_trained_from(tmp_path):
    import json

    from bioviz.models.model_spec import ModelSpec, input_chain, trained_from

    def run(name: str, config: dict) -> ModelSpec:
        path = tmp_path / name
        path.mkdir()
        (path / "run.json").write_text(json.dumps({"run_id": name, "config": config, "metrics": {}}))
        (path / "config.json").write_text("{}")  # no weights: a config.json makes the stand-in parse as a model
        return ModelSpec.parse(str(path))

    minilm, tfidf = ModelSpec.parse("minilm"), ModelSpec.parse("char-tfidf")
    head = run("head", {"input_model": "minilm"})
    again = run("again", {"init": head.spec})
    assert input_chain(again) == [head, minilm]  # ModelSpecs, each step parsed from its run.json's text
    assert trained_from(head, minilm) and trained_from(again, minilm) and trained_from(again, head)
    assert not trained_from(minilm, tfidf) and not trained_from(tfidf, minilm)
    assert not trained_from(head, tfidf) and not trained_from(minilm, head) and not trained_from(head, None)
    loop = run("loop", {"init": str(tmp_path / "loop")})
    assert input_chain(loop) == [] and not trained_from(loop, minilm)


def test_movement_with_a_few_shot_split_still_colours_the_many_unsplit_arrows_by_class():
    from bioviz.figures.movement import colour_by
    from bioviz.ontology import make_split
    from tests.bioviz.figures.figure_samples import hpo_view, movement_sample, umap_like_coords

    view = hpo_view(names_per_class=30)
    coords_a, coords_b = umap_like_coords(view)
    parts = make_split(view, shots=1).part_of(len(view.names))
    fig = movement_sample(view, coords_a, coords_b, parts, "minilm")
    legend = " ".join(t.name for t in fig.data if t.showlegend is not False)
    assert "not in the split" not in legend
    assert colour_by(np.array(["train", "test", "unused"], dtype=object), np.arange(3)) == "split part"


def test_hierarchy_colour_scale_is_symmetric_and_fitted_to_small_gains():
    from bioviz.figures import hierarchy_figure
    from bioviz.views.hierarchy import largest_gain_node
    from tests.bioviz.figures.figure_samples import hpo_tree, hpo_view, small_gains

    view = hpo_view(names_per_class=5)
    tree = hpo_tree(view, depth=1)
    gains = small_gains(tree)
    fig = hierarchy_figure(tree, gains, kind="treemap", title="Hierarchy", caption="24 nodes")
    marker = fig.data[0].marker
    assert marker.cmin == -marker.cmax and marker.cmid == 0
    assert 0.18 <= marker.cmax <= 0.2  # fitted to +0.03..+0.18, not a fixed ±0.4
    caption = " ".join(plain(a.text) for a in fig.layout.annotations)
    assert "largest gains: Abnormality of the voice +0.180" in caption
    assert largest_gain_node(tree, gains) == "HP:0001608"
    assert largest_gain_node(tree, None) == tree.root
    # a node that is not drawn when the figure opens does not set the scale
    deep = hpo_tree(view, depth=2)
    values = small_gains(deep)
    values[-1] = 0.9
    fig = hierarchy_figure(deep, values, kind="treemap", title="Hierarchy", max_depth=2)
    assert fig.data[0].marker.cmax < 0.5
