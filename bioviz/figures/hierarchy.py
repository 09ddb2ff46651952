"""The ontology subtree as an icicle, sunburst or treemap.

Node size is the number of names under the node; node colour is a per-node value (the
per-class mAP gain of the compared model over the baseline, say) on a diverging scale
centred on 0, read like the similarity-difference heatmaps: red where the compared (trained)
model groups the names better than the baseline, blue where it groups them worse.
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from bioviz.figures.hierarchy_labels import fitted_label, node_boxes
from bioviz.figures.text import shorten, wrap
from bioviz.figures.theme import apply_theme, theme
from bioviz.views.hierarchy import Tree

KINDS = ("icicle", "sunburst", "treemap")


LABEL_SIZE = 12
MARK_LINE = "#111111"  # outline of a class opened on its own, among its siblings


def colour_bound(values: np.ndarray, shown: list[int] | None = None) -> float:
    """Half the colour range: the largest absolute value among the ``shown`` nodes, rounded up.

    Fitted to what is drawn (gains of +0.03 to +0.18 get a scale of ±0.18, not one every box
    is pale on), symmetric about 0 so white stays "no change"; at least 0.01.

    >>> colour_bound(np.array([0.03, 0.181, np.nan, -0.05]))
    0.19
    >>> colour_bound(np.array([0.9, 0.03, 0.12]), shown=[1, 2])
    0.12
    """
    values = np.asarray(values, dtype=float)
    if shown is not None and len(shown):
        values = values[np.asarray(shown, dtype=np.int64)]
    finite = np.abs(values[np.isfinite(values)])
    if not len(finite):
        return 1.0
    return float(max(0.01, np.ceil(finite.max() * 100 - 1e-9) / 100))


def _with_largest(caption: str | None, values: np.ndarray, labels: list[str], shown: list[int],
                  value_label: str, count: int = 3) -> str | None:
    """``caption`` with the largest gains among the shown nodes named: a small box may be too small to label."""
    rows = [i for i in shown if np.isfinite(values[i])] or [i for i in range(len(values)) if np.isfinite(values[i])]
    best = sorted(rows, key=lambda i: -values[i])[:count]
    if not best or "gain" not in value_label:
        return caption
    named = ", ".join(f"{shorten(labels[i], 220, LABEL_SIZE)} {values[i]:+.3f}" for i in best)
    return f"{caption}<br>largest gains: {named}" if caption else f"largest gains: {named}"


def hierarchy_figure(
    tree: Tree,
    values: np.ndarray | None = None,
    *,
    kind: str = "icicle",
    title: str = "",
    caption: str | None = None,
    value_label: str = "mAP gain",
    focus: str | None = None,
    max_depth: int | None = None,
    height: int = 640,
    width: int | None = None,
) -> go.Figure:
    """Draw ``tree`` with size = names and colour = ``values``.

    Each drawn box is labelled with as much as fits it (the whole name and the value, else the
    name cut to two lines, else the code, else the value; see
    :mod:`bioviz.figures.hierarchy_labels`), broken between words only.

    Parameters
    ----------
    tree : Tree
        From :func:`bioviz.views.hierarchy.level_tree`.
    values : numpy.ndarray, optional
        One value per node (same order as ``tree.nodes``); NaN nodes are grey. Without
        values nodes are coloured by depth.
    kind : str
        ``icicle``, ``sunburst`` or ``treemap``.
    title, caption : str
    value_label : str
        Name of the colour value (colour bar and hover).
    focus : str, optional
        Node id to open the drawing at (search result); its ancestors stay as a path. A
        node with no children (a class) opens at its parent instead, outlined among its
        siblings: opened on its own it would fill the drawing as one flat box or disc.
    max_depth : int, optional
        Levels shown at once (plotly's ``maxdepth``), at least two (the opened node and its
        children); click a node to go deeper.
    height : int
    width : int, optional
        Narrowest width the figure is shown at (the theme's ``column_width`` by default: the
        page puts a node table beside it); labels are fitted to the boxes at this size.

    Raises
    ------
    ValueError
        For an unknown ``kind``.
    """
    if kind not in KINDS:
        raise ValueError(f"unknown hierarchy kind {kind!r}: use one of {', '.join(KINDS)}")
    nodes = tree.nodes
    t = theme()
    width = width or t["column_width"]
    ids, parents = list(nodes["id"]), list(nodes["parent"])
    labels = [str(x) for x in nodes["label"]]
    has_children = set(parents)
    opened, marked = (focus or tree.root), None
    if focus and focus in ids and focus not in has_children and focus != tree.root:
        opened, marked = parents[ids.index(focus)], focus
    depth = -1 if not max_depth or max_depth < 0 else max(2, int(max_depth))
    # Text fitted to the boxes drawn when the figure opens (the plot area estimated from the
    # margins apply_theme sets); nodes drawn only after a click get their name on two lines.
    right = 90 if values is not None else 12
    plot_w, plot_h = width - 12 - right, height - 70 - (40 if caption else 0)
    boxes = node_boxes(kind, ids, parents, nodes["names"].to_numpy(), root=opened, max_depth=depth, width=plot_w,
                       height=plot_h, font_size=LABEL_SIZE)
    if values is not None:
        values = np.asarray(values, dtype=float)
    marker, value_text = _marker(nodes, values, value_label, sorted(boxes), t)
    marker["line"] = {"width": [3 if nid == marked else 1 for nid in ids],
                      "color": [MARK_LINE if nid == marked else "#ffffff" for nid in ids]}
    text = _box_texts(ids, labels, value_text, boxes, marked)
    customdata = np.column_stack([nodes["id"], nodes["label"], nodes["names"], nodes["classes"], value_text,
                                  nodes["extra_parents"]])
    hover = ("<b>%{customdata[1]}</b> (%{customdata[0]})<br>%{customdata[2]} names · %{customdata[3]} classes"
             + (f"<br>{value_label} %{{customdata[4]}}" if values is not None else "")
             + "<br>other parents not drawn: %{customdata[5]}<extra></extra>")
    common = dict(
        # labels name the nodes in the path bar; the boxes show the fitted text
        ids=nodes["id"], parents=nodes["parent"], labels=[shorten(x, 220, LABEL_SIZE) for x in labels],
        text=text, texttemplate="%{text}", values=nodes["names"], branchvalues="total",
        marker=marker, customdata=customdata, hovertemplate=hover, maxdepth=depth,
        level="" if opened == tree.root else opened, textfont={"size": LABEL_SIZE},
    )
    fig = go.Figure(_TRACES[kind](**common))
    if values is not None:
        caption = _with_largest(caption, values, labels, sorted(boxes), value_label)
    apply_theme(fig, title, caption=caption, height=height, width=width, margin={"l": 12, "r": 12, "b": 12}, top=12,
                caption_offset=8)
    # Text that would have to shrink below a legible size is hidden (hover still names every node).
    fig.update_layout(uniformtext={"minsize": 10, "mode": "hide"})
    return fig


def _marker(nodes, values: np.ndarray | None, value_label: str, shown: list[int], t: dict) -> tuple[dict, list[str]]:
    """Node colours (a diverging scale fitted to the shown gains, or depth) and each node's value text."""
    if values is None:
        palette = t["qualitative"]
        return {"colors": [palette[d % len(palette)] for d in nodes["depth"]]}, [""] * len(nodes)
    bound = colour_bound(values, shown)
    marker = {
        "colors": np.where(np.isfinite(values), values, 0.0), "colorscale": t["diverging"] + "_r",
        "cmin": -bound, "cmax": bound, "cmid": 0.0,
        # A short colour-bar title leaves the drawing its width; the hover names the measure.
        "colorbar": {"title": {"text": "gain" if "gain" in value_label else value_label}, "thickness": 14},
    }
    return marker, [("n/a" if not np.isfinite(v) else f"{v:+.3f}") for v in values]


def _box_texts(ids: list[str], labels: list[str], value_text: list[str], boxes: dict, marked: str | None
               ) -> list[str]:
    """Each node's text: fitted to its box when drawn at opening, else its name on two lines."""
    text = []
    for i, (nid, label) in enumerate(zip(ids, labels)):
        if i in boxes:
            fitted = fitted_label(boxes[i], label, nid, value_text[i], size=LABEL_SIZE)
        else:
            fitted = "<br>".join(wrap(label, 160, LABEL_SIZE, max_lines=2) + ([value_text[i]] if value_text[i] else []))
        text.append(f"<b>{fitted}</b>" if nid == marked and fitted else fitted)
    return text


_TRACES = {
    "icicle": lambda **common: go.Icicle(**common, tiling={"orientation": "h"}),
    "sunburst": lambda **common: go.Sunburst(**common, insidetextorientation="radial"),
    "treemap": lambda **common: go.Treemap(**common, pathbar={"visible": True}),
}
