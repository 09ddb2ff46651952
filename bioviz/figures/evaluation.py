"""Figures of evaluation results: grouped bars per metric and the cross-level heatmap."""

from __future__ import annotations

import plotly.graph_objects as go

from bioviz.figures.theme import apply_theme, pair_colours, theme


def model_colours(models: list[str]) -> dict[str, str]:
    """Colour per model, in the order given: the baseline/compared pair first, as on every page.

    The first model (the baseline) gets the theme's ``baseline`` colour, the second its
    ``compared`` colour, further models the qualitative palette.

    >>> from bioviz.figures.theme import pair_colours
    >>> list(model_colours(["minilm", "run-1"]).values()) == list(pair_colours())
    True
    """
    pair = list(pair_colours())
    others = [c for c in theme()["qualitative"] if c not in pair]
    return {model: (pair[i] if i < 2 else others[(i - 2) % len(others)]) for i, model in enumerate(models)}


def metric_bars(rows: list[dict], title: str, caption: str | None = None) -> go.Figure:
    """Grouped bars: one group per metric, one bar per model, 95% intervals as error bars.

    Parameters
    ----------
    rows : list of dict
        Long-form rows (:func:`bioviz.evaluation.tables.results_table`) of one or more tasks.
    title : str
        States the models, the source and level.
    caption : str, optional
        Parameters line (split, samples).
    """
    models = list(dict.fromkeys(r["model"] for r in rows))
    groups = list(dict.fromkeys((r["task"], r["metric"]) for r in rows))
    several_tasks = len({task for task, _ in groups}) > 1
    x_labels = [f"{task}<br>{metric}" if several_tasks else metric for task, metric in groups]
    colours = model_colours(models)
    fig = go.Figure()
    for model in models:
        by_group = {(r["task"], r["metric"]): r for r in rows if r["model"] == model}
        values, plus, minus, sizes = [], [], [], []
        for group in groups:
            row = by_group.get(group, {})
            value = row.get("value")
            values.append(value)
            low, high = row.get("ci_low"), row.get("ci_high")
            plus.append(None if value is None or high is None else high - value)
            minus.append(None if value is None or low is None else value - low)
            sizes.append(row.get("n"))
        fig.add_trace(go.Bar(
            name=model, x=x_labels, y=values, marker_color=colours[model],
            error_y={"type": "data", "array": plus, "arrayminus": minus, "visible": True, "thickness": 1.2,
                     "color": "#52606d"},
            customdata=sizes,
            hovertemplate=f"{model}<br>%{{x}}: %{{y:.3f}}<br>n = %{{customdata}}<extra></extra>",
        ))
    fig.update_layout(barmode="group", bargap=0.25, legend={"orientation": "h", "y": 1.02, "yanchor": "bottom",
                                                             "x": 1, "xanchor": "right"})
    low_values = [r["value"] for r in rows if r.get("value") is not None]
    fig.update_yaxes(title_text="score", range=[min(0.0, min(low_values, default=0.0)), 1.0])
    # The legend sits above the plot, under the title; the caption under the (one- or
    # two-line) category labels.
    return apply_theme(fig, title, caption=caption, height=440, top=44,
                       caption_offset=_below_ticks(2 if several_tasks else 1))


def _below_ticks(tick_lines: int) -> int:
    """Pixels from the plot's bottom to just under ``tick_lines`` lines of category labels."""
    return 22 + 18 * tick_lines


def cross_level_heatmap(table: dict, title: str, caption: str | None = None) -> go.Figure:
    """Models x levels heatmap of semantic similarity ranking mAP (higher-level-semantics Table 4).

    Parameters
    ----------
    table : dict
        From :func:`bioviz.evaluation.run.cross_level` (``models``, ``depths``, ``map``, ``ci``).
    """
    z = [[None if v is None else float(v) for v in row] for row in table["map"]]
    text = []
    for row, ci_row in zip(z, table.get("ci") or [[None] * len(table["depths"])] * len(z)):
        cells = []
        for value, ci in zip(row, ci_row):
            if value is None:
                cells.append("–")
            elif ci and ci[0] is not None:
                cells.append(f"<b>{value:.3f}</b><br>[{ci[0]:.2f}, {ci[1]:.2f}]")
            else:
                cells.append(f"{value:.3f}")
        text.append(cells)
    fig = go.Figure(go.Heatmap(
        z=z, x=[f"level {d}" for d in table["depths"]], y=table["models"], text=text, texttemplate="%{text}",
        textfont={"size": 13},
        colorscale=theme()["sequential"], zmin=0, zmax=1, colorbar={"title": {"text": "mAP", "side": "right"}},
        hovertemplate="%{y} on %{x}<br>mAP %{z:.3f}<extra></extra>",
    ))
    fig.update_yaxes(autorange="reversed", automargin=True)
    return apply_theme(fig, title, caption=caption, height=max(280, 70 * len(table["models"]) + 170),
                       caption_offset=_below_ticks(1))
