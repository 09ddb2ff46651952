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


def choose_base_weight(head_outputs: np.ndarray, inputs: np.ndarray, labels: np.ndarray, n_train: int,
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


def _finite(value) -> float | None:
    value = float(value)
    return value if math.isfinite(value) else None


def describe(record: dict | None) -> str:
    """One line for a run's figures, e.g. ``"base weight 0.4 (chosen on validation, retention >= 0.85)"``."""
    if not record:
        return ""
    text = f"base weight {record['weight']:g}"
    if record.get("chosen_by") == "validation":
        return text + f" (chosen on validation, retention ≥ {record['min_retention']:g})"
    return text + f" ({record.get('chosen_by', 'fixed')})"
