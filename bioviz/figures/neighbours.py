"""Ranking tables of nearest names, laid out like the papers' comparison tables.

One column group per model, one row per rank; cells of names in the query's synonym set
(same concept) and in its class are shaded, as the papers underline matching names
(fewshot-biomedical-names Table 4, conceptual-grounding Tables 6-7).
"""

from __future__ import annotations

import plotly.graph_objects as go

from bioviz.figures.theme import apply_theme, theme

SAME_CONCEPT = "#b7dfb0"  # the query's synonym set: strongest mark
SAME_CLASS = "#dbe9f6"    # the query's class
OTHER = "#ffffff"


def row_colour(row: dict) -> str:
    """Fill of a ranking row: same concept, else same class, else none."""
    if row.get("same_concept"):
        return SAME_CONCEPT
    if row.get("same_class"):
        return SAME_CLASS
    return OTHER


def _change(row: dict) -> str:
    change = row.get("rank_change")
    if change is None:
        return ""
    if change == 0:
        return "="
    return f"{'▲' if change > 0 else '▼'}{abs(change)}"


def neighbour_table_figure(query: str, rankings: list[tuple[str, list[dict]]], level: str, k: int,
                           query_class: str | None = None) -> go.Figure:
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
        Readable class of the query, for the caption.

    Returns
    -------
    plotly.graph_objects.Figure
    """
    t = theme()
    n_rows = max((len(rows) for _, rows in rankings), default=0)
    header, columns, fills, widths = ["Rank"], [list(range(1, n_rows + 1))], [[OTHER] * n_rows], [40]
    for label, rows in rankings:
        padded = rows + [{}] * (n_rows - len(rows))
        colours = [row_colour(r) for r in padded]
        header += [f"<b>{label}</b>", "Code", "Cosine"]
        columns += [[r.get("name", "") for r in padded], [r.get("concept_id") or "" for r in padded],
                    [f"{r['score']:.3f}" if "score" in r else "" for r in padded]]
        fills += [colours, colours, colours]
        widths += [260, 80, 60]
        if len(rankings) > 1:
            header.append("Δ rank")
            columns.append([_change(r) for r in padded])
            fills.append(colours)
            widths.append(55)
    fig = go.Figure(go.Table(
        columnwidth=widths,
        header={"values": header, "fill_color": "#eef1f4", "align": "left",
                "font": {"family": t["font_family"], "size": t["font_size"], "color": t["text"]}},
        cells={"values": columns, "fill_color": fills, "align": "left", "height": 26,
               "font": {"family": t["font_family"], "size": t["font_size"] - 1, "color": t["text"]}},
    ))
    models = " vs ".join(label for label, _ in rankings)
    caption = f"k={k}; green: same concept (synonym) as the query; blue: same class"
    if query_class:
        caption += f" ({query_class})"
    if len(rankings) > 1:
        caption += "; Δ rank: rank in the other model minus rank here (▲ = ranked higher here)"
    apply_theme(fig, f"Nearest names to “{query}” · {models} · {level}", caption=caption,
                height=110 + 28 * max(n_rows, 1) + 40)
    fig.update_layout(margin={"l": 20, "r": 20, "t": 60, "b": 50})
    return fig
