"""Per-class separation, baseline vs compared model: a dumbbell chart that gives the picture a number."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from bioviz.figures.theme import apply_theme, class_colours, theme
from bioviz.views.separation import MEASURES, Separation


def _short(label: str, width: int = 40) -> str:
    return label if len(label) <= width else label[: width - 1] + "…"


def separation_figure(separation: Separation, view_title: str, max_classes: int = 40) -> go.Figure:
    """One row per class: the baseline and the compared model's score joined by a line.

    Classes are sorted by gain (largest gain on top), so what training improved most is
    read first; at most ``max_classes`` rows (the largest gains and losses are kept).

    Parameters
    ----------
    separation : Separation
        From :func:`bioviz.views.separation.compare_separation`.
    view_title : str
        The level view's title (source and level).
    max_classes : int
        Row limit; the caption says how many classes were left out.
    """
    t = theme()
    table = separation.table.dropna(subset=["baseline", "trained"]).sort_values("gain", ascending=True)
    if len(table) > max_classes:  # keep both ends: the biggest losses and the biggest gains
        half = max_classes // 2
        table = table.iloc[np.r_[0:half, len(table) - (max_classes - half):len(table)]]
    colours = class_colours(list(separation.table["class"]))
    ticks = [f"<span style='color:{colours[c]}'>■</span> {_short(label)}" for c, label in zip(table["class"], table["label"])]
    fig = go.Figure()
    # Connecting lines, one segment per class (None breaks the line between classes).
    xs, ys = [], []
    for tick, a, b in zip(ticks, table["baseline"], table["trained"]):
        xs += [a, b, None]
        ys += [tick, tick, None]
    fig.add_trace(go.Scatter(x=xs, y=ys, mode="lines", line={"color": "#c3c9d0", "width": 3},
                             hoverinfo="skip", showlegend=False))
    for column, model, colour, symbol in (("baseline", separation.model_a, t["baseline"], "circle-open"),
                                          ("trained", separation.model_b, t["trained"], "circle")):
        fig.add_trace(go.Scatter(
            x=table[column], y=ticks, mode="markers", name=_short(model, 40),
            marker={"color": colour, "size": 11, "symbol": symbol, "line": {"width": 2, "color": colour}},
            customdata=np.column_stack([table["class"], table["label"], table["names"], table["gain"]]),
            hovertemplate=("<b>%{customdata[1]}</b> (%{customdata[0]})<br>" + f"{model}: " +
                           "%{x:.3f}<br>gain %{customdata[3]:+.3f} · %{customdata[2]} names<extra></extra>"),
        ))
    mean_a, mean_b = separation.means
    label = MEASURES[separation.measure]
    fig.update_xaxes(title_text=label, range=[-1.02, 1.02] if separation.measure == "silhouette" else [0, 1.02])
    fig.update_yaxes(automargin=True, tickfont={"size": 12})
    shown = "" if len(table) == len(separation.table) else f" · {len(table)} of {len(separation.table)} classes shown"
    caption = (f"{label} per class on {separation.sample_size:,} names (class-stratified sample){shown} · "
               f"mean {mean_a:.3f} → {mean_b:.3f}")
    title = f"Per-class separation · {separation.model_a} vs {separation.model_b} · {view_title}"
    apply_theme(fig, title, caption, height=max(380, 26 * len(table) + 170))
    fig.update_layout(legend={"orientation": "h", "x": 0, "y": 1.0, "yanchor": "bottom"}, margin={"t": 95})
    return fig
