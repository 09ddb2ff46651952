"""Choosing how much of the input a trained head keeps: ``g(u) = (1 - w) f(u) / s + w u``.

The papers' heads are trained on a few hundred names to pull classes together. With a
strong base model (minilm) they also scramble the base's order *between* classes, which is
what relatedness benchmarks measure (docs/training.md, "Keeping the base"). Mixing the
input back in (:class:`trainer.encoders.BaseMix`) restores that order at some cost in class
separation. The weight ``w`` is chosen after training, on the validation split only: the
best validation mAP among the weights whose validation retention
(:class:`bioviz.evaluation.metrics.CrossClassRetention`) reaches ``min_retention``. Benchmark pairs are
never seen.
"""

from __future__ import annotations

import math

import numpy as np

from bioviz.evaluation.metrics import class_retrieval_map
from bioviz.space import l2_normalise

# The weights tried by the automatic choice (0 is the head itself, 1 the input itself).
BASE_WEIGHTS = tuple(round(0.1 * i, 1) for i in range(11))


def head_scale(head_outputs: np.ndarray) -> float:
    """``s``: the mean norm of the head's outputs (on the training names), 1 when degenerate."""
    norms = np.linalg.norm(np.asarray(head_outputs, dtype=np.float64), axis=1)
    scale = float(norms.mean()) if len(norms) else 1.0
    return scale if math.isfinite(scale) and scale > 1e-8 else 1.0


def mix(head_outputs: np.ndarray, inputs: np.ndarray, weight: float, scale: float) -> np.ndarray:
    """Unit rows of ``(1 - w) f(u) / s + w u``."""
    return l2_normalise((1.0 - weight) / scale * head_outputs + weight * inputs)


def choose_base_weight(head_outputs: np.ndarray, inputs: np.ndarray, labels: np.ndarray, *, n_train: int,
                       retention, min_retention: float, weight: float | None = None,
                       weights=BASE_WEIGHTS, max_queries: int = 2000, progress=None) -> dict:
    """Pick ``w`` on the validation split, or evaluate a fixed one.

    Parameters
    ----------
    head_outputs, inputs : array (n_train + n_val, d)
        ``f(u)`` and ``u`` of the training names followed by the validation names.
    labels : array (n_train + n_val,)
        Their classes.
    n_train : int
        How many of the rows are training names (the references of the validation mAP).
    retention : callable
        Validation vectors -> retention (a :class:`bioviz.evaluation.metrics.CrossClassRetention` built
        on the validation names' input vectors).
    min_retention : float
        The retention a weight must keep to be chosen.
    weight : float, optional
        A fixed ``w``: evaluated, not chosen.
    weights : sequence of float
        The candidates of the automatic choice.
    max_queries : int
        Above this many validation names, the validation mAP of each candidate is computed
        on a fixed random sample of this many (every training name stays a reference): a
        level trained on all its names has tens of thousands, and ranking each against every
        training name eleven times would take minutes.
    progress : callable, optional
        ``progress(done, total)`` after each candidate.

    Returns
    -------
    dict
        ``weight``, ``scale``, ``chosen_by`` (``"validation"``, ``"fixed"``, or why the
        head was kept as trained: no validation names, or too few to measure retention),
        ``min_retention`` and ``candidates`` (per weight: validation mAP and retention).
    """
    scale = head_scale(head_outputs[:n_train])
    n_val = len(inputs) - n_train
    queries = np.arange(n_val)
    if n_val > max_queries:
        queries = np.sort(np.random.default_rng(0).choice(n_val, size=max_queries, replace=False))
    tried = ([weight] if weight is not None else list(weights)) if n_val > 0 else []
    candidates = []
    for done, w in enumerate(tried, start=1):
        vectors = mix(head_outputs, inputs, w, scale)
        val = vectors[n_train:]
        val_map = class_retrieval_map(val[queries], labels[n_train:][queries], vectors[:n_train], labels[:n_train])
        candidates.append({"weight": float(w), "val_mAP": _finite(val_map), "val_retention": _finite(retention(val))})
        if progress is not None:
            progress(done, len(tried))
    chosen, how = (float(weight), "fixed") if weight is not None else decide(candidates, min_retention)
    return {"weight": chosen, "scale": scale, "chosen_by": how, "min_retention": float(min_retention),
            "candidates": candidates}


