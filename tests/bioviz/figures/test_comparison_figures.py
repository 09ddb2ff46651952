"""Figure builders of the comparison views: projection pair, separation, similarity, hierarchy."""

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import pytest

from bioviz.figures import (export_config_as, hierarchy_figure, hypernym_ranking_figure, projection_pair_figure,
                            projection_table, selected_rows, separation_figure, similarity_figures, slug)
from bioviz.figures.text import plain, text_width
from bioviz.figures.theme import class_colours, pair_colours, theme
from bioviz.views.hierarchy import level_tree, node_scores
from bioviz.ontology import level_view, load_source, make_split
from bioviz.views.separation import Separation
from bioviz.views.similarity import SimilarityComparison
from tests.bioviz.figures.figure_samples import (hpo_tree, hpo_view, hypernym_rankings, node_gains, separation,
                                              similarity_comparison, umap_like_coords)


@pytest.fixture
def onto(data_dir, tmp_home):
    return load_source(str(data_dir / "views_table.tsv"))


@pytest.fixture
def view(onto):
    return level_view(onto, 1)


def annotations_text(fig):
    return " ".join(a.text for a in fig.layout.annotations)


def test_projection_pair_panels_hover_colours_and_markers(view):
    rows = np.arange(len(view.names))
    rng = np.random.default_rng(0)
    coords_a, coords_b = rng.normal(size=(len(rows), 2)), rng.normal(size=(len(rows), 2))
    parts = make_split(view, shots=3).part_of(len(view.names))
    fig = projection_pair_figure(view, rows, coords_a, coords_b, model_a="minilm", model_b="run-1", parts=parts,
                                 caption="UMAP 2D · seed 0")
    assert "minilm vs run-1" in fig.layout.title.text and view.title in fig.layout.title.text
    assert "UMAP 2D · seed 0" in annotations_text(fig)
    data = [t for t in fig.data if t.x is not None and len(t.x) and t.x[0] is not None]
    assert all(isinstance(t, go.Scattergl) for t in data)
    assert sum(len(t.x) for t in data) == 2 * len(rows)  # every name in both panels
    colours = class_colours(view.classes)
    for trace in data:
        class_ids = {view.classes[view.labels[int(r)]] for r in np.asarray(trace.customdata)[:, 0]}
        assert len(class_ids) == 1 and trace.marker.color == colours[class_ids.pop()]
    first = data[0]
    row = int(first.customdata[0][0])
    assert first.customdata[0][1] == view.names[row] and first.customdata[0][2] == view.name_concepts[row]
    assert {"square", "diamond", "x", "circle"} <= {t.marker.symbol for t in data}
    assert "train" in " ".join(t.hovertemplate for t in data)
    legend_parts = {t.name for t in fig.data if str(t.legendgroup).startswith("part-")}
    assert {"<i>train</i>", "<i>validation</i>", "<i>test</i>"} <= legend_parts
    assert fig.layout.legend.orientation == "h"  # under the panels, which get the full width


def test_projection_highlight_draws_selected_names_in_both_panels(view):
    rows = np.arange(len(view.names))
    coords = np.random.default_rng(1).normal(size=(len(rows), 2))
    fig = projection_pair_figure(view, rows, coords, coords, model_a="a", model_b="b", highlight=np.array([3, 5]))
    selected = [t for t in fig.data if t.legendgroup == "selected"]
    assert len(selected) == 2 and all(len(t.x) == 2 for t in selected)
    dimmed = [t for t in fig.data if t.legendgroup in view.classes and t.x is not None and len(t.x) > 0
              and t.x[0] is not None]
    assert all(t.marker.opacity < 0.5 for t in dimmed)
    event = {"points": [{"customdata": t.customdata[0]} for t in selected] + [{"x": 1}]}
    assert selected_rows(event).tolist() == [3]
    assert selected_rows(None).tolist() == []


def test_projection_3d_and_table(view):
    rows = np.arange(10)
    coords = np.random.default_rng(2).normal(size=(10, 3))
    fig = projection_pair_figure(view, rows, coords, coords, model_a="a", model_b="b")
    assert any(isinstance(t, go.Scatter3d) for t in fig.data)
    assert fig.layout.scene.xaxis.range is not None and fig.layout.scene2 is not None
    table = projection_table(view, rows, coords, coords)
    assert list(table.columns[-6:]) == ["a_1", "a_2", "a_3", "b_1", "b_2", "b_3"] and len(table) == 10


