"""Per-class separation, baseline vs compared model: a dumbbell chart that gives the picture a number."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from bioviz.figures.text import shorten, text_width
from bioviz.figures.theme import CAPTION_OFFSET, apply_theme, class_colours, pair_colours, theme
from bioviz.views.separation import MEASURES, Separation

TICK_SIZE = 12
LABEL_SHARE = 0.42  # of the figure's width at most for the class names
MARK = "■ "


def separation_figure(separation: Separation, view_title: str, max_classes: int = 40,
                      width: int | None = None) -> go.Figure:
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
    width : int, optional
        Narrowest width the figure is shown at (the theme's ``column_width`` by default: the
        page puts it beside the means); class names, title and caption are fitted to it.
    """
    t = theme()
    width = width or t["column_width"]
    baseline_colour, compared_colour = pair_colours()
    table = separation.table.dropna(subset=["baseline", "trained"]).sort_values("gain", ascending=True)
    if len(table) > max_classes:  # keep both ends: the biggest losses and the biggest gains
        half = max_classes // 2
        table = table.iloc[np.r_[0:half, len(table) - (max_classes - half):len(table)]]
    colours = class_colours(list(separation.table["class"]))
    # Class names fitted to a share of the width, so the plot keeps the rest; rows are
    # positions (not the names), so two names shortened alike stay two rows.
    longest = max((text_width(MARK + label, TICK_SIZE) for label in table["label"]), default=0.0)
    label_px = min(LABEL_SHARE * width, longest)
    names = [shorten(label, label_px - text_width(MARK, TICK_SIZE), TICK_SIZE) for label in table["label"]]
    ticks = [f"<span style='color:{colours[c]}'>■</span> {name}" for c, name in zip(table["class"], names)]
    rows = np.arange(len(table))
    fig = go.Figure()
    # Connecting lines, one segment per class (None breaks the line between classes).
    xs, ys = [], []
    for row, a, b in zip(rows, table["baseline"], table["trained"]):
        xs += [a, b, None]
        ys += [row, row, None]
    fig.add_trace(go.Scatter(x=xs, y=ys, mode="lines", line={"color": "#c3c9d0", "width": 3},
                             hoverinfo="skip", showlegend=False))
    legend_px = 0.0
    for column, model, colour, symbol in (("baseline", separation.model_a, baseline_colour, "circle-open"),
                                          ("trained", separation.model_b, compared_colour, "circle")):
        name = shorten(model, 0.4 * width, t["font_size"] - 1)
        legend_px += text_width(name, t["font_size"] - 1) + 50
        fig.add_trace(go.Scatter(
            x=table[column], y=rows, mode="markers", name=name,
            marker={"color": colour, "size": 11, "symbol": symbol, "line": {"width": 2, "color": colour}},
            customdata=np.column_stack([table["class"], table["label"], table["names"], table["gain"]]),
            hovertemplate=("<b>%{customdata[1]}</b> (%{customdata[0]})<br>" + f"{model}: " +
                           "%{x:.3f}<br>gain %{customdata[3]:+.3f} · %{customdata[2]} names<extra></extra>"),
        ))
    mean_a, mean_b = separation.means
    label = MEASURES[separation.measure]
    fig.update_xaxes(title_text=label, range=[-1.02, 1.02] if separation.measure == "silhouette" else [0, 1.02])
    fig.update_yaxes(tickmode="array", tickvals=rows, ticktext=ticks, tickfont={"size": TICK_SIZE},
                     range=[-0.7, len(table) - 0.3], automargin=False, showgrid=True)
    shown = "" if len(table) == len(separation.table) else f" · {len(table)} of {len(separation.table)} classes shown"
    # Said in the figure itself: this is not the Train/Evaluation class-retrieval mAP.
    sample = (f"each of {separation.sample_size:,} sampled names (class-stratified) ranks the other sampled names, "
              "not the class-retrieval mAP of test names ranking training names" if separation.measure == "map"
              else f"on {separation.sample_size:,} names (class-stratified sample)")
    caption = f"{label} per class: {sample}{shown} · mean {mean_a:.3f} → {mean_b:.3f}"
    title = f"Per-class separation · {separation.model_a} vs {separation.model_b} · {view_title}"
    legend_rows = 1 if legend_px <= width - 2 * 12 else 2
    apply_theme(fig, title, caption=caption, height=max(380, 26 * len(table) + 170), width=width,
                margin={"l": int(label_px + 14), "r": 20}, top=12 + 26 * legend_rows,
                # tick labels and the axis title take more than the default offset in chromium
                caption_offset=CAPTION_OFFSET + 14)
    # The legend sits between the title and the plot, left-aligned with the canvas.
    fig.update_layout(legend={"orientation": "h", "x": 0, "xref": "container", "y": 1, "yref": "paper",
                              "yanchor": "bottom", "xanchor": "left", "font": {"size": t["font_size"] - 1},
                              "indentation": 8})
    return fig
