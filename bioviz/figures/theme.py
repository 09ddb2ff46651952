"""The one look shared by every figure: fonts, palettes, the baseline/compared colour pair, layout.

Values live in ``assets/theme.json`` so the app and the library agree; class colours are
assigned by class id (stable across panels and pages), not by position in a plot.

Titles and captions are wrapped to the figure's export width (``export_width`` for a
full-width figure, ``column_width`` for one beside a table) and the margins grow with them,
so nothing is cut at the edge of the page or of the camera button's PNG/SVG.
"""

from __future__ import annotations

import hashlib
import json
from functools import lru_cache
from pathlib import Path

import plotly.colors
import plotly.graph_objects as go

from bioviz.figures.text import line_height, wrap_html

THEME_FILE = Path(__file__).resolve().parents[2] / "assets" / "theme.json"
EDGE = 12              # pixels kept free at the canvas's left and right edges
TITLE_TOP = 12         # pixels above the title
CAPTION_OFFSET = 58    # default distance of the caption below the plot: under tick labels and axis title


@lru_cache(maxsize=1)
def theme() -> dict:
    """The theme settings from ``assets/theme.json``."""
    return json.loads(THEME_FILE.read_text(encoding="utf-8"))


def _palette(value) -> list[str]:
    """A palette given as a list of colours or as the name of a plotly qualitative palette."""
    return list(getattr(plotly.colors.qualitative, value)) if isinstance(value, str) else list(value)


def class_palette(n_classes: int) -> list[str]:
    """Colours for ``n_classes`` categories.

    Up to the length of the theme's ``qualitative`` palette (Tableau 10) that palette; above
    it ``qualitative_many`` (plotly's Dark24: 24 dark, mutually distinct colours, legible on
    white), so 23 HPO classes do not share near-identical browns and reds.

    >>> len(class_palette(5)), len(class_palette(23))
    (10, 24)
    """
    t = theme()
    small = _palette(t["qualitative"])
    return small if n_classes <= len(small) else _palette(t["qualitative_many"])


def class_colour(class_id: str, order: list[str] | None = None) -> str:
    """Colour of a class: by its position in ``order`` when given, else by a hash of its id.

    Passing the level view's class list as ``order`` makes up to 24 classes distinct; the
    hash keeps a class's colour stable where no order is known.
    """
    if order is not None and class_id in order:
        palette = class_palette(len(order))
        return palette[order.index(class_id) % len(palette)]
    palette = _palette(theme()["qualitative_many"])
    digest = int(hashlib.sha1(class_id.encode()).hexdigest(), 16)
    return palette[digest % len(palette)]


def class_colours(classes: list[str]) -> dict[str, str]:
    """``class id -> colour`` for a whole class list."""
    palette = class_palette(len(classes))
    return {c: palette[i % len(palette)] for i, c in enumerate(classes)}


def pair_colours() -> tuple[str, str]:
    """``(baseline, compared)``: the one colour pair of every baseline-vs-compared figure."""
    t = theme()
    return t["baseline"], t["compared"]


def part_colours() -> dict[str, str]:
    """``split part -> colour`` (train, validation, test, zero-shot, unused), the same on every figure."""
    return dict(theme()["parts"])


def text_lines(html: str) -> int:
    """Number of lines plotly draws for ``html`` (``<br>`` separated)."""
    return html.count("<br>") + 1


def apply_theme(fig: go.Figure, title: str, *, caption: str | None = None, height: int | None = None,
                width: int | None = None, margin: dict | None = None, top: int = 20,
                caption_offset: int = CAPTION_OFFSET) -> go.Figure:
    """Style ``fig`` for the app and for papers: title, fonts, white background, caption.

    Parameters
    ----------
    fig : plotly.graph_objects.Figure
    title : str
        States what is shown (model, run, source, level); wrapped to ``width``.
    caption : str, optional
        Parameters under the plot (``<br>`` starts a line); wrapped to ``width``.
    height : int, optional
        Figure height in pixels for a one-line title and caption; each further line adds
        its height, so the plot keeps its size.
    width : int, optional
        The narrowest width the figure is shown or exported at (the theme's ``export_width``
        by default); titles and captions are wrapped to it. The figure itself still stretches.
    margin : dict, optional
        ``l``, ``r``, ``b`` in pixels (defaults 60, 30, 50). The top margin is computed:
        the title plus ``top``.
    top : int
        Pixels between the title and the plot area (room for subplot titles or a legend).
    caption_offset : int
        Pixels from the bottom of the plot area down to the caption.
    """
    t = theme()
    width = width or t["export_width"]
    margins = {"l": 60, "r": 30, "b": 50, **(margin or {})}
    free = width - 2 * EDGE
    title_html = wrap_html(title, free, t["title_size"])
    title_lines = text_lines(title_html)
    title_px = title_lines * line_height(t["title_size"])
    # plotly.js lifts a title of several lines by 0.7 font sizes more than a one-line title
    # at the same yanchor="top" padding (measured in chromium): put it back.
    title_pad = TITLE_TOP + (0.7 * t["title_size"] if title_lines > 1 else 0)
    margins["t"] = int(TITLE_TOP + title_px + top)
    extra = title_px - line_height(t["title_size"])
    fig.update_layout(
        title={"text": title_html, "font": {"size": t["title_size"]}, "x": 0, "xref": "container",
               "xanchor": "left", "y": 1, "yref": "container", "yanchor": "top",
               "pad": {"l": EDGE, "t": title_pad}},
        font={"family": t["font_family"], "size": t["font_size"], "color": t["text"]},
        paper_bgcolor=t["background"],
        plot_bgcolor=t["background"],
        legend={"font": {"size": t["font_size"] - 1}},
    )
    fig.update_xaxes(gridcolor=t["grid"], zerolinecolor=t["grid"])
    fig.update_yaxes(gridcolor=t["grid"], zerolinecolor=t["grid"])
    if caption:
        caption_html = "<br>".join(wrap_html(line, free, t["caption_size"]) for line in caption.split("<br>"))
        caption_px = text_lines(caption_html) * line_height(t["caption_size"])
        margins["b"] = max(margins["b"], int(caption_offset + caption_px + EDGE))
        extra += caption_px - line_height(t["caption_size"])
        # Anchored at the canvas's left edge (the plot's left edge minus the left margin),
        # in pixels, so it clears the tick labels and axis title at any height.
        fig.add_annotation(text=caption_html, xref="paper", yref="paper", x=0, y=0, xshift=-(margins["l"] - EDGE),
                           yshift=-caption_offset, xanchor="left", yanchor="top", align="left", showarrow=False,
                           font={"size": t["caption_size"], "color": t["muted_text"]})
    fig.update_layout(margin=margins)
    if height:
        fig.update_layout(height=int(height + extra))
    return fig


def export_config(filename: str) -> dict:
    """``config`` for ``st.plotly_chart``: 2x PNG from the toolbar, no plotly logo."""
    return {
        "displaylogo": False,
        "toImageButtonOptions": {"format": "png", "filename": filename, "scale": 2},
        "modeBarButtonsToAdd": ["toImage"],
    }
