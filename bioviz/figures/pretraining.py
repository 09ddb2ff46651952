"""The figure of a pretraining job: training loss per step, and where an interrupted run resumed.

Reads the pretraining events a job writes to its progress file (``step`` with ``loss``,
``start`` with ``resumed_from_step``), so it works while the job runs as well as after.
"""

from __future__ import annotations

import plotly.graph_objects as go

from bioviz.figures.theme import apply_theme, pair_colours


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value == value


def pretraining_curve(events: list[dict], title: str, caption: str | None = None,
                      width: int | None = None) -> go.Figure:
    """Training loss (MultipleNegativesRankingLoss) per step, with a dotted line at each resume.

    Parameters
    ----------
    events : list of dict
        Progress events of a pretraining job; other events are ignored.
    title : str
        What is pretrained (model, sources, objectives).
    caption : str, optional
        One line of settings.
    width : int, optional
        Figure width in pixels (None: the container's).
    """
    points: dict[int, float] = {}
    for event in events:
        if event.get("event") == "step" and isinstance(event.get("step"), int) and _number(event.get("loss")):
            points[event["step"]] = float(event["loss"])  # a resumed run repeats no step: the latest value wins
    steps = sorted(points)
    fig = go.Figure(go.Scatter(x=steps, y=[points[s] for s in steps], mode="lines", name="training loss",
                               line={"color": pair_colours()[1]},
                               hovertemplate="step %{x}<br>loss %{y:.3f}<extra></extra>"))
    for event in events:
        resumed = event.get("resumed_from_step") if event.get("event") == "start" else None
        if isinstance(resumed, int) and not isinstance(resumed, bool) and resumed > 0:
            fig.add_vline(x=resumed, line={"dash": "dot", "color": pair_colours()[0]},
                          annotation_text=f"resumed at step {resumed}", annotation_position="top left")
    fig.update_xaxes(title_text="step")
    fig.update_yaxes(title_text="training loss")
    if not steps:
        fig.add_annotation(text="waiting for the first logged loss…", xref="paper", yref="paper", x=0.5, y=0.5,
                           showarrow=False)
    fig = apply_theme(fig, title, caption=caption, height=360, width=width)  # title and caption wrapped to it
    if width:
        fig.update_layout(width=width)
    return fig
