"""What training moved: arrows from each name's baseline position to its aligned compared position.

One panel in the baseline layout's frame. Every measured name is a faint grey dot where the
compared model puts it; the names chosen for arrows (a class's, or the furthest moved) get a
line from their baseline position to their compared position and an arrowhead there,
coloured by split part (train / validation / test / zero-shot / not in the split), so one
can see whether names the run never trained on moved with their class. Arrows are capped
(:data:`MAX_ARROWS`): a few hundred are legible, thousands are a smear.
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from bioviz.figures.density import bulk_range
from bioviz.figures.text import shorten
from bioviz.figures.theme import apply_theme, part_colours, theme
from bioviz.ontology.levels import LevelView
from bioviz.views.movement import PARTS, Movement

MAX_ARROWS = 400
PART_NAMES = {"train": "train", "validation": "validation", "test": "test", "zero-shot": "zero-shot class",
              "unused": "not in the split"}
LEGEND_FONT = 12
SIDE = 20


def movement_figure(view: LevelView, movement: Movement, coords_a: np.ndarray, coords_b: np.ndarray,
                    arrows: np.ndarray, parts: np.ndarray | None = None, model_a: str = "baseline",
                    model_b: str = "compared", title: str | None = None, caption: str | None = None,
                    width: int | None = None, height: int | None = None) -> go.Figure:
    """Arrows from the baseline layout to the aligned compared layout for chosen names.

    Parameters
    ----------
    view : LevelView
        Names, concepts and classes of the rows.
    movement : Movement
        From :func:`bioviz.views.movement.measure_movement` over the same rows as the coordinates.
    coords_a, coords_b : numpy.ndarray
        ``(len(movement.rows), 2)`` baseline layout and compared layout aligned onto it.
    arrows : numpy.ndarray
        Positions into ``movement.rows`` of the names to draw arrows for
        (:func:`bioviz.views.movement.arrow_rows`); at most :data:`MAX_ARROWS` are drawn.
    parts : numpy.ndarray, optional
        Split part per view row (``Split.part_of``); colours the arrows.
    model_a, model_b : str
        The baseline and the compared model's readable names (legend and default title).
    title, caption : str, optional
        The title states the models and the level by default; the caption says what the
        arrows and the numbers mean by default.
    width : int, optional
        Width the figure is laid out for (the theme's ``export_width`` by default).
    height : int, optional
        Plot height in pixels; by default from the layout's aspect ratio at ``width``.

    Returns
    -------
    plotly.graph_objects.Figure
        Arrowheads carry ``customdata = [view row, name, concept]``.
    """
    t = theme()
    width = width or t["export_width"]
    coords_a = np.asarray(coords_a, dtype=np.float64)[:, :2]
    coords_b = np.asarray(coords_b, dtype=np.float64)[:, :2]
    arrows = np.asarray(arrows, dtype=np.int64)[:MAX_ARROWS]
    rows = movement.rows
    part_of = (np.asarray(parts, dtype=object)[rows] if parts is not None
               else np.full(len(rows), "unused", dtype=object))
    colours = part_colours()
    # Axes fit the bulk of both layouts; a far outlier's arrow runs off the edge (clipped).
    stacked = np.vstack([coords_a, coords_b])
    ranges = [list(bulk_range(stacked[:, d])) for d in range(2)]
    fig = go.Figure()
    fig.add_trace(go.Scattergl(
        x=coords_b[:, 0], y=coords_b[:, 1], mode="markers", name=f"measured names ({len(rows):,})",
        marker={"color": t["other_classes"], "size": 4, "opacity": 0.5}, hoverinfo="skip", showlegend=True,
    ))
    for part in PARTS:
        chosen = arrows[part_of[arrows] == part]
        if not len(chosen):
            continue
        colour = colours[part]
        start, end = coords_a[chosen], coords_b[chosen]
        # One trace of line segments (None between them) per part: a few traces, not one per arrow.
        xs = np.column_stack([start[:, 0], end[:, 0], np.full(len(chosen), np.nan)]).ravel()
        ys = np.column_stack([start[:, 1], end[:, 1], np.full(len(chosen), np.nan)]).ravel()
        fig.add_trace(go.Scatter(x=xs, y=ys, mode="lines", line={"color": colour, "width": 1.3},
                                 opacity=0.75, hoverinfo="skip", showlegend=False, legendgroup=part))
        fig.add_trace(go.Scatter(x=start[:, 0], y=start[:, 1], mode="markers", hoverinfo="skip",
                                 marker={"color": colour, "size": 4, "opacity": 0.7}, showlegend=False,
                                 legendgroup=part))
        delta = end - start
        # Plotly's marker angle is clockwise from "up"; both axes share one scale, so the data
        # direction is the drawn direction.
        angles = np.degrees(np.arctan2(delta[:, 0], delta[:, 1]))
        view_rows = rows[chosen]
        customdata = np.column_stack([
            view_rows.astype(str), [view.names[r] for r in view_rows], [view.name_concepts[r] for r in view_rows],
            [view.class_labels[view.labels[r]] for r in view_rows],
            [_number(movement.precision_a[i]) for i in chosen], [_number(movement.precision_b[i]) for i in chosen],
            [f"{movement.displacement[i]:.2f}" for i in chosen],
        ])
        # The legend would draw the first arrowhead at its own angle: a proxy entry points right.
        fig.add_trace(go.Scatter(x=[None], y=[None], mode="lines+markers", name=f"{PART_NAMES[part]} ({len(chosen)})",
                                 legendgroup=part, line={"color": colour, "width": 1.3}, hoverinfo="skip",
                                 marker={"symbol": "arrow", "angle": 90, "size": 9, "color": colour}))
        fig.add_trace(go.Scatter(
            x=end[:, 0], y=end[:, 1], mode="markers", name=PART_NAMES[part], showlegend=False,
            legendgroup=part, customdata=customdata,
            marker={"symbol": "arrow", "angle": angles, "size": 9, "color": colour, "line": {"width": 0}},
            hovertemplate=("<b>%{customdata[1]}</b><br>%{customdata[2]} · %{customdata[3]}<br>"
                           f"{PART_NAMES[part]} · moved %{{customdata[6]}} · same-class precision@{movement.k} "
                           "%{customdata[4]} → %{customdata[5]}<extra></extra>"),
        ))
    spans = [hi - lo for lo, hi in ranges]
    plot_px = width - 2 * SIDE
    plot_height = height or int(np.clip(plot_px * spans[1] / max(spans[0], 1e-9), 320, 640))
    fig.update_xaxes(range=ranges[0], showticklabels=False, zeroline=False, showgrid=False)
    fig.update_yaxes(range=ranges[1], showticklabels=False, zeroline=False, showgrid=False,
                     scaleanchor="x", scaleratio=1)
    shown = len(arrows)
    title = title or (f"What training moved · {model_a} → {model_b} · {view.title}")
    caption = caption or (f"Arrows: {shown} names from their {shorten(model_a, 240, t['caption_size'])} position "
                          f"to their aligned {shorten(model_b, 240, t['caption_size'])} position, coloured by split "
                          f"part · grey: every measured name under the compared model · moved = distance over the "
                          f"baseline layout's RMS radius")
    legend_px = 34
    apply_theme(fig, title, caption, width=width, margin={"l": SIDE, "r": SIDE, "b": legend_px + 12}, top=16,
                caption_offset=legend_px + 8)
    total = int(fig.layout.margin.t + plot_height + fig.layout.margin.b)
    fig.update_layout(
        height=total,
        legend={"orientation": "h", "x": 0.0, "y": 1 - (total - fig.layout.margin.b + 8) / total,
                "yref": "container", "yanchor": "top", "xanchor": "left", "font": {"size": LEGEND_FONT},
                "itemsizing": "constant"},
        hoverlabel={"font": {"size": 13}},
    )
    return fig


def _number(value: float) -> str:
    return "–" if not np.isfinite(value) else f"{value:.2f}"
