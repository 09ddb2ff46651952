"""Cosine-similarity heatmaps of a term list: baseline, compared model, and their difference.

The baseline and compared heatmaps sit side by side in one figure and share one colour
axis (same range, same colours), so equal colours mean equal similarity in both; the
difference has its own diverging scale centred on 0. Values are printed in the cells for up to ``MAX_ANNOTATED`` terms.
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from bioviz.figures.theme import apply_theme, class_colour, theme
from bioviz.views.similarity import SimilarityComparison

MAX_ANNOTATED = 25


def _short(label: str, width: int = 34) -> str:
    return label if len(label) <= width else label[: width - 1] + "…"


def _tick_labels(terms, groups, colour_order: list[str] | None = None) -> list[str]:
    """Terms with a coloured square per group.

    ``colour_order`` fixes the colour of each group (pass the level view's classes when the
    groups are classes, so a class has the same colour as on the other pages); by default
    the sorted groups, so the colours do not change with the row order.
    """
    order = colour_order or sorted({g for g in groups if g})
    out = []
    for term, group in zip(terms, groups):
        mark = f"<span style='color:{class_colour(group, order)}'>■</span> " if group else ""
        out.append(mark + _short(term))
    return out


def shared_range(a: np.ndarray, b: np.ndarray) -> tuple[float, float]:
    """One colour range for a pair of similarity matrices (off-diagonal values, padded to 1)."""
    mask = ~np.eye(len(a), dtype=bool)
    values = np.concatenate([a[mask], b[mask]]) if mask.any() else np.array([0.0])
    low = float(min(0.0, np.floor(values.min() * 10) / 10))
    return low, 1.0


def similarity_heatmap(
    matrix: np.ndarray,
    terms,
    groups,
    title: str,
    caption: str | None = None,
    zrange: tuple[float, float] = (0.0, 1.0),
    colorscale: str | None = None,
    colorbar_title: str = "cosine",
    show_values: bool | None = None,
    colour_order: list[str] | None = None,
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
        Print values in cells; by default when there are at most ``MAX_ANNOTATED`` terms.
    colour_order : list of str, optional
        Group order that fixes the group colours (e.g. the level view's classes).
    """
    n = len(terms)
    show_values = n <= MAX_ANNOTATED if show_values is None else show_values
    ticks = _tick_labels(terms, groups, colour_order)
    heatmap = go.Heatmap(
        # Positions, not labels, on the axes: two long terms cut to the same label stay apart.
        z=matrix, x=list(range(n)), y=list(range(n)), zmin=zrange[0], zmax=zrange[1],
        colorscale=colorscale or theme()["sequential"],
        colorbar={"title": {"text": colorbar_title, "side": "right"}, "thickness": 14},
        customdata=np.dstack(np.meshgrid(np.asarray(terms, dtype=object), np.asarray(terms, dtype=object))),
        hovertemplate="%{customdata[1]}<br>%{customdata[0]}<br><b>%{z:.3f}</b><extra></extra>",
        xgap=1, ygap=1,
    )
    if show_values:
        heatmap.update(texttemplate="%{z:.2f}", textfont={"size": 11 if n <= 15 else 9})
    fig = go.Figure(heatmap)
    fig.update_yaxes(autorange="reversed", tickfont={"size": 12}, automargin=True, showgrid=False,
                     tickmode="array", tickvals=list(range(n)), ticktext=ticks, zeroline=False)
    # Column labels on top (as in the papers' matrices), so the caption below stays clear.
    # The top margin is sized from the longest label (rotated 45°) so the title sits above it.
    longest = max((len(_short(term)) for term in terms), default=0)
    top = 70 + int(0.72 * 7.5 * longest)
    fig.update_xaxes(tickangle=-45, tickfont={"size": 12}, automargin=False, showgrid=False, side="top",
                     tickmode="array", tickvals=list(range(n)), ticktext=ticks, zeroline=False)
    side = int(min(1200, max(440, 26 * n + top + 80)))
    apply_theme(fig, title, caption, height=side)
    fig.update_layout(margin={"t": top, "b": 50}, title={"y": 1.0, "yref": "container", "yanchor": "top",
                                                         "pad": {"t": 12}})
    if caption:
        fig.layout.annotations[-1].update(y=-0.02)
    return fig


