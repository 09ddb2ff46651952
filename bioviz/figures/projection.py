"""Side-by-side projections of two Spaces over the same names, coloured by class.

One figure with two panels (baseline left, compared right) so a box or lasso selection in
either panel can highlight the same names in both, and so one PNG/SVG export holds the
comparison. Classes keep their colour in both panels (``class_colours``), one legend entry
per class toggles it in both; train / validation / test / zero-shot names differ by marker.
WebGL (``Scattergl``) draws 2-D panels, so tens of thousands of points stay interactive.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from bioviz.figures.theme import apply_theme, class_colours
from bioviz.ontology.levels import LevelView

# Names outside the split ("unused") are the majority: plain dots; the few split names
# stand out by shape and a slightly larger size.
PART_SYMBOLS = {
    "unused": "circle",
    "train": "square",
    "validation": "diamond",
    "test": "x",
    "zero-shot": "triangle-up",
}
# 3-D scenes know fewer symbols than WebGL 2-D panels.
PART_SYMBOLS_3D = {"unused": "circle", "train": "square", "validation": "diamond", "test": "cross",
                   "zero-shot": "circle-open"}
DIMMED_OPACITY = 0.15


def _short(label: str, width: int = 38) -> str:
    return label if len(label) <= width else label[: width - 1] + "…"


def _ranges(coords: list[np.ndarray], pad: float = 0.04) -> list[list[float]]:
    """Axis ranges covering all panels, so aligned panels share their scale."""
    stacked = np.vstack(coords)
    low, high = stacked.min(axis=0), stacked.max(axis=0)
    span = np.maximum(high - low, 1e-6)
    return [[float(lo - pad * s), float(hi + pad * s)] for lo, hi, s in zip(low, high, span)]


def projection_pair_figure(
    view: LevelView,
    rows: np.ndarray,
    coords_a: np.ndarray,
    coords_b: np.ndarray,
    model_a: str,
    model_b: str,
    parts: np.ndarray | None = None,
    highlight: np.ndarray | None = None,
    method: str = "UMAP",
    caption: str | None = None,
    title: str | None = None,
    height: int = 640,
) -> go.Figure:
    """Two aligned scatter panels of the same names under two models.

    Parameters
    ----------
    view : LevelView
        Gives names, concept codes and classes (colours are by class id).
    rows : numpy.ndarray
        Row indices into ``view.names`` of the plotted points.
    coords_a, coords_b : numpy.ndarray
        ``(len(rows), 2 or 3)`` coordinates; ``coords_b`` already aligned to ``coords_a``.
    model_a, model_b : str
        Panel titles (baseline, compared).
    parts : numpy.ndarray, optional
        Split part per view row (``Split.part_of``); drawn as marker symbols.
    highlight : numpy.ndarray, optional
        View rows selected by the user: drawn on top with an outline in both panels,
        everything else dimmed.
    method : str
        ``UMAP`` or ``PCA`` (axis titles).
    caption : str, optional
        Parameters under the plot; ``<br>`` starts another line.
    title : str, optional
        Figure title; by default states the models, the method and the level view.
    height : int
        Pixels.

    Returns
    -------
    plotly.graph_objects.Figure
        Every point carries ``customdata = [view row, name, concept]``; one trace per class
        and split part (its class and part are in the trace's hover text).
    """
    rows = np.asarray(rows, dtype=np.int64)
    # float32 is ample for drawing and halves the coordinates in the JSON sent to the browser.
    coords_a, coords_b = np.asarray(coords_a, dtype=np.float32), np.asarray(coords_b, dtype=np.float32)
    dims = coords_a.shape[1]
    three_d = dims == 3
    spec = {"type": "scene"} if three_d else {"type": "xy"}
    fig = make_subplots(rows=1, cols=2, specs=[[spec, spec]], horizontal_spacing=0.04,
                        subplot_titles=(f"<b>{_short(model_a, 50)}</b> (baseline)", f"<b>{_short(model_b, 50)}</b> (aligned)"))
    colours = class_colours(view.classes)
    symbols = PART_SYMBOLS_3D if three_d else PART_SYMBOLS
    labels = view.labels[rows]
    part_of_row = parts[rows] if parts is not None else np.full(len(rows), "unused", dtype=object)
    selected = np.zeros(len(rows), dtype=bool)
    if highlight is not None and len(highlight):
        selected = np.isin(rows, np.asarray(highlight, dtype=np.int64))
    dim_others = bool(selected.any())
    size = 4 if len(rows) > 20_000 else 6 if len(rows) > 3_000 else 8
    # Hover: the per-point name and concept travel as customdata; the class and split part
    # are the same for every point of a trace and go into its hovertemplate as text, which
    # keeps the figure JSON small for tens of thousands of points.
    customdata = np.column_stack([
        rows.astype(str),
        [view.names[r] for r in rows],
        [view.name_concepts[r] for r in rows],
    ])

    def hover(class_label: str, part: str) -> str:
        safe = class_label.replace("%", "%%").replace("{", "(").replace("}", ")")
        return f"<b>%{{customdata[1]}}</b><br>%{{customdata[2]}} · {safe}<br>{part}<extra></extra>"

    def scatter(coords: np.ndarray, mask: np.ndarray, **kwargs):
        if three_d:
            return go.Scatter3d(x=coords[mask, 0], y=coords[mask, 1], z=coords[mask, 2], mode="markers", **kwargs)
        return go.Scattergl(x=coords[mask, 0], y=coords[mask, 1], mode="markers", **kwargs)

    def legend_proxy(name: str, group: str, marker: dict, legend: str = "legend"):
        # Legend entries are drawn with the first point's symbol; a point-less proxy trace
        # gives each entry a plain marker, and its legend group toggles the real traces.
        common = dict(name=name, legendgroup=group, legend=legend, showlegend=True, marker=marker,
                      hoverinfo="skip", mode="markers")
        if three_d:
            return go.Scatter3d(x=[None], y=[None], z=[None], **common)
        return go.Scattergl(x=[None], y=[None], **common)

    present = np.unique(labels)
    for class_index in present:
        class_id = view.classes[class_index]
        fig.add_trace(legend_proxy(_short(f"{class_id} {view.class_labels[class_index]}"), class_id,
                                   {"color": colours[class_id], "size": 10}), row=1, col=1)
    for col, coords in ((1, coords_a), (2, coords_b)):
        # One trace per class and split part, so symbol and size are single values: plotly
        # validates per-point symbol lists element by element, which dominates the build
        # time of a 20k-point figure.
        for class_index in present:
            class_id = view.classes[class_index]
            for part in PART_SYMBOLS:
                mask = (labels == class_index) & (part_of_row == part)
                if not mask.any():
                    continue
                marker = {
                    "color": colours[class_id],
                    # Split names a little larger than the rest, told apart by shape alone.
                    "size": size if part == "unused" else size + 2,
                    "symbol": symbols[part],
                    "opacity": DIMMED_OPACITY if dim_others else 0.8,
                    "line": {"width": 0},
                }
                fig.add_trace(scatter(coords, mask, name=class_id, legendgroup=class_id, showlegend=False,
                                      marker=marker, customdata=customdata[mask],
                                      hovertemplate=hover(view.class_labels[class_index], part)), row=1, col=col)
        if dim_others:
            marker = {"color": [colours[view.classes[c]] for c in labels[selected]], "size": size + 5,
                      "symbol": "circle", "line": {"width": 1.5, "color": "#111111"}, "opacity": 1.0}
            fig.add_trace(scatter(coords, selected, name=f"selected ({int(selected.sum())})", legendgroup="selected",
                                  showlegend=col == 1, marker=marker, customdata=customdata[selected],
                                  hovertemplate=hover("selected", "")), row=1, col=col)
    # Marker entries for the split parts actually shown, after the classes.
    shown_parts = [p for p in PART_SYMBOLS if p in set(part_of_row.tolist())]
    if parts is not None and len(shown_parts) > 1:
        for part in shown_parts:
            fig.add_trace(legend_proxy(f"<i>{part}</i>", f"part-{part}",
                                       {"color": "#52606d", "size": 9, "symbol": symbols[part]}), row=1, col=1)
    ranges = _ranges([coords_a, coords_b])
    axis_names = [f"{method} {i + 1}" for i in range(dims)]
    if three_d:
        for scene in ("scene", "scene2"):
            fig.update_layout({scene: {
                "xaxis": {"title": axis_names[0], "range": ranges[0], "showticklabels": False},
                "yaxis": {"title": axis_names[1], "range": ranges[1], "showticklabels": False},
                "zaxis": {"title": axis_names[2], "range": ranges[2], "showticklabels": False},
                "aspectmode": "cube",
            }})
    else:
        # Projection axes have no units: no tick labels, and the method sits in the title.
        fig.update_xaxes(range=ranges[0], showticklabels=False, zeroline=False)
        fig.update_yaxes(range=ranges[1], showticklabels=False, zeroline=False)
        # Same x/y scale within each panel, so distances are not stretched.
        fig.update_yaxes(scaleanchor="x", scaleratio=1, row=1, col=1)
        fig.update_yaxes(scaleanchor="x2", scaleratio=1, row=1, col=2)
    title = title or f"{method} · {model_a} vs {model_b} · {view.title}"
    apply_theme(fig, title, caption, height=height)
    # The legend goes under the panels, so the two panels get the full width; the bottom
    # margin is sized for its rows (three entries per row) and the caption below it.
    entries = len(present) + (len(shown_parts) if parts is not None and len(shown_parts) > 1 else 0) + dim_others
    legend_rows = int(np.ceil(entries / 3))
    caption_px = 14 + 16 * (caption.count("<br>") + 1) if caption else 0
    bottom = 40 + 21 * legend_rows + caption_px
    fig.update_layout(
        legend={"orientation": "h", "x": 0.0, "y": 0.0, "yref": "container", "yanchor": "bottom",
                "itemsizing": "constant", "font": {"size": 12}, "entrywidth": 0.32, "entrywidthmode": "fraction",
                "tracegroupgap": 0},
        dragmode="lasso" if not three_d else "orbit",
        margin={"l": 20, "r": 20, "b": bottom},
        height=height + bottom - 70,
        hoverlabel={"font": {"size": 13}},
    )
    fig.update_layout(legend={"y": caption_px / (height + bottom - 70)})
    if caption:  # at the very bottom, under the legend
        fig.layout.annotations[-1].update(yref="paper", y=0, yshift=-(bottom - 12), yanchor="bottom")
    return fig


def selected_rows(selection: dict | None) -> np.ndarray:
    """View rows of the points in a Streamlit plotly selection (``event["selection"]``).

    Reads the row from each point's ``customdata[0]`` (see :func:`projection_pair_figure`),
    so it works whichever panel and trace the points were selected in.
    """
    if not selection:
        return np.zeros(0, dtype=np.int64)
    rows = []
    for point in selection.get("points", []) or []:
        data = point.get("customdata")
        if data is not None and len(data):
            try:
                rows.append(int(data[0]))
            except (TypeError, ValueError):
                continue
    return np.unique(np.asarray(rows, dtype=np.int64))


def projection_table(view: LevelView, rows: np.ndarray, coords_a: np.ndarray, coords_b: np.ndarray,
                     parts: np.ndarray | None = None):
    """The numbers behind a projection figure, for CSV download."""
    rows = np.asarray(rows, dtype=np.int64)
    frame = pd.DataFrame({
        "name": [view.names[r] for r in rows],
        "concept": [view.name_concepts[r] for r in rows],
        "class": [view.classes[view.labels[r]] for r in rows],
        "class_label": [view.class_labels[view.labels[r]] for r in rows],
        "part": parts[rows] if parts is not None else "",
    })
    for prefix, coords in (("a", coords_a), ("b", coords_b)):
        for d in range(coords.shape[1]):
            frame[f"{prefix}_{d + 1}"] = np.round(coords[:, d], 5)
    return frame
