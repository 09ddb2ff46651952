"""The ontology subtree as an icicle, sunburst or treemap.

Node size is the number of names under the node; node colour is a per-node value (the
per-class mAP gain of the compared model over the baseline, say) on a diverging scale
centred on 0, read like the similarity-difference heatmaps: red where the compared (trained)
model groups the names better than the baseline, blue where it groups them worse.
"""

from __future__ import annotations

import textwrap

import numpy as np
import plotly.graph_objects as go

from bioviz.figures.theme import apply_theme, theme
from bioviz.views.hierarchy import Tree

KINDS = ("icicle", "sunburst", "treemap")


def _short(label: str, width: int = 36) -> str:
    return label if len(label) <= width else label[: width - 1] + "…"


def _wrapped(label: str, width: int = 18, lines: int = 3) -> str:
    """``label`` on up to ``lines`` lines of ``width`` characters (``<br>``), the rest cut with "…".

    Boxes of a treemap or icicle are narrow and tall: one long line would not fit at a
    legible size and be hidden, a few short ones do.
    """
    parts = textwrap.wrap(label, width, break_long_words=True) or [label]
    if len(parts) > lines:
        parts = parts[:lines]
        parts[-1] = _short(parts[-1] + " …", width)
    return "<br>".join(parts)


def hierarchy_figure(
    tree: Tree,
    values: np.ndarray | None = None,
    kind: str = "icicle",
    title: str = "",
    caption: str | None = None,
    value_label: str = "mAP gain",
    focus: str | None = None,
    max_depth: int | None = None,
    height: int = 640,
) -> go.Figure:
    """Draw ``tree`` with size = names and colour = ``values``.

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
        Node id to open the drawing at (search result); its ancestors stay as a path.
    max_depth : int, optional
        Levels shown at once (plotly's ``maxdepth``); click a node to go deeper.
    height : int

    Raises
    ------
    ValueError
        For an unknown ``kind``.
    """
    if kind not in KINDS:
        raise ValueError(f"unknown hierarchy kind {kind!r}: use one of {', '.join(KINDS)}")
    nodes = tree.nodes
    t = theme()
    # Sunburst text runs along the radius: one line; boxes take a few short lines.
    text = [_short(label) if kind == "sunburst" else _wrapped(label) for label in nodes["label"]]
    if values is not None:
        values = np.asarray(values, dtype=float)
        finite = values[np.isfinite(values)]
        bound = float(max(0.02, np.abs(finite).max())) if len(finite) else 1.0
        shown = np.where(np.isfinite(values), values, 0.0)
        marker = {
            "colors": shown, "colorscale": t["diverging"] + "_r", "cmin": -bound, "cmax": bound, "cmid": 0.0,
            # A short colour-bar title leaves the drawing its width; the hover names the measure.
            "colorbar": {"title": {"text": "gain" if "gain" in value_label else value_label}, "thickness": 14},
            "line": {"width": 1, "color": "#ffffff"},
        }
        value_text = [("n/a" if not np.isfinite(v) else f"{v:+.3f}") for v in values]
    else:
        palette = t["qualitative"]
        marker = {"colors": [palette[d % len(palette)] for d in nodes["depth"]], "line": {"width": 1, "color": "#ffffff"}}
        value_text = [""] * len(nodes)
    customdata = np.column_stack([nodes["id"], nodes["label"], nodes["names"], nodes["classes"], value_text,
                                  nodes["extra_parents"]])
    hover = ("<b>%{customdata[1]}</b> (%{customdata[0]})<br>%{customdata[2]} names · %{customdata[3]} classes"
             + (f"<br>{value_label} %{{customdata[4]}}" if values is not None else "")
             + "<br>other parents not drawn: %{customdata[5]}<extra></extra>")
    common = dict(
        ids=nodes["id"], parents=nodes["parent"], labels=text, values=nodes["names"], branchvalues="total",
        marker=marker, customdata=customdata, hovertemplate=hover, maxdepth=max_depth or -1,
        level=focus or "",
    )
    if kind == "icicle":
        trace = go.Icicle(**common, tiling={"orientation": "h"}, textfont={"size": 13})
    elif kind == "sunburst":
        trace = go.Sunburst(**common, insidetextorientation="radial", textfont={"size": 12})
    else:
        trace = go.Treemap(**common, textfont={"size": 13}, pathbar={"visible": True})
    fig = go.Figure(trace)
    apply_theme(fig, title, caption, height=height)
    # Labels that do not fit at a legible size are hidden (hover still names every node).
    fig.update_layout(uniformtext={"minsize": 11, "mode": "hide"})
    fig.update_layout(margin={"l": 10, "r": 10, "t": 70, "b": 60 if caption else 20})
    if caption:
        fig.layout.annotations[-1].update(y=-0.03)
    return fig