def test_separation_figure_sorts_by_gain_and_states_models():
    table = pd.DataFrame({"class": ["A", "B", "C"], "label": ["alpha", "beta", "gamma"], "names": [5, 5, 5],
                          "baseline": [0.5, 0.2, 0.9], "trained": [0.6, 0.8, 0.7]})
    table["gain"] = table["trained"] - table["baseline"]
    fig = separation_figure(Separation(table, "map", 15, "minilm", "run-7"), "toy depth 1")
    assert "minilm vs run-7" in fig.layout.title.text and "toy depth 1" in fig.layout.title.text
    markers = [t for t in fig.data if t.mode == "markers"]
    assert [t.name for t in markers] == ["minilm", "run-7"]
    ticks = dict(zip(fig.layout.yaxis.tickvals, fig.layout.yaxis.ticktext))
    assert [ticks[y].split("</span> ")[1] for y in markers[1].y] == ["gamma", "alpha", "beta"]  # gain ascending
    assert "mean 0.533 → 0.700" in annotations_text(fig)
    # not the Train/Evaluation class-retrieval mAP: its own name, the sample stated (issue 27)
    assert fig.layout.xaxis.title.text == "within-sample mAP"
    assert "each of 15 sampled names (class-stratified) ranks the other sampled names" in \
        annotations_text(fig).replace("<br>", " ")
    assert [t.marker.color for t in markers] == list(pair_colours())


def test_separation_title_caption_and_class_names_fit_the_column_width():
    view = hpo_view(names_per_class=5)
    fig = separation_figure(separation(view), "hpo 2025-05-06 · HP:0000118 depth 1", width=730)
    t = theme()
    for line in fig.layout.title.text.split("<br>"):
        assert text_width(line, t["title_size"]) <= 730 - 24
    [caption] = [a for a in fig.layout.annotations if "mean" in a.text]
    assert all(text_width(line, t["caption_size"]) <= 730 - 24 for line in caption.text.split("<br>"))
    assert "mean " in caption.text and caption.text.rstrip().endswith(f"{separation(view).means[1]:.3f}")
    # the class names get their own margin: the widest fits in it, and it leaves the plot most of the width
    widest = max(text_width(plain(tick), 12) for tick in fig.layout.yaxis.ticktext)
    assert widest <= fig.layout.margin.l and fig.layout.margin.l <= 0.45 * 730


def comparison(n):
    rng = np.random.default_rng(n)
    a = np.clip(rng.uniform(-0.2, 1, size=(n, n)), -1, 1)
    a = (a + a.T) / 2
    np.fill_diagonal(a, 1)
    b = np.clip(a + 0.1, -1, 1)
    terms = tuple(f"term {i}" for i in range(n))
    return SimilarityComparison(terms, ("g",) * n, a, b, "minilm", "run-1", "given")


def test_similarity_pair_shares_one_scale_and_prints_values_when_small():
    figs = similarity_figures(comparison(12), subtitle="BioLORD Appendix B")
    pair, d = figs["pair"], figs["difference"].data[0]
    assert len(pair.data) == 2 and all(t.coloraxis == "coloraxis" for t in pair.data)
    assert pair.layout.coloraxis.cmax == 1.0 and pair.layout.coloraxis.cmin <= 0.0
    assert d.zmin == -d.zmax and d.zmax >= 0.1
    assert pair.data[0].texttemplate == "%{text}" and pair.data[0].textfont.size >= 10
    assert pair.data[0].text[0][0] == f"{comparison(12).a[0, 0]:.2f}"
    assert "minilm vs run-1" in pair.layout.title.text and "BioLORD Appendix B" in pair.layout.title.text
    assert "run-1 − minilm" in figs["difference"].layout.title.text
    assert len(pair.layout.yaxis.ticktext) == 12
    np.testing.assert_allclose(pair.data[1].z, comparison(12).b, atol=1e-6)  # rounded: no -0.0
    big = similarity_figures(comparison(30))
    assert big["pair"].data[0].texttemplate is None and big["difference"].data[0].texttemplate is None