def similarity_pair_figure(comparison: SimilarityComparison, subtitle: str = "",
                           colour_order: list[str] | None = None, caption: str | None = None) -> go.Figure:
    """Baseline and compared heatmaps side by side in one figure, with one shared colour scale.

    The rows (terms) are labelled once, on the left; both panels use one colour axis, so a
    colour means the same cosine in both.

    Parameters
    ----------
    comparison : SimilarityComparison
    subtitle : str
        Appended to the title (where the terms came from, source and level).
    colour_order : list of str, optional
        Fixes group colours (see :func:`similarity_heatmap`).
    caption : str, optional
        Parameter line; by default the number of terms, the order and the colour range.
    """
    low, high = shared_range(comparison.a, comparison.b)
    n = len(comparison.terms)
    ticks = _tick_labels(comparison.terms, comparison.groups, colour_order)
    terms = np.asarray(comparison.terms, dtype=object)
    customdata = np.dstack(np.meshgrid(terms, terms))
    fig = make_subplots(rows=1, cols=2, shared_yaxes=True, horizontal_spacing=0.02,
                        subplot_titles=(f"<b>{_short(comparison.model_a, 40)}</b> (baseline)",
                                        f"<b>{_short(comparison.model_b, 40)}</b>"))
    for col, matrix in ((1, comparison.a), (2, comparison.b)):
        heatmap = go.Heatmap(z=matrix, x=list(range(n)), y=list(range(n)), coloraxis="coloraxis",
                             customdata=customdata, xgap=1, ygap=1,
                             hovertemplate="%{customdata[1]}<br>%{customdata[0]}<br><b>%{z:.3f}</b><extra></extra>")
        if n <= MAX_ANNOTATED:
            heatmap.update(texttemplate="%{z:.2f}", textfont={"size": 10 if n <= 15 else 8})
        fig.add_trace(heatmap, row=1, col=col)
    longest = max((len(_short(term)) for term in comparison.terms), default=0)
    label_height = int(0.72 * 7.5 * longest) + 10
    fig.update_xaxes(tickangle=-45, tickfont={"size": 12}, showgrid=False, side="top", tickmode="array",
                     tickvals=list(range(n)), ticktext=ticks, zeroline=False)
    fig.update_yaxes(autorange="reversed", tickfont={"size": 12}, automargin=True, showgrid=False, tickmode="array",
                     tickvals=list(range(n)), ticktext=ticks, zeroline=False)
    suffix = f" · {subtitle}" if subtitle else ""
    caption = caption or f"{n} terms · ordered by {comparison.order} · one colour scale for both, {low:g} to {high:g}"
    top = 70 + label_height + 28
    apply_theme(fig, f"Cosine similarity · {comparison.model_a} vs {comparison.model_b}{suffix}", caption,
                height=int(min(1300, max(420, 30 * n) + top + 70)))
    fig.update_layout(
        coloraxis={"colorscale": theme()["sequential"], "cmin": low, "cmax": high,
                   "colorbar": {"title": {"text": "cosine", "side": "right"}, "thickness": 14}},
        margin={"t": top, "b": 50, "l": 20},
        title={"y": 1.0, "yref": "container", "yanchor": "top", "pad": {"t": 12}},
    )
    # Panel titles above the rotated column labels, not on top of them.
    for annotation in fig.layout.annotations[:2]:
        annotation.update(yanchor="bottom", yshift=label_height)
    if caption:
        fig.layout.annotations[-1].update(y=-0.02)
    return fig


def similarity_figures(comparison: SimilarityComparison, subtitle: str = "",
                       colour_order: list[str] | None = None) -> dict[str, go.Figure]:
    """The figures of a comparison: the baseline/compared ``pair`` (one shared scale) and the ``difference``.

    Parameters
    ----------
    comparison : SimilarityComparison
    subtitle : str
        Appended to each title (where the terms came from, source and level).
    colour_order : list of str, optional
        Fixes group colours (see :func:`similarity_heatmap`).

    Returns
    -------
    dict
        ``{"pair": fig, "difference": fig}``.
    """
    n = len(comparison.terms)
    suffix = f" · {subtitle}" if subtitle else ""
    diff = comparison.difference
    bound = float(max(0.05, np.ceil(np.abs(diff).max() * 20) / 20))
    fig_d = similarity_heatmap(
        diff, comparison.terms, comparison.groups,
        f"Difference · {comparison.model_b} − {comparison.model_a}{suffix}",
        f"{n} terms · red = more similar under {comparison.model_b}, blue = under {comparison.model_a} · ±{bound:g}",
        (-bound, bound), colorscale=theme()["diverging"] + "_r", colorbar_title="Δ cosine", colour_order=colour_order,
    )
    return {"pair": similarity_pair_figure(comparison, subtitle, colour_order), "difference": fig_d}
