"""Ranking tables of nearest names, laid out like the papers' comparison tables.

One column group per model, one row per rank; cells of names in the query's synonym set
(same concept) and in its class are shaded, as the papers underline matching names
(fewshot-biomedical-names Table 4, conceptual-grounding Tables 6-7), and a legend under the
table says what each shade means.

The table is sized from its content: each column is as wide as its widest entry (codes and
numbers never wrap), names wrap between words to the width left over, every row is as tall
as its longest name, and the figure as tall as all rows, so no row, header or code is cut
and nothing scrolls inside the image.
"""

from __future__ import annotations

import plotly.graph_objects as go

from bioviz.figures.text import line_height, text_width, wrap, wrap_html
from bioviz.figures.theme import EDGE, apply_theme, theme

SAME_CONCEPT = "#b7dfb0"  # the query's synonym set: strongest mark
SAME_CLASS = "#dbe9f6"    # the query's class
OTHER = "#ffffff"
HEADER_FILL = "#eef1f4"
CELL_PAD = 8              # plotly's padding between a table cell's border and its text (each side)
ROW_PAD = 14              # a row is its lines plus this (measured in chromium: 1 line 31 px, 4 lines 82 px)
MIN_ROW = 28              # plotly's default cell height
NAME_MIN_PX, NAME_MAX_PX = 170, 420


def row_colour(row: dict) -> str:
    """Fill of a ranking row: same concept, else same class, else none."""
    if row.get("same_concept"):
        return SAME_CONCEPT
    if row.get("same_class"):
        return SAME_CLASS
    return OTHER


def rank_change_text(row: dict) -> str:
    """A row's rank change as the tables show it: ``▲3`` (ranked 3 higher here), ``▼2``, ``=`` or empty.

    >>> [rank_change_text(r) for r in ({"rank_change": 3}, {"rank_change": -2}, {"rank_change": 0}, {})]
    ['▲3', '▼2', '=', '']
    """
    change = row.get("rank_change")
    if change is None:
        return ""
    if change == 0:
        return "="
    return f"{'▲' if change > 0 else '▼'}{abs(change)}"


def _column_px(texts, size: float, bold_first: bool = True) -> float:
    """Width of a column that holds ``texts`` on one line each (the first is the bold header)."""
    widths = [text_width(str(x), size + (1 if i == 0 and bold_first else 0), bold=i == 0 and bold_first)
              for i, x in enumerate(texts)]
    return max(widths, default=0.0) + 2 * CELL_PAD + 4


def _rows_px(lines: list[int], size: float) -> int:
    """Height of a row whose tallest cell holds ``lines`` lines."""
    return int(max(MIN_ROW, max(lines, default=1) * line_height(size) + ROW_PAD) + 1)