def test_similarity_values_are_printed_only_where_they_are_legible():
    figs = similarity_figures(similarity_comparison(18), subtitle="typed", width=1000)
    pair, difference = figs["pair"], figs["difference"]
    # 18 terms side by side at 1000 px: cells of 17 px are too small for a legible value
    assert pair.data[0].texttemplate is None and "values on hover" in annotations_text(pair)
    heat = difference.data[0]
    assert heat.texttemplate == "%{text}" and heat.textfont.size >= 10
    cell = (1000 - 24 - 210 - 90) / 18  # the plot width, less the term labels and the colour bar
    assert all(text_width(f"{v:+.2f}", heat.textfont.size) + 2 <= cell for row in heat.z for v in row)


def test_similarity_has_a_legend_for_the_class_squares_and_a_real_title():
    comparison_ = similarity_comparison(12)
    labels = {"III": "Diseases of the blood", "IV": "Endocrine, nutritional and metabolic diseases",
              "XVIII": "Symptoms, signs and abnormal findings"}
    figs = similarity_figures(comparison_, subtitle="typed", colour_order=["III", "IV", "XVIII"], group_labels=labels)
    for fig in figs.values():
        legend = {t.name: t.marker.color for t in fig.data if t.showlegend}
        assert legend == {f"{g} {labels[g]}": class_colours(["III", "IV", "XVIII"])[g] for g in ("IV", "XVIII", "III")}
    assert plain(figs["pair"].layout.title.text).startswith("Cosine similarity of 12 typed terms")
    assert "typed terms" in plain(figs["difference"].layout.title.text)
    assert " · typed" not in figs["pair"].layout.title.text


def test_hierarchy_figure_kinds_and_colours(onto):
    view = level_view(onto, 2)
    tree = level_tree(onto, view)
    values = node_scores(tree, np.linspace(-0.2, 0.3, len(view.classes)), view.class_sizes())
    for kind, cls in (("icicle", go.Icicle), ("sunburst", go.Sunburst), ("treemap", go.Treemap)):
        fig = hierarchy_figure(tree, values, kind=kind, title="Hierarchy · a vs b", caption="caption line", focus="C1",
                               max_depth=2)
        trace = fig.data[0]
        assert isinstance(trace, cls) and list(trace.ids) == list(tree.nodes["id"])
        assert trace.branchvalues == "total" and trace.level == "C1" and trace.maxdepth == 2
        assert trace.marker.cmid == 0 and trace.marker.cmax == pytest.approx(-trace.marker.cmin)
    plain = hierarchy_figure(tree, None)
    assert plain.data[0].marker.colorscale is None
    with pytest.raises(ValueError):
        hierarchy_figure(tree, values, kind="pie")


def compact(gain: float) -> str:
    """A gain as the smallest boxes write it: "+0.267" -> "+.27"."""
    return f"{float(f'{gain:+.3f}'):+.2f}".replace("0.", ".", 1)


def label_words(text: str) -> list[str]:
    return plain(text).replace("\n", " ").replace("…", "").split()


@pytest.mark.parametrize("kind", ["treemap", "icicle", "sunburst"])
def test_hierarchy_labels_break_between_words_only(kind):
    view = hpo_view(names_per_class=2)
    tree = hpo_tree(view, depth=2)
    gains = node_gains(tree)
    trace = hierarchy_figure(tree, gains, kind=kind, title="t", caption="c").data[0]
    names = dict(zip(tree.nodes["id"], tree.nodes["label"]))
    labelled = 0
    for nid, text, gain in zip(trace.ids, trace.text, gains):
        values = (f"{gain:+.3f}", compact(gain), nid)
        words = [w for w in label_words(text) if w not in values]
        if words:  # what is left of the name is its first words, each one whole
            labelled += 1
            assert words == names[nid].split()[:len(words)], (text, names[nid])
    assert labelled >= 10


