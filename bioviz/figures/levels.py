"""Figures of a level view: class sizes."""

from __future__ import annotations

import plotly.graph_objects as go

from bioviz.figures.text import line_height, text_width, wrap
from bioviz.figures.theme import apply_theme, class_colours, theme
from bioviz.ontology.levels import LevelView

TICK_SIZE = 12
LABEL_SHARE = 0.45  # of the width at most for the class names


def class_size_bar(view: LevelView, max_classes: int = 60, width: int | None = None) -> go.Figure:
    """Horizontal bar chart of names per class, largest first, class names whole.

    Names longer than their share of the width wrap between words onto as many lines as they
    need, never cut, so ICD-10's long chapter names are read in full. The left margin fits
    the labels as measured here; plotly widens it further where the viewer's font is wider
    (``automargin``), so no label is clipped at the figure's edge.

    Parameters
    ----------
    view : LevelView
    max_classes : int
        Show at most this many classes (the largest); the caption says how many were cut.
    width : int, optional
        Narrowest width the figure is shown at (the theme's ``export_width`` by default).
    """
    width = width or theme()["export_width"]
    sizes = view.class_sizes()
    order = sorted(range(len(view.classes)), key=lambda i: -sizes[i])[:max_classes]
    colours = class_colours(view.classes)
    texts = [f"{view.class_labels[i]} ({view.classes[i]})" for i in order]
    label_px = min(LABEL_SHARE * width, max((text_width(x, TICK_SIZE) for x in texts), default=0.0))
    wrapped = [wrap(x, label_px, TICK_SIZE) for x in texts]
    labels = ["<br>".join(lines) for lines in wrapped]
    lines = max((len(x) for x in wrapped), default=1)
    row_px = max(22.0, lines * line_height(TICK_SIZE) + 4)
    fig = go.Figure(
        go.Bar(
            x=[int(sizes[i]) for i in order][::-1],
            y=labels[::-1],
            orientation="h",
            marker_color=[colours[view.classes[i]] for i in order][::-1],
            hovertemplate="%{y}<br>%{x} names<extra></extra>",
        )
    )
    shown = "" if len(order) == len(view.classes) else f" · largest {len(order)} of {len(view.classes)} classes"
    caption = f"{len(view.names)} names in {len(view.classes)} classes{shown}"
    if view.ambiguous_dropped and view.ambiguous:
        caption += f" · {len(view.ambiguous)} ambiguous names dropped"
    fig.update_xaxes(title_text="names per class")
    fig.update_yaxes(automargin="left", tickfont={"size": TICK_SIZE})
    return apply_theme(fig, f"Class sizes · {view.title}", caption=caption,
                       height=int(max(360, row_px * len(order) + 140)),
                       width=width, margin={"l": int(label_px + 14)})
