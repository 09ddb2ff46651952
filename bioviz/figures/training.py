"""Figures of a training run: loss and validation curves, and baseline vs trained scores.

Baseline and trained (compared) models take the theme's one colour pair
(:func:`bioviz.figures.theme.pair_colours`) and scores show three decimals, as on the
rest of the Train page.

Both read plain data (the trainer's progress events, the metrics of ``run.json``) so they
work for a job still running as well as for a finished run.
"""

from __future__ import annotations

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from bioviz.figures.theme import apply_theme, pair_colours, theme


def _number(value) -> bool:
    """A finite number (not a boolean, not NaN)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value == value


def training_curves(events: list[dict], title: str, caption: str | None = None) -> go.Figure:
    """Losses per epoch (left) and the validation class-retrieval mAP against the base model's (right).

    The right panel is the figure users compare runs by: the trained head's validation mAP
    per epoch in the theme's *compared* colour, the base model's validation mAP (the ``start``
    event's ``baseline_val_mAP``) as a line in its *baseline* colour (:func:`pair_colours`).
    A run that stops on the validation loss draws that loss on the left panel, beside the
    training losses; the best epoch (by the stopping criterion) is starred on its curve.
    When the events carry ``val_retention`` (head encoders), the right panel also shows it:
    Spearman's rho between base and trained similarities of validation names across classes.

    Parameters
    ----------
    events : list of dict
        Progress events (``{"event": "epoch", "epoch": i, "losses": {...}, "val_metric": x,
        "val_name": "mAP", "val_mAP": m}``, a ``start`` event); other events are ignored.
    title : str
        What is trained (run, encoder, source, level).
    caption : str, optional
        One line of parameters.
    """
    epochs = [e for e in events if e.get("event") == "epoch" and "epoch" in e]
    start = next((e for e in events if e.get("event") == "start"), {})
    val_name = next((e["val_name"] for e in reversed(epochs) if e.get("val_name")), "mAP")
    on_loss = val_name.lower() == "loss"
    baseline_colour, compared_colour = pair_colours()
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.12,
                        subplot_titles=("Training and validation loss" if on_loss else "Training loss",
                                        "Validation class-retrieval mAP"))
    palette = theme()["qualitative"]
    names: list[str] = []
    for e in epochs:
        names += [k for k in (e.get("losses") or {}) if k not in names]
    for i, name in enumerate(names):
        points = [(e["epoch"], e["losses"][name]) for e in epochs if name in (e.get("losses") or {})]
        fig.add_trace(go.Scatter(x=[p[0] for p in points], y=[p[1] for p in points], mode="lines+markers",
                                 name=name, line={"color": palette[i % len(palette)]},
                                 hovertemplate=f"{name}<br>epoch %{{x}}<br>%{{y:.3f}}<extra></extra>"), row=1, col=1)
    criterion = [(e["epoch"], e["val_metric"]) for e in epochs if _number(e.get("val_metric"))]
    if on_loss:
        fig.add_trace(go.Scatter(x=[p[0] for p in criterion], y=[p[1] for p in criterion], mode="lines+markers",
                                 name="validation loss", line={"color": compared_colour, "dash": "dot"},
                                 hovertemplate="validation loss<br>epoch %{x}<br>%{y:.3f}<extra></extra>"),
                      row=1, col=1)
    # Heads report the mAP at every epoch whatever they stop on; older events only their criterion.
    def val_map(event: dict):
        return event["val_mAP"] if "val_mAP" in event else None if on_loss else event.get("val_metric")

    maps = [(e["epoch"], value) for e in epochs if _number(value := val_map(e))]
    if maps or not on_loss:
        fig.add_trace(go.Scatter(x=[p[0] for p in maps], y=[p[1] for p in maps], mode="lines+markers",
                                 name="validation mAP", line={"color": compared_colour},
                                 hovertemplate="validation mAP<br>epoch %{x}<br>%{y:.3f}<extra></extra>"), row=1, col=2)
    base_map = start.get("baseline_val_mAP")
    if _number(base_map) and maps:
        ends = [1, max(start.get("max_epochs") or 0, maps[-1][0], 1)]
        fig.add_trace(go.Scatter(x=ends, y=[base_map, base_map], mode="lines", name="base model (validation mAP)",
                                 line={"color": baseline_colour, "dash": "dash"},
                                 hovertemplate=f"base model: validation mAP {base_map:.3f}<extra></extra>"),
                      row=1, col=2)
    # What the head keeps of the base's similarities between classes (trainer.loop records
    # it for head encoders): falling while mAP rises is the relatedness cost of training.
    kept = [(e["epoch"], e["val_retention"]) for e in epochs if _number(e.get("val_retention"))]
    if kept:
        fig.add_trace(go.Scatter(x=[p[0] for p in kept], y=[p[1] for p in kept], mode="lines+markers",
                                 name="cross-class retention", line={"color": palette[3], "dash": "dash"},
                                 hovertemplate="retention of the base's cross-class similarities (Spearman)"
                                               "<br>epoch %{x}<br>%{y:.3f}<extra></extra>"), row=1, col=2)
        fig.layout.annotations[1].text = "Validation class-retrieval mAP · cross-class retention"
    if criterion:
        best = min(criterion, key=lambda p: p[1]) if on_loss else max(criterion, key=lambda p: p[1])
        fig.add_trace(go.Scatter(x=[best[0]], y=[best[1]], mode="markers", name=f"best {val_name}",
                                 marker={"size": 12, "symbol": "star", "color": "#e4572e"},
                                 hovertemplate=f"best {val_name} %{{y:.3f}} at epoch %{{x}}<extra></extra>"),
                      row=1, col=1 if on_loss else 2)
    fig.update_xaxes(title_text="epoch")
    if not epochs:
        fig.add_annotation(text="waiting for the first epoch…", xref="paper", yref="paper", x=0.5, y=0.5,
                           showarrow=False)
    return apply_theme(fig, title, caption=caption, height=400, top=34)  # room for the panel titles


def _flatten(metrics: dict, prefix: str = "", exclude: tuple[str, ...] = ()) -> dict[str, float]:
    flat = {}
    for key, value in metrics.items():
        if key in exclude:
            continue
        if isinstance(value, dict):
            flat.update(_flatten(value, f"{prefix}{key} ", exclude))
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            flat[f"{prefix}{key}"] = float(value)
    return flat


def baseline_vs_trained(baseline: dict, trained: dict, title: str, *, caption: str | None = None,
                        labels: tuple[str, str] = ("baseline", "trained"),
                        exclude: tuple[str, ...] = ("names",)) -> go.Figure:
    """Grouped bars of the scores both models share (nested dicts are flattened).

    Parameters
    ----------
    baseline, trained : dict
        ``metric -> value`` (e.g. ``{"test": {"mAP": 0.41, "acc@1": 0.52}}``).
    title : str
        Names the two models, the run, the source and the level.
    caption : str, optional
        One line of parameters.
    labels : (str, str)
        Legend names of the two bars.
    exclude : tuple of str
        Keys that are not scores (e.g. ``names``, the number of names scored).
    """
    a, b = _flatten(baseline, exclude=exclude), _flatten(trained, exclude=exclude)
    shared = [k for k in b if k in a]
    fig = go.Figure()
    for name, values, colour in zip(labels, (a, b), pair_colours()):
        fig.add_trace(go.Bar(x=shared, y=[values[k] for k in shared], name=name, marker_color=colour,
                             text=[f"{values[k]:.3f}" for k in shared], textposition="outside",
                             hovertemplate=f"{name}<br>%{{x}}: %{{y:.3f}}<extra></extra>"))
    fig.update_layout(barmode="group")
    fig.update_yaxes(title_text="score")
    if not shared:
        fig.add_annotation(text="no scores in common", xref="paper", yref="paper", x=0.5, y=0.5, showarrow=False)
    return apply_theme(fig, title, caption=caption, height=400)


def base_weight_choice(record: dict, title: str, caption: str | None = None) -> go.Figure:
    """Validation mAP and cross-class retention of every base weight tried, the choice marked.

    Parameters
    ----------
    record : dict
        A run's ``metrics.base_mix`` (:func:`trainer.base_mix.choose_base_weight`):
        ``candidates`` (``weight``, ``val_mAP``, ``val_retention``), ``weight``,
        ``min_retention``.
    title : str
        Names the run, its base, the source and the level.
    caption : str, optional
        One line of parameters.
    """
    candidates = [c for c in record.get("candidates") or [] if c.get("weight") is not None]
    palette = theme()["qualitative"]
    fig = go.Figure()
    x = [c["weight"] for c in candidates]
    for key, name, colour, dash in (("val_mAP", "validation mAP", palette[0], None),
                                    ("val_retention", "cross-class retention", "#7b8794", "dash")):
        fig.add_trace(go.Scatter(x=x, y=[c.get(key) for c in candidates], mode="lines+markers", name=name,
                                 line={"color": colour, "dash": dash},
                                 hovertemplate=f"{name}<br>base weight %{{x:g}}<br>%{{y:.3f}}<extra></extra>"))
    threshold = record.get("min_retention")
    if threshold is not None and len(candidates) > 1:
        fig.add_hline(y=threshold, line={"color": "#7b8794", "width": 1, "dash": "dot"},
                      annotation_text=f"min retention {threshold:g}", annotation_position="bottom right")
    chosen = next((c for c in candidates if c["weight"] == record.get("weight")), None)
    if chosen is not None:
        fig.add_trace(go.Scatter(x=[chosen["weight"]], y=[chosen.get("val_mAP")], mode="markers",
                                 name=f"chosen: w = {chosen['weight']:g}",
                                 marker={"size": 13, "symbol": "star", "color": "#e4572e"},
                                 hovertemplate="chosen base weight %{x:g}<br>validation mAP %{y:.3f}<extra></extra>"))
    fig.update_xaxes(title_text="base weight w in (1 − w)·f(u)/s + w·u", range=[-0.03, 1.03])
    fig.update_yaxes(title_text="validation figure")
    if not candidates:
        fig.add_annotation(text="no validation names: the head is kept as trained", xref="paper", yref="paper",
                           x=0.5, y=0.5, showarrow=False)
    return apply_theme(fig, title, caption=caption, height=380)