def test_hierarchy_labels_the_largest_boxes_and_the_largest_gains():
    view = hpo_view(names_per_class=2)
    tree = hpo_tree(view, depth=1)
    gains = node_gains(tree)
    trace = hierarchy_figure(tree, gains, kind="treemap", title="t", caption="c", width=730, height=640).data[0]
    classes = tree.nodes[tree.nodes["depth"] == 1]
    largest = classes.sort_values("names", ascending=False).index[:8]
    for row in largest:  # the biggest boxes carry their name (at least its first two words) and gain
        text = plain(trace.text[row])
        assert " ".join(tree.nodes.loc[row, "label"].split()[:2]) in text.replace("\n", " ")
        assert f"{gains[row]:+.3f}" in text
    # every class with at least 0.5% of the names has its gain written (as "+.27" in the smallest boxes)
    shown = classes[classes["names"] >= 0.005 * tree.nodes.loc[0, "names"]].index
    assert all(compact(gains[row]) in trace.text[row] or f"{gains[row]:+.3f}" in trace.text[row] for row in shown)


def test_a_class_opens_among_its_siblings_not_as_one_flat_disc():
    view = hpo_view(names_per_class=2)
    tree = hpo_tree(view, depth=2)
    leaf, parent = "HP:0001939.1", "HP:0001939"
    for kind in ("sunburst", "treemap"):
        trace = hierarchy_figure(tree, node_gains(tree), kind=kind, title="t", focus=leaf, max_depth=1).data[0]
        assert trace.level == parent and trace.maxdepth >= 2
        widths = dict(zip(trace.ids, trace.marker.line.width))
        assert widths[leaf] > max(w for nid, w in widths.items() if nid != leaf)  # outlined
    inner = hierarchy_figure(tree, None, kind="sunburst", focus=parent).data[0]
    assert inner.level == parent  # a node with children opens as before


def test_hypernym_ranking_figure_highlights_correct_names():
    frame = pd.DataFrame({"rank": [1, 2, 7], "hypernym": ["bite wound", "fly larva infestation", "x"],
                          "class": ["A", "B", "A"], "class_label": ["a", "b", "a"], "cosine": [0.9, 0.8, 0.1],
                          "correct": [True, False, True]})
    fig = hypernym_ranking_figure({"dan": frame, "bne": frame.assign(correct=[False, False, True])},
                                  "poisoning caused by mexican beaded lizard bite", "bite wound", "Hypernyms")
    bars = fig.data
    correct = theme()["correct"]
    assert len(bars) == 2 and bars[0].marker.color[0] == correct and bars[1].marker.color[0] != correct
    assert fig.layout.yaxis.ticktext[-1] == "7. x" and "mexican beaded lizard" in annotations_text(fig)


def test_hypernym_panels_leave_room_for_the_right_panels_names():
    fig = hypernym_ranking_figure(hypernym_rankings(), "lizard bite", "Injury", "Hypernyms", width=1000)
    plot_px = 1000 - fig.layout.margin.l - fig.layout.margin.r
    gap_px = (fig.layout.xaxis2.domain[0] - fig.layout.xaxis.domain[1]) * plot_px
    widest = max(text_width(tick, 12) for tick in fig.layout.yaxis2.ticktext)
    assert widest < gap_px  # the right panel's names end before the left panel's bars do
    assert widest <= fig.layout.margin.l  # and the left panel's fit in the margin
    narrow = hypernym_ranking_figure(hypernym_rankings(), "lizard bite", "Injury", "Hypernyms", width=420)
    assert narrow.layout.yaxis2.domain[1] < narrow.layout.yaxis.domain[0]  # one above the other


def test_export_config_formats_and_slug():
    assert export_config_as("fig", "svg")["toImageButtonOptions"] == {"format": "svg", "filename": "fig", "scale": 2}
    assert export_config_as("fig")["toImageButtonOptions"]["format"] == "png"
    with pytest.raises(ValueError):
        export_config_as("fig", "gif")
    assert slug("umap", "minilm", "vs", "run 1/x", "", None) == "umap-minilm-vs-run-1-x"


def umap_figure(**kwargs):
    view = hpo_view(names_per_class=40)
    coords_a, coords_b = umap_like_coords(view)
    return view, coords_a, projection_pair_figure(view, np.arange(len(view.names)), coords_a, coords_b,
                                                  model_a="minilm",
                                                  model_b="run-1", **kwargs)


