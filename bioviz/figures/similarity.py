"""Cosine-similarity heatmaps of a term list: baseline, compared model, and their difference.

The baseline and compared heatmaps sit side by side in one figure and share one colour
axis (same range, same colours), so equal colours mean equal similarity in both; the
difference has its own diverging scale centred on 0. Values are printed in the cells when a
cell, at the figure's width, is wide enough for them at a legible size (10 px or more); a
legend under the matrix names the groups whose coloured squares mark the terms.
"""

from __future__ import annotations

import math

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from bioviz.figures.text import distinct_shortened, line_height, shorten, text_width, wrap_html
from bioviz.figures.theme import apply_theme, class_colour, pair_colours, theme
from bioviz.views.similarity import SimilarityComparison

MAX_ANNOTATED = 25      # never more values than this per side, whatever the width
TICK_SIZE = 12
LABEL_PX = 210          # longest term label
COLORBAR_PX = 90
VALUE_SIZES = (12, 11, 10)  # tried in turn; 10 px is the smallest value printed
LEGEND_ROW_PX = 21
MAX_LEGEND_LINES = 6    # groups listed one a line; more go into columns


def _tick_labels(terms, groups, colour_order: list[str] | None = None, longest: float = LABEL_PX,
                 size: float = TICK_SIZE) -> list[str]:
    """Terms with a coloured square per group.

    ``colour_order`` fixes the colour of each group (pass the level view's classes when the
    groups are classes, so a class has the same colour as on the other pages); by default
    the sorted groups, so the colours do not change with the row order.
    """
    order = colour_order or sorted({g for g in groups if g})
    longest = np.broadcast_to(np.asarray(longest, dtype=float), (len(terms),))
    rooms = [room - (text_width("■ ", size) if group else 0) for room, group in zip(longest, groups)]
    # Shortened together, so two long terms that differ only at the end stay told apart.
    labels = distinct_shortened(list(terms), rooms, size)
    return [(f"<span style='color:{class_colour(group, order)}'>■</span> " if group else "") + label
            for label, group in zip(labels, groups)]


def shared_range(a: np.ndarray, b: np.ndarray) -> tuple[float, float]:
    """One colour range for a pair of similarity matrices (off-diagonal values, padded to 1)."""
    mask = ~np.eye(len(a), dtype=bool)
    values = np.concatenate([a[mask], b[mask]]) if mask.any() else np.array([0.0])
    low = float(min(0.0, np.floor(values.min() * 10) / 10))
    return low, 1.0


def cell_text(value: float, signed: bool = False) -> str:
    """A cell's value as printed: two decimals, never "-0.00" (a rounding's sign says nothing).

    >>> [cell_text(v) for v in (-0.001, 0.5)], cell_text(-0.004, signed=True), cell_text(0.25, signed=True)
    (['0.00', '0.50'], '0.00', '+0.25')
    """
    text = f"{value:+.2f}" if signed else f"{value:.2f}"
    return "0.00" if text.lstrip("+-") == "0.00" else text


def _formatted(matrix, signed: bool = False) -> list[str]:
    """The values as the cells print them (:func:`cell_text`), row by row."""
    return [cell_text(v, signed) for v in np.asarray(matrix, dtype=float).ravel()]


def _cells(matrix, signed: bool = False) -> np.ndarray:
    """:func:`_formatted` in the matrix's shape, for a heatmap's ``text``."""
    matrix = np.asarray(matrix, dtype=float)
    return np.asarray(_formatted(matrix, signed), dtype=object).reshape(matrix.shape)


def _value_size(cell_px: float, texts) -> int | None:
    """The largest legible font size at which every value fits its cell (None: none does)."""
    widest = max((text_width(t, 1.0) for t in texts), default=0.0)  # width per pixel of font size
    for size in VALUE_SIZES:
        if widest * size + 2 <= cell_px and line_height(size) <= cell_px + 2:
            return size
    return None


