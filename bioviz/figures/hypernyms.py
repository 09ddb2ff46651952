"""The hypernym ranking of a mention: each model's top class names as horizontal bars, correct ones marked.

As in higher-level-semantics Table 6. The panels sit side by side when the width leaves each
its class names and bars of a readable length, else one above the other; the gap between
side-by-side panels is as wide as the right panel's names, so they never run over the left
panel's bars and values.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from bioviz.figures.text import line_height, shorten, text_width
from bioviz.figures.theme import apply_theme, theme

TICK_SIZE = 12
MIN_BARS_PX = 180   # the narrowest bar panel that still shows "✓ 0.47" in a mid-length bar
MIN_LABEL_PX = 170  # below this the names are too cut to read: panels go one above the other
WRONG = "#c3c9d0"


def hypernym_ranking_figure(rankings: dict[str, pd.DataFrame], mention: str, true_label: str, title: str, *,
                            caption: str | None = None, width: int | None = None) -> go.Figure:
    """Top hypernym names per model as horizontal bars; correct hypernyms highlighted.

    Parameters
    ----------
    rankings : dict
        ``model label -> DataFrame`` from :func:`bioviz.views.hierarchy.hypernym_ranking`.
    mention : str
        The ranked mention (shown in the caption).
    true_label : str
        Its class label (the correct hypernyms name this class).
    title, caption : str
    width : int, optional
        Narrowest width the figure is shown at (the theme's ``export_width`` by default).
    """
    t = theme()
    width = width or t["export_width"]
    labels = list(rankings)
    n = max(len(labels), 1)
    depth = max((len(frame) for frame in rankings.values()), default=0)
    free = width - 2 * 12
    ticks = {model: [f"{r}. {h}" for r, h in zip(frame["rank"], frame["hypernym"])]
             for model, frame in rankings.items()}
    longest = max((text_width(x, TICK_SIZE) for xs in ticks.values() for x in xs), default=0.0)
    side_by_side_label = (free - n * MIN_BARS_PX - 20 * (n - 1)) / n
    side_by_side = n == 1 or side_by_side_label >= MIN_LABEL_PX
    label_px = min(longest, side_by_side_label if side_by_side else free - MIN_BARS_PX) + 6
    plot_px = free - label_px
    gap = (label_px + 14) / plot_px if side_by_side and n > 1 else 0.0
    rows, cols = (1, n) if side_by_side else (n, 1)
    # Panel titles start over the panel's names (left-aligned), so a long run name has the
    # names' width and the bars' to itself.
    panel_px = (plot_px - gap * plot_px * (n - 1)) / cols
    subplot_titles = [f"<b>{shorten(m, panel_px + label_px - 8, t['font_size'], bold=True)}</b>" for m in labels]
    row_px = 30
    vertical_gap = 70 / (depth * row_px * n + 70 * (n - 1)) if not side_by_side and n > 1 else 0.0
    fig = make_subplots(rows=rows, cols=cols, subplot_titles=subplot_titles, horizontal_spacing=gap,
                        vertical_spacing=vertical_gap)
    low = min([0.0] + [float(frame["cosine"].min()) for frame in rankings.values() if len(frame)])
    for i, (model, frame) in enumerate(rankings.items()):
        row, col = (1, i + 1) if side_by_side else (i + 1, 1)
        names = [shorten(x, label_px - 6, TICK_SIZE) for x in ticks[model]]
        colours = [t["correct"] if ok else WRONG for ok in frame["correct"]]
        fig.add_trace(go.Bar(
            x=frame["cosine"], y=list(range(len(frame))), orientation="h", marker_color=colours, showlegend=False,
            text=[("✓ " if ok else "") + f"{c:.2f}" for ok, c in zip(frame["correct"], frame["cosine"])],
            textposition="inside", insidetextanchor="end", textfont={"size": TICK_SIZE},
            customdata=np.column_stack([frame["hypernym"], frame["class_label"]]),
            hovertemplate="%{customdata[0]}<br>class: %{customdata[1]}<br>cosine %{x:.3f}<extra></extra>",
        ), row=row, col=col)
        fig.update_yaxes(tickmode="array", tickvals=list(range(len(frame))), ticktext=names, autorange="reversed",
                         automargin=False, tickfont={"size": TICK_SIZE}, row=row, col=col)
        fig.update_xaxes(range=[low, 1.0], row=row, col=col)
    for i, annotation in enumerate(fig.layout.annotations[:n]):
        axis = fig.layout[f"xaxis{i + 1 if i else ''}"]
        annotation.update(xanchor="left", xshift=-(label_px - 6), x=axis.domain[0])
    caption = caption or (f"cosine to the mention “{mention}” · correct class: {true_label} "
                          "(highlighted, ✓)")
    height = depth * row_px * (1 if side_by_side else n) + (70 * (n - 1) if not side_by_side else 0) + 150
    apply_theme(fig, title, caption=caption, height=max(300, height), width=width,
                margin={"l": int(label_px + 12), "r": 12},
                top=int(line_height(t["font_size"]) + 14), caption_offset=30)
    return fig