def test_projection_axes_fit_the_bulk_and_outliers_sit_at_the_edge():
    view, coords_a, fig = umap_figure()
    bulk = np.percentile(coords_a, [1, 99], axis=0)
    for axis, d in ((fig.layout.xaxis, 0), (fig.layout.yaxis, 1)):
        low, high = axis.range
        assert high - low < 1.6 * (bulk[1, d] - bulk[0, d])  # six points at ±50 do not stretch the axes
    rings = [t for t in fig.data if t.name == "outside the view" and t.x is not None]
    assert len(rings) == 2 and sum(len(t.x) for t in rings) == 12  # the six far points, ringed in each panel
    points = [t for t in fig.data if t.customdata is not None and len(t.customdata)]
    assert sum(len(t.x) for t in points) == 2 * len(view.names)  # every name drawn once per panel, outliers too
    for trace in points:  # ... inside the axes: the outliers at the edge
        x_axis, y_axis = (fig.layout.xaxis, fig.layout.yaxis) if trace.xaxis == "x" else (fig.layout.xaxis2,
                                                                                           fig.layout.yaxis2)
        assert all(x_axis.range[0] <= x <= x_axis.range[1] for x in trace.x)
        assert all(y_axis.range[0] <= y <= y_axis.range[1] for y in trace.y)
    assert any("outside the view" in (t.name or "") and t.showlegend for t in fig.data)


def test_23_classes_get_23_distinct_colours_and_whole_legend_names():
    view, _, fig = umap_figure()
    colours = class_colours(view.classes)
    assert len(set(colours.values())) == len(view.classes) == 23
    legend = [t.name for t in fig.data if t.showlegend and t.legendgroup in view.classes]
    assert legend == [f"{c} {label}" for c, label in zip(view.classes, view.class_labels)]  # none cut


def test_projection_panels_take_the_layouts_shape_so_no_band_is_left_empty():
    view, coords_a, fig = umap_figure(width=1000)
    plot_height = fig.layout.height - fig.layout.margin.t - fig.layout.margin.b
    x, y = fig.layout.xaxis.range, fig.layout.yaxis.range
    panel_width = (1000 - fig.layout.margin.l - fig.layout.margin.r) * (1 - 0.04) / 2
    assert plot_height == pytest.approx(panel_width * (y[1] - y[0]) / (x[1] - x[0]), abs=2)
    legend_top = (1 - fig.layout.legend.y) * fig.layout.height
    assert 0 < legend_top - (fig.layout.margin.t + plot_height) <= 12  # the legend right under the panels


def test_highlighted_classes_keep_their_colours_and_the_rest_turn_grey():
    chosen = ["HP:0001939", "HP:0002664"]
    view, _, fig = umap_figure(highlight_classes=chosen)
    colours = class_colours(view.classes)
    for trace in fig.data:
        if trace.x is None or not len(trace.x) or trace.x[0] is None or trace.name not in view.classes:
            continue
        expected = colours[trace.name] if trace.name in chosen else theme()["other_classes"]
        assert trace.marker.color == expected
    legend = [t.name for t in fig.data if t.showlegend]
    assert legend[:3] == ["HP:0001939 Abnormality of metabolism/homeostasis", "HP:0002664 Neoplasm",
                          "other classes (21)"]


def test_labelled_map_draws_contours_and_names_at_density_peaks():
    view, coords_a, fig = umap_figure(contours=True)
    contours = [t for t in fig.data if isinstance(t, go.Contour)]
    assert len(contours) == 2 * 23 and {t.xaxis for t in contours} == {"x", "x2"}
    labels = [a for a in fig.layout.annotations if a.xref in ("x", "x2")]
    assert len(labels) >= 20  # most classes named on each map; a name that would cover another is left out
    by_text = {plain(a.text).replace("\n", " "): a for a in labels if a.xref == "x"}
    neoplasm = by_text["Neoplasm"]
    centre = coords_a[view.labels == view.classes.index("HP:0002664")].mean(axis=0)
    assert np.hypot(neoplasm.x - centre[0], neoplasm.y - centre[1]) < 2.0  # at the class's peak (blob sd 0.8)
    assert not any(t.showlegend and t.legendgroup in view.classes for t in fig.data)  # the map names the classes