class _Grid:
    """Cell sizes and axis labels of an ``n`` x ``n`` matrix drawn ``panel_px`` wide.

    Rows are at least a label's line high (16 px) and at most 34; the matrix at most 1000 px
    tall. Column labels run at 45° when a cell is wide enough for a rotated line, else
    upright (90°) in a smaller font; when even that does not fit, or rows are lower than a
    line, only every k-th label is written, so labels never run into each other.
    """

    def __init__(self, terms, groups, colour_order, panel_px: float, right_px: float = COLORBAR_PX):
        n = max(len(terms), 1)
        self.cell_w = panel_px / n
        self.cell_h = min(max(self.cell_w, 16.0), 34.0)
        if n * self.cell_h > 1000:
            self.cell_h = 1000 / n
        self.plot_px = max(300.0, n * self.cell_h)
        row_step = math.ceil(line_height(TICK_SIZE) / self.cell_h)
        self.row_ticks = _thinned(_tick_labels(terms, groups, colour_order), row_step)
        if self.cell_w >= line_height(TICK_SIZE) / math.sin(math.pi / 4):
            self.column_angle, self.column_size, longest = -45, TICK_SIZE, LABEL_PX
        else:
            self.column_angle = -90
            self.column_size = 11 if self.cell_w >= line_height(11) else 10
            longest = 150
        if self.column_angle == -45:
            # A 45° label runs right as far as it rises: the last columns' labels get only the
            # room between their column and the figure's edge (the colour bar's margin).
            room = ((n - np.arange(n) - 0.5) * self.cell_w + right_px) / math.cos(math.pi / 4)
            longest = np.minimum(longest, room)
        column_step = math.ceil(line_height(self.column_size) * 0.9 / self.cell_w)
        self.column_ticks = _thinned(_tick_labels(terms, groups, colour_order, longest, self.column_size),
                                     column_step)
        widest = max((text_width(t, self.column_size) for t in self.column_ticks), default=0.0)
        rise = widest * (math.sin(math.pi / 4) if self.column_angle == -45 else 1.0)
        self.top_px = rise + self.column_size + 8

    def value_size(self, texts) -> int | None:
        return _value_size(min(self.cell_w, self.cell_h), texts)


def _thinned(ticks: list[str], step: int) -> list[str]:
    """Every ``step``-th label kept, the others blank."""
    return [tick if i % step == 0 else "" for i, tick in enumerate(ticks)] if step > 1 else ticks


def terms_title(origin: str, n: int) -> str:
    """What the terms are, for a title: "12 typed terms", "names of class IX (...)", ...

    ``origin`` is :attr:`bioviz.views.similarity.TermList.origin` (optionally followed by
    `` · `` and more, e.g. the level).

    >>> terms_title("typed", 12)
    '12 typed terms'
    >>> terms_title("example biolord_appendix_b", 9)
    '9 terms of the example set “biolord_appendix_b”'
    >>> terms_title("class IX (Diseases of the circulatory system) · icd10 · ICD10 depth 1", 25)
    '25 names of class IX (Diseases of the circulatory system) · icd10 · ICD10 depth 1'
    """
    head, _, rest = origin.partition(" · ")
    tail = f" · {rest}" if rest else ""
    if head in ("", "typed", "given"):
        return f"{n} {head + ' ' if head else ''}terms{tail}"
    if head.startswith("example "):
        return f"{n} terms of the example set “{head[len('example '):]}”{tail}"
    return f"{n} names of {head}{tail}"


