"""The one look shared by every figure: fonts, palette, layout, export settings.

Values live in ``assets/theme.json`` so the app and the library agree; class colours are
assigned by class id (stable across panels and pages), not by position in a plot.
"""

from __future__ import annotations

import hashlib
import json
from functools import lru_cache
from pathlib import Path

import plotly.graph_objects as go

THEME_FILE = Path(__file__).resolve().parents[2] / "assets" / "theme.json"


@lru_cache(maxsize=1)
def theme() -> dict:
    """The theme settings from ``assets/theme.json``."""
    return json.loads(THEME_FILE.read_text(encoding="utf-8"))


def class_colour(class_id: str, order: list[str] | None = None) -> str:
    """Colour of a class: by its position in ``order`` when given, else by a hash of its id.

    Passing the level view's class list as ``order`` makes the first 24 classes distinct;
    the hash keeps a class's colour stable where no order is known.
    """
    palette = theme()["qualitative"]
    if order is not None and class_id in order:
        return palette[order.index(class_id) % len(palette)]
    digest = int(hashlib.sha1(class_id.encode()).hexdigest(), 16)
    return palette[digest % len(palette)]


def class_colours(classes: list[str]) -> dict[str, str]:
    """``class id -> colour`` for a whole class list."""
    return {c: class_colour(c, classes) for c in classes}


def apply_theme(fig: go.Figure, title: str, caption: str | None = None, height: int | None = None) -> go.Figure:
    """Style ``fig`` for the app and for papers: title, fonts, white background, caption.

    Parameters
    ----------
    fig : plotly.graph_objects.Figure
    title : str
        States what is shown (model, run, source, level).
    caption : str, optional
        One line of parameters under the plot.
    height : int, optional
        Figure height in pixels.
    """
    t = theme()
    fig.update_layout(
        title={"text": title, "font": {"size": t["title_size"]}, "x": 0.0, "xanchor": "left"},
        font={"family": t["font_family"], "size": t["font_size"], "color": t["text"]},
        paper_bgcolor=t["background"],
        plot_bgcolor=t["background"],
        margin={"l": 60, "r": 30, "t": 70, "b": 100 if caption else 50},
        legend={"font": {"size": t["font_size"] - 1}},
    )
    fig.update_xaxes(gridcolor=t["grid"], zerolinecolor=t["grid"])
    fig.update_yaxes(gridcolor=t["grid"], zerolinecolor=t["grid"])
    if height:
        fig.update_layout(height=height)
    if caption:
        # Shifted in pixels, not paper units, so it clears the x-axis title at any height.
        fig.add_annotation(text=caption, xref="paper", yref="paper", x=0, y=0, yshift=-58, xanchor="left",
                           yanchor="top", align="left", showarrow=False,
                           font={"size": t["font_size"] - 2, "color": "#52606d"})
    return fig


def export_config(filename: str) -> dict:
    """``config`` for ``st.plotly_chart``: 2x PNG from the toolbar, no plotly logo."""
    return {
        "displaylogo": False,
        "toImageButtonOptions": {"format": "png", "filename": filename, "scale": 2},
        "modeBarButtonsToAdd": ["toImage"],
    }