def neighbour_table_figure(query: str, rankings: list[tuple[str, list[dict]]], level: str, k: int, *,
                           query_class: str | None = None, width: int | None = None,
                           score_label: str = "Cosine") -> go.Figure:
    """A clean, image-ready table of one or two neighbour rankings side by side.

    Parameters
    ----------
    query : str
        The query text (in the title).
    rankings : list of (model label, rows)
        Rows from :func:`bioviz.search.neighbours.rank_neighbours`.
    level : str
        The level view's title (source and level), for the title.
    k : int
        Number of neighbours asked for (in the caption).
    query_class : str, optional
        Readable class of the query, for the legend of the class shading.
    width : int, optional
        Width in pixels the table is laid out for (the theme's ``export_width`` by default);
        the figure's own width is at most this, less for one narrow ranking. Shown wider, the
        columns stretch; the page should show it at its own width (``width="content"``).

    Returns
    -------
    plotly.graph_objects.Figure
    """
    t = theme()
    size = t["font_size"] - 1
    width = width or t["export_width"]
    n_rows = max((len(rows) for _, rows in rankings), default=0)
    compared = len(rankings) > 1
    padded_rankings = [(label, rows + [{}] * (n_rows - len(rows))) for label, rows in rankings]

    rank_px = _column_px(["Rank", *range(1, n_rows + 1)], size)
    fixed = []  # per model: code, cosine, (Δ rank) column widths
    for _, rows in padded_rankings:
        code = _column_px(["Code", *(r.get("concept_id") or "" for r in rows)], size)
        cosine = _column_px([score_label, "0.000"], size)
        change = _column_px(["Δ rank", *(rank_change_text(r) for r in rows)], size) if compared else 0.0
        fixed.append((code, cosine, change))
    free = width - 2 * EDGE - rank_px - sum(sum(f) for f in fixed)
    name_px = min(NAME_MAX_PX, max(NAME_MIN_PX, free / max(len(rankings), 1)))
    wrap_px = name_px - 2 * CELL_PAD - 4

    header, columns, fills, widths = ["<b>Rank</b>"], [list(range(1, n_rows + 1))], [[OTHER] * n_rows], [rank_px]
    header_lines, row_lines = [1], [1] * n_rows
    for (label, rows), (code_px, cosine_px, change_px) in zip(padded_rankings, fixed):
        colours = [row_colour(r) for r in rows]
        names = [wrap(r.get("name", ""), wrap_px, size) for r in rows]
        row_lines = [max(a, len(b)) for a, b in zip(row_lines, names)]
        label_lines = wrap(label, wrap_px, size + 1, bold=True)
        header_lines.append(len(label_lines))
        header += ["<b>" + "<br>".join(label_lines) + "</b>", "<b>Code</b>", f"<b>{score_label}</b>"]
        columns += [["<br>".join(lines) for lines in names], [r.get("concept_id") or "" for r in rows],
                    [f"{r['score']:.3f}" if "score" in r else "" for r in rows]]
        fills += [colours, colours, colours]
        widths += [name_px, code_px, cosine_px]
        if compared:
            header.append("<b>Δ rank</b>")
            columns.append([rank_change_text(r) for r in rows])
            fills.append(colours)
            widths.append(change_px)
    table_px = _rows_px(header_lines, size + 1) + sum(_rows_px([n], size) for n in row_lines) + 4
    fig_width = int(min(width, sum(widths) + 2 * EDGE))

    fig = go.Figure(go.Table(
        columnwidth=widths,
        header={"values": header, "fill_color": HEADER_FILL, "align": "left", "height": MIN_ROW,
                "font": {"family": t["font_family"], "size": size + 1, "color": t["text"]}},
        cells={"values": columns, "fill_color": fills, "align": "left", "height": MIN_ROW,
               "font": {"family": t["font_family"], "size": size, "color": t["text"]}},
    ))
    shown = [r for _, rows in rankings for r in rows]
    chips_px = _legend(fig, any(r.get("same_concept") for r in shown), any(r.get("same_class") for r in shown),
                       query_class, fig_width)
    models = " vs ".join(label for label, _ in rankings)
    caption = f"k = {k}"
    if compared:
        caption += " · Δ rank: rank under the other model minus rank here (▲ = ranked higher here)"
    apply_theme(fig, f"Nearest names to “{query}” · {models} · {level}", caption=caption, height=table_px,
                width=fig_width, margin={"l": EDGE, "r": EDGE, "b": 0}, top=12, caption_offset=chips_px)
    # The plot area is exactly the table; title, legend and caption are in the margins.
    fig.update_layout(width=fig_width, height=int(table_px + fig.layout.margin.t + fig.layout.margin.b))
    return fig


def _legend(fig: go.Figure, synonyms: bool, same_class: bool, query_class: str | None, width: int) -> int:
    """Shaded chips under the table naming the highlights it shows; returns the pixels they take."""
    t = theme()
    size = t["caption_size"]
    chips = []
    if synonyms:
        chips.append((SAME_CONCEPT, "same concept (a synonym of the query)"))
    if same_class:
        chips.append((SAME_CLASS, f"same class as the query: {query_class}" if query_class
                      else "same class as the query"))
    if not chips:
        return 8
    x, y, row_px = 0.0, 8.0, line_height(size) + 10
    free = width - 2 * EDGE
    for colour, label in chips:
        text = wrap_html(label, free - 12, size)
        chip_px = text_width(text, size) + 14
        if x > 0 and x + chip_px > free:
            x, y = 0.0, y + row_px
        fig.add_annotation(text=text, xref="paper", yref="paper", x=0, y=0, xshift=x, yshift=-y, xanchor="left",
                           yanchor="top", align="left", showarrow=False, bgcolor=colour, borderpad=4,
                           bordercolor="#c3c9d0", borderwidth=1, font={"size": size, "color": t["text"]})
        x += chip_px + 10
        y += text.count("<br>") * line_height(size)
    return int(y + row_px + 4)