def _group_legend(fig: go.Figure, groups, colour_order: list[str] | None, group_labels: dict | None,
                  width: float) -> int:
    """Legend entries naming the groups of the coloured squares; returns the rows they take.

    ``width`` is the plot area's: a horizontal legend wraps within it.
    """
    present = [g for g in dict.fromkeys(groups) if g]
    if len(present) < 2 and not group_labels:
        return 0
    order = colour_order or sorted(present)
    names = [f"{g} {group_labels[g]}" if group_labels and g in group_labels else g for g in present]
    longest = max(text_width(n, TICK_SIZE) for n in names)
    # A few groups: one a line, so the legend's height is exactly its rows and the caption
    # under it stays clear; many: in columns, each entry cut to its column.
    columns = 1 if len(present) <= MAX_LEGEND_LINES else int(max(1, min(4, width // (longest + 60))))
    entry_px = width / columns - 60  # the square, its gap and plotly's padding come on top
    for group, name in zip(present, names):
        fig.add_trace(go.Scatter(x=[None], y=[None], mode="markers", name=shorten(name, entry_px, TICK_SIZE),
                                 marker={"symbol": "square", "size": 11, "color": class_colour(group, order)},
                                 hoverinfo="skip", showlegend=True))
    # Horizontal even with one column: a vertical legend below the plot would push the plot
    # area aside (plotly reserves a margin for it); an entry as wide as the row is one a line.
    fig.update_layout(legend={"orientation": "h", "entrywidth": entry_px, "entrywidthmode": "pixels",
                              "font": {"size": TICK_SIZE}, "tracegroupgap": 0, "title": {"text": ""}})
    # Columns: plotly may wrap an entry sooner than measured; a spare row keeps the caption clear.
    return math.ceil(len(present) / columns) + (1 if columns > 1 else 0)


def _place_legend(fig: go.Figure, rows: int, height: float) -> None:
    """The group legend right under the matrix, in pixels from the top (the height is fixed)."""
    if rows:
        bottom = fig.layout.margin.b
        fig.update_layout(legend={"x": 0, "xref": "container", "xanchor": "left", "yref": "container",
                                  "y": 1 - (height - bottom + 10) / height, "yanchor": "top"})


def similarity_heatmap(
    matrix: np.ndarray,
    terms,
    groups,
    title: str,
    *,
    caption: str | None = None,
    zrange: tuple[float, float] = (0.0, 1.0),
    colorscale: str | None = None,
    colorbar_title: str = "cosine",
    show_values: bool | None = None,
    colour_order: list[str] | None = None,
    width: int | None = None,
    group_labels: dict[str, str] | None = None,
    signed: bool = False,
) -> go.Figure:
    """One square heatmap of ``matrix`` with the terms on both axes (first term on top).

    Parameters
    ----------
    matrix : numpy.ndarray
        ``(n, n)`` similarities (or differences).
    terms, groups : sequence of str
        Axis labels and their groups (coloured squares before the labels).
    title, caption : str
    zrange : (float, float)
        Colour range; pass the same range to both heatmaps of a pair.
    colorscale : str, optional
        Plotly colour scale name (theme's sequential scale by default).
    colorbar_title : str
    show_values : bool, optional
        Print values in cells; by default when they fit the cells at 10 px or more.
    colour_order : list of str, optional
        Group order that fixes the group colours (e.g. the level view's classes).
    width : int, optional
        Width the figure is laid out for (the theme's ``export_width`` by default).
    group_labels : dict, optional
        Readable name of each group (e.g. class id -> class name) for the legend.
    signed : bool
        Values with their sign (differences).
    """
    t = theme()
    width = width or t["export_width"]
    n = len(terms)
    grid = _Grid(terms, groups, colour_order, width - 24 - LABEL_PX - COLORBAR_PX)
    size = grid.value_size(_formatted(matrix, signed)) if n <= MAX_ANNOTATED else None
    show_values = size is not None if show_values is None else show_values
    heatmap = go.Heatmap(
        # Positions, not labels, on the axes: two long terms cut to the same label stay apart.
        z=np.round(matrix, 6) + 0.0, x=list(range(n)), y=list(range(n)), zmin=zrange[0], zmax=zrange[1],
        colorscale=colorscale or t["sequential"],
        colorbar={"title": {"text": colorbar_title, "side": "right"}, "thickness": 14},
        customdata=np.dstack(np.meshgrid(np.asarray(terms, dtype=object), np.asarray(terms, dtype=object))),
        hovertemplate="%{customdata[1]}<br>%{customdata[0]}<br><b>%{z:.3f}</b><extra></extra>",
        xgap=1, ygap=1,
    )
    if show_values:
        heatmap.update(text=_cells(matrix, signed), texttemplate="%{text}",
                       textfont={"size": size or VALUE_SIZES[-1]})
    fig = go.Figure(heatmap)
    _axes(fig, grid, n)
    legend_rows = _group_legend(fig, groups, colour_order, group_labels, width - LABEL_PX - 36)
    legend_px = 10 + LEGEND_ROW_PX * legend_rows if legend_rows else 0
    apply_theme(fig, title, caption=caption, width=width, margin={"l": LABEL_PX + 16, "r": 20, "b": legend_px + 20},
                top=int(grid.top_px), caption_offset=legend_px + 10)
    height = fig.layout.margin.t + grid.plot_px + fig.layout.margin.b
    fig.update_layout(height=int(height))
    _place_legend(fig, legend_rows, height)
    return fig


def _axes(fig: go.Figure, grid: _Grid, n: int) -> None:
    """Term labels on both axes: rows on the left, columns on top (as in the papers' matrices)."""
    common = dict(tickmode="array", tickvals=list(range(n)), showgrid=False, zeroline=False, automargin=False)
    fig.update_yaxes(autorange="reversed", ticktext=grid.row_ticks, tickfont={"size": TICK_SIZE}, **common)
    fig.update_xaxes(side="top", tickangle=grid.column_angle, ticktext=grid.column_ticks,
                     tickfont={"size": grid.column_size}, **common)


def similarity_pair_figure(comparison: SimilarityComparison, *, subtitle: str = "",
                           colour_order: list[str] | None = None, caption: str | None = None,
                           width: int | None = None, group_labels: dict[str, str] | None = None,
                           title: str | None = None) -> go.Figure:
    """Baseline and compared heatmaps side by side in one figure, with one shared colour scale.

    The rows (terms) are labelled once, on the left; both panels use one colour axis, so a
    colour means the same cosine in both.

    Parameters
    ----------
    comparison : SimilarityComparison
    subtitle : str
        Where the terms came from (``TermList.origin``, optionally `` · `` the level): the
        title says it in words (:func:`terms_title`).
    colour_order : list of str, optional
        Fixes group colours (see :func:`similarity_heatmap`).
    caption : str, optional
        Parameter line; by default the number of terms, the order and the colour range.
    width : int, optional
        Width the figure is laid out for (the theme's ``export_width`` by default).
    group_labels : dict, optional
        Readable name of each group for the legend of the coloured squares.
    title : str, optional
        Replaces the default title.
    """
    t = theme()
    width = width or t["export_width"]
    low, high = shared_range(comparison.a, comparison.b)
    n = len(comparison.terms)
    terms = np.asarray(comparison.terms, dtype=object)
    customdata = np.dstack(np.meshgrid(terms, terms))
    baseline_colour, compared_colour = pair_colours()
    panel_px = (width - 24 - LABEL_PX - COLORBAR_PX) * 0.98 / 2
    grid = _Grid(comparison.terms, comparison.groups, colour_order, panel_px)
    # Whole model names on up to two lines: a run's name is told from another by its end.
    names = [wrap_html(m, panel_px - 110, t["font_size"], max_lines=2, bold=True)
             for m in (comparison.model_a, comparison.model_b)]
    title_lines = max(n.count("<br>") + 1 for n in names)
    names = [n.replace("<br>", "</b><br><b>") for n in names]
    fig = make_subplots(rows=1, cols=2, shared_yaxes=True, horizontal_spacing=0.02,
                        subplot_titles=(f"<span style='color:{baseline_colour}'>■</span> <b>{names[0]}</b> (baseline)",
                                        f"<span style='color:{compared_colour}'>■</span> <b>{names[1]}</b>"))
    size = grid.value_size(_formatted(comparison.a) + _formatted(comparison.b)) if n <= MAX_ANNOTATED else None
    for col, matrix in ((1, comparison.a), (2, comparison.b)):
        # + 0.0 turns a rounded -0.0 into 0.0, so the hover never shows "-0.000".
        heatmap = go.Heatmap(z=np.round(matrix, 6) + 0.0, x=list(range(n)), y=list(range(n)), coloraxis="coloraxis",
                             customdata=customdata, xgap=1, ygap=1,
                             hovertemplate="%{customdata[1]}<br>%{customdata[0]}<br><b>%{z:.3f}</b><extra></extra>")
        if size:
            heatmap.update(text=_cells(matrix), texttemplate="%{text}", textfont={"size": size})
        fig.add_trace(heatmap, row=1, col=col)
    _axes(fig, grid, n)
    legend_rows = _group_legend(fig, comparison.groups, colour_order, group_labels, width - LABEL_PX - 36)
    legend_px = 10 + LEGEND_ROW_PX * legend_rows if legend_rows else 0
    caption = caption or (f"{n} terms · ordered by {comparison.order} · one colour scale for both, {low:g} to {high:g}"
                          + ("" if size else " · values on hover (too many terms to print them legibly)"))
    title = title or (f"Cosine similarity of {terms_title(subtitle, n)} · {comparison.model_a} vs "
                      f"{comparison.model_b}")
    apply_theme(fig, title, caption=caption, width=width, margin={"l": LABEL_PX + 16, "r": 20, "b": legend_px + 20},
                top=int(grid.top_px + title_lines * line_height(t["font_size"]) + 8), caption_offset=legend_px + 10)
    height = fig.layout.margin.t + grid.plot_px + fig.layout.margin.b
    fig.update_layout(
        height=int(height),
        coloraxis={"colorscale": t["sequential"], "cmin": low, "cmax": high,
                   "colorbar": {"title": {"text": "cosine", "side": "right"}, "thickness": 14}},
    )
    # Panel titles above the rotated column labels, not on top of them.
    for annotation in fig.layout.annotations[:2]:
        annotation.update(yanchor="bottom", yshift=grid.top_px)
    _place_legend(fig, legend_rows, height)
    return fig


def similarity_figures(comparison: SimilarityComparison, *, subtitle: str = "",
                       colour_order: list[str] | None = None, width: int | None = None,
                       group_labels: dict[str, str] | None = None) -> dict[str, go.Figure]:
    """The figures of a comparison: the baseline/compared ``pair`` (one shared scale) and the ``difference``.

    Parameters
    ----------
    comparison : SimilarityComparison
    subtitle : str
        Where the terms came from (see :func:`similarity_pair_figure`).
    colour_order : list of str, optional
        Fixes group colours (see :func:`similarity_heatmap`).
    width : int, optional
        Width the figures are laid out for (the theme's ``export_width`` by default).
    group_labels : dict, optional
        Readable name of each group (e.g. ``dict(zip(view.classes, view.class_labels))``).

    Returns
    -------
    dict
        ``{"pair": fig, "difference": fig}``.
    """
    n = len(comparison.terms)
    diff = comparison.difference
    bound = float(max(0.05, np.ceil(np.abs(diff).max() * 20) / 20))
    fig_d = similarity_heatmap(
        diff, comparison.terms, comparison.groups,
        f"Difference in cosine similarity of {terms_title(subtitle, n)} · {comparison.model_b} − {comparison.model_a}",
        caption=f"{n} terms · red = more similar under {comparison.model_b}, blue = under {comparison.model_a}"
                f" · ±{bound:g}",
        zrange=(-bound, bound), colorscale=theme()["diverging"] + "_r", colorbar_title="Δ cosine",
        colour_order=colour_order,
        width=width, group_labels=group_labels, signed=True,
    )
    return {"pair": similarity_pair_figure(comparison, subtitle=subtitle, colour_order=colour_order, width=width,
                                           group_labels=group_labels),
            "difference": fig_d}
