"""Figures of a level view: class sizes."""

from __future__ import annotations

import plotly.graph_objects as go

from bioviz.figures.theme import apply_theme, class_colours
from bioviz.ontology.levels import LevelView


def _short(label: str, width: int = 48) -> str:
    return label if len(label) <= width else label[: width - 1] + "…"


def class_size_bar(view: LevelView, max_classes: int = 60) -> go.Figure:
    """Horizontal bar chart of names per class, largest first, class names readable.

    Parameters
    ----------
    view : LevelView
    max_classes : int
        Show at most this many classes (the largest); the caption says how many were cut.
    """
    sizes = view.class_sizes()
    order = sorted(range(len(view.classes)), key=lambda i: -sizes[i])[:max_classes]
    colours = class_colours(view.classes)
    labels = [f"{_short(view.class_labels[i])} ({view.classes[i]})" for i in order]
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
    fig.update_yaxes(automargin=True, tickfont={"size": 12})
    return apply_theme(fig, f"Class sizes · {view.title}", caption, height=max(360, 22 * len(order) + 140))
