"""What training moved: arrows from each name's baseline position to its aligned compared position.

One panel in the baseline layout's frame. Every measured name is a faint grey dot where the
compared model puts it; the names chosen for arrows (a class's, or the furthest moved) get a
line from their baseline position to their compared position and an arrowhead there,
coloured by split part (train / validation / test / zero-shot) when the arrows' names are in
a split, so one can see whether names the run never trained on moved with their class, and
by class otherwise (one grey "not in the split" for every arrow would say nothing). Arrows are capped
(:data:`MAX_ARROWS`): a few hundred are legible, thousands are a smear.
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from bioviz.figures.density import bulk_range
from bioviz.figures.text import shorten, text_width
from bioviz.figures.theme import apply_theme, class_colours, part_colours, theme
from bioviz.ontology.levels import LevelView
from bioviz.views.movement import PARTS, Movement

MAX_ARROWS = 400
PART_NAMES = {"train": "train", "validation": "validation", "test": "test", "zero-shot": "zero-shot class",
              "unused": "not in the split"}
LEGEND_FONT = 12
LEGEND_ROW_PX = 21
SIDE = 20


def colour_by(part_of: np.ndarray, arrows: np.ndarray) -> str:
    """``"split part"`` when at least half the arrows' names are in the split, else ``"class"``.

    A few-shot split holds a few names per class: of the furthest movers most are outside
    it, and one grey "not in the split" for them would hide where each class went.
    """
    in_split = np.asarray([part != "unused" for part in part_of[arrows]], dtype=bool)
    return "split part" if len(arrows) and in_split.mean() >= 0.5 else "class"


def arrow_groups(view: LevelView, part_of: np.ndarray, labels: np.ndarray, arrows: np.ndarray
                 ) -> list[tuple[str, str, np.ndarray]]:
    """``(legend name, colour, positions)`` of the arrows, by split part or by class (:func:`colour_by`).

    Parts in their fixed order; classes largest group first.
    """
    if colour_by(part_of, arrows) == "split part":
        colours = part_colours()
        return [(PART_NAMES[part], colours[part], arrows[part_of[arrows] == part])
                for part in PARTS if (part_of[arrows] == part).any()]
    colours = class_colours(view.classes)
    present = sorted(set(labels[arrows].tolist()), key=lambda c: -int((labels[arrows] == c).sum()))
    # The class's name alone: its code is in the hover, and a legend of codes says little.
    return [(view.class_labels[c], colours[view.classes[c]], arrows[labels[arrows] == c]) for c in present]


def movement_figure(view: LevelView, movement: Movement, coords_a: np.ndarray, coords_b: np.ndarray, *,
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
    groups = arrow_groups(view, part_of, view.labels[rows], arrows)
    by_class = colour_by(part_of, arrows) == "class"
    # Axes fit the bulk of both layouts; a far outlier's arrow runs off the edge (clipped).
    stacked = np.vstack([coords_a, coords_b])
    ranges = [list(bulk_range(stacked[:, d])) for d in range(2)]
    fig = go.Figure()
    fig.add_trace(go.Scattergl(
        x=coords_b[:, 0], y=coords_b[:, 1], mode="markers", name=f"measured names ({len(rows):,})",
        marker={"color": t["other_classes"], "size": 4, "opacity": 0.5}, hoverinfo="skip", showlegend=True,
    ))
    plot_px = width - 2 * SIDE
    entry_px = _entry_px([f"{name} (000)" for name, _, _ in groups], plot_px)
    for group in groups:
        _add_arrows(fig, view, movement, (coords_a, coords_b), group, entry_px)
    spans = [hi - lo for lo, hi in ranges]
    plot_height = height or int(np.clip(plot_px * spans[1] / max(spans[0], 1e-9), 320, 640))
    fig.update_xaxes(range=ranges[0], showticklabels=False, zeroline=False, showgrid=False)
    fig.update_yaxes(range=ranges[1], showticklabels=False, zeroline=False, showgrid=False,
                     scaleanchor="x", scaleratio=1)
    shown = len(arrows)
    title = title or (f"What training moved · {model_a} → {model_b} · {view.title}")
    caption = caption or (f"Arrows: {shown} names from their {shorten(model_a, 240, t['caption_size'])} position "
                          f"to their aligned {shorten(model_b, 240, t['caption_size'])} position, coloured by "
                          f"{'class' if by_class else 'split part'} · grey: every measured name under the compared "
                          "model · moved = distance over the "
                          f"baseline layout's RMS radius")
    columns = max(1, int(plot_px // (entry_px + 48)))  # the arrow symbol and plotly's padding on top
    # One more entry (the measured names); with columns a spare row, as plotly may wrap sooner.
    legend_px = 10 + LEGEND_ROW_PX * (int(np.ceil((len(groups) + 1) / columns)) + (1 if columns > 1 else 0))
    apply_theme(fig, title, caption=caption, width=width, margin={"l": SIDE, "r": SIDE, "b": legend_px + 12}, top=16,
                caption_offset=legend_px + 8)
    total = int(fig.layout.margin.t + plot_height + fig.layout.margin.b)
    fig.update_layout(
        height=total,
        legend={"orientation": "h", "x": 0.0, "y": 1 - (total - fig.layout.margin.b + 8) / total,
                "yref": "container", "yanchor": "top", "xanchor": "left", "font": {"size": LEGEND_FONT},
                "itemsizing": "constant", "entrywidth": entry_px, "entrywidthmode": "pixels", "tracegroupgap": 0},
        hoverlabel={"font": {"size": 13}},
    )
    return fig


def _add_arrows(fig: go.Figure, view: LevelView, movement: Movement, coords: tuple[np.ndarray, np.ndarray],
                group: tuple[str, str, np.ndarray], entry_px: float) -> None:
    """One group's arrows (its legend name is its legend group): segments, tails, a legend proxy, heads."""
    name, colour, chosen = group
    rows = movement.rows
    start, end = coords[0][chosen], coords[1][chosen]
    # One trace of line segments (None between them) per part: a few traces, not one per arrow.
    xs = np.column_stack([start[:, 0], end[:, 0], np.full(len(chosen), np.nan)]).ravel()
    ys = np.column_stack([start[:, 1], end[:, 1], np.full(len(chosen), np.nan)]).ravel()
    fig.add_trace(go.Scatter(x=xs, y=ys, mode="lines", line={"color": colour, "width": 1.3},
                             opacity=0.75, hoverinfo="skip", showlegend=False, legendgroup=name))
    fig.add_trace(go.Scatter(x=start[:, 0], y=start[:, 1], mode="markers", hoverinfo="skip",
                             marker={"color": colour, "size": 4, "opacity": 0.7}, showlegend=False,
                             legendgroup=name))
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
    fig.add_trace(go.Scatter(x=[None], y=[None], mode="lines+markers",
                             name=f"{shorten(name, entry_px - text_width(' (000)', LEGEND_FONT), LEGEND_FONT)} "
                                  f"({len(chosen)})",
                             legendgroup=name, line={"color": colour, "width": 1.3}, hoverinfo="skip",
                             marker={"symbol": "arrow", "angle": 90, "size": 9, "color": colour}))
    fig.add_trace(go.Scatter(
        x=end[:, 0], y=end[:, 1], mode="markers", name=name, showlegend=False,
        legendgroup=name, customdata=customdata,
        marker={"symbol": "arrow", "angle": angles, "size": 9, "color": colour, "line": {"width": 0}},
        hovertemplate=("<b>%{customdata[1]}</b><br>%{customdata[2]} · %{customdata[3]}<br>"
                       f"{name.replace('%', '%%')} · moved %{{customdata[6]}} · same-class precision@{movement.k} "
                       "%{customdata[4]} → %{customdata[5]}<extra></extra>"),
    ))


def _entry_px(names: list[str], plot_px: float) -> float:
    """Pixels of text per legend entry: the longest name's, at most a third of the plot."""
    longest = max((text_width(n, LEGEND_FONT) for n in names), default=100.0)
    return float(min(longest + 8, plot_px / 3 - 48))


def _number(value: float) -> str:
    return "–" if not np.isfinite(value) else f"{value:.2f}"