def decide(candidates: list[dict], min_retention: float) -> tuple[float, str]:
    """``(weight, how it was chosen)`` from the candidates' validation figures.

    The best validation mAP among weights keeping ``min_retention`` (ties go to the larger
    weight); the largest weight tried when none keeps it; the head itself (``0``) when there
    is nothing to choose on.
    """
    if not candidates:
        return 0.0, "no validation names"  # nothing to choose on: the head as the papers define it
    if all(c["val_retention"] is None for c in candidates):
        # Fewer than three cross-class validation pairs: nothing says what the head loses, and
        # falling back to the input would throw the training away.
        return 0.0, "retention not measurable (too few validation names)"
    keeping = [c for c in candidates if c["val_retention"] is not None and c["val_retention"] >= min_retention
               and c["val_mAP"] is not None]
    if not keeping:
        return max(c["weight"] for c in candidates), "validation (no weight keeps the retention: the largest)"
    return max(keeping, key=lambda c: (c["val_mAP"], c["weight"]))["weight"], "validation"


RETENTION_GRID = 0.05  # the derived min_retention is rounded to this step


def knee(candidates: list[dict]) -> dict | None:
    """The candidate weight at the knee of one run's validation trade-off.

    Over the weights of one trained head, validation mAP falls and validation retention rises
    as ``w`` grows. Each figure is rescaled to [0, 1] over the candidates (0 the worst weight,
    1 the best), and the knee is the weight with the largest sum: the point of the curve
    closest, in that scale, to a weight that would lose neither (ties: the larger weight).
    Only validation figures enter; None when fewer than two candidates carry both.
    """
    usable = [c for c in candidates if c.get("val_mAP") is not None and c.get("val_retention") is not None]
    if len(usable) < 2:
        return None

    def scaled(key: str) -> dict:
        values = [c[key] for c in usable]
        low, high = min(values), max(values)
        return {id(c): (c[key] - low) / (high - low) if high > low else 1.0 for c in usable}

    gain, kept = scaled("val_mAP"), scaled("val_retention")
    return max(usable, key=lambda c: (round(gain[id(c)] + kept[id(c)], 9), c["weight"]))


def derive_min_retention(runs: list[list[dict]], grid: float = RETENTION_GRID) -> dict:
    """The ``min_retention`` a validation-only rule gives, from the candidates of several runs.

    Rule: per run (a head type, a level, a split seed), the validation retention at its knee
    (:func:`knee`); the threshold is the median of those retentions over the runs, rounded to
    ``grid``. Nothing but each run's own validation split is seen: no test name, no benchmark.

    Parameters
    ----------
    runs : list of list of dict
        Each run's ``candidates`` (``weight``, ``val_mAP``, ``val_retention``), as
        :func:`choose_base_weight` records them.
    grid : float

    Returns
    -------
    dict
        ``min_retention`` (None when no run has a knee), ``knees`` (per run: weight and
        retention at its knee, or None) and ``median`` (unrounded).
    """
    knees = [knee(candidates) for candidates in runs]
    retentions = sorted(k["val_retention"] for k in knees if k is not None)
    if not retentions:
        return {"min_retention": None, "median": None, "knees": [None] * len(runs)}
    median = float(np.median(retentions))
    return {"min_retention": round(round(median / grid) * grid, 4), "median": median,
            "knees": [None if k is None else {"weight": k["weight"], "val_retention": k["val_retention"]}
                      for k in knees]}


def _finite(value) -> float | None:
    value = float(value)
    return value if math.isfinite(value) else None


def describe(record: dict | None) -> str:
    """One line for a run's figures, e.g. ``"base weight 0.4 (chosen on validation, retention >= 0.9)"``."""
    if not record:
        return ""
    text = f"base weight {record['weight']:g}"
    if record.get("chosen_by") == "validation":
        return text + f" (chosen on validation, retention ≥ {record['min_retention']:g})"
    return text + f" ({record.get('chosen_by', 'fixed')})"
