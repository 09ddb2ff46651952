"""Differences between two models on the same items, with paired bootstrap intervals.

Two models evaluated on the same data (the same queries, pairs or benchmark pairs) are
compared item by item: every bootstrap resample draws one set of item indices and
recomputes *both* models' figures on it, so the interval of the difference reflects how
much the models disagree per item, not the (much larger) spread of each figure alone.

- ranking tasks (mAP, MRR, Acc@1): per-query AP or reciprocal rank of both models,
  resampled with the same query indices;
- relatedness benchmarks (Spearman): pairs resampled, both Spearmans recomputed on the
  pairs both models cover;
- hierarchy AUC: pairs resampled within each distance (as the AUC's own interval), both
  AUCs recomputed.

A result computed before per-item values were kept (:mod:`bioviz.evaluation.run`) gives
the difference without an interval (``ci`` None).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from bioviz.errors import EvaluationError
from bioviz.evaluation import metrics
from bioviz.evaluation.result import EvalResult
from bioviz.models.model_spec import ModelSpec

# Resamples per chunk are chosen so one chunk's index matrix stays near this many entries.
_CHUNK_ENTRIES = 4_000_000
LEVEL = 0.95


@dataclass(frozen=True)
class Difference:
    """One model's figure minus the baseline's, on the same items.

    Attributes
    ----------
    model, baseline : str
        Readable labels.
    task, metric : str
        The result's task and metric keys.
    delta : float or None
        ``model - baseline``; None when either figure is missing.
    ci : tuple of two floats, or None
        Paired 95% bootstrap interval of ``delta``; None without per-item values or resamples.
    n : int
        Items both figures were computed on (0 when unknown).
    """

    model: str
    baseline: str
    task: str
    metric: str
    delta: float | None
    ci: tuple[float, float] | None
    n: int

    @property
    def excludes_zero(self) -> bool:
        """True when the interval lies entirely above or below 0."""
        return self.ci is not None and (self.ci[0] > 0 or self.ci[1] < 0)


def _percentiles(values: np.ndarray) -> tuple[float, float]:
    tail = (1 - LEVEL) / 2 * 100
    low, high = np.percentile(values, [tail, 100 - tail])
    return float(low), float(high)


def _index_chunks(n_items: int, n_boot: int, seed: int):
    """Bootstrap index matrices ``(chunk, n_items)``, the same for every caller with one seed."""
    rng = np.random.default_rng(seed)
    size = max(1, _CHUNK_ENTRIES // max(n_items, 1))
    for start in range(0, n_boot, size):
        yield rng.integers(0, n_items, size=(min(size, n_boot - start), n_items))


def paired_mean_delta(baseline, model, *, n_boot: int = 1000, seed: int = 0) -> tuple[float, tuple | None, int]:
    """Difference of two means over the same items, with a paired bootstrap interval.

    Parameters
    ----------
    baseline, model : array (n,)
        Per-item values (AP, reciprocal rank, a hit) of the same items; NaN where an item
        was not scored (it is left out of both).
    n_boot : int
        Resamples (0: no interval).
    seed : int

    Returns
    -------
    (delta, ci, n)
        ``mean(model) - mean(baseline)``, its interval (None without resamples or items),
        and the number of items.

    Examples
    --------
    >>> paired_mean_delta([0.5, 1.0, 0.0], [0.5, 1.0, 0.0], n_boot=100)
    (0.0, (0.0, 0.0), 3)
    """
    a, b = np.asarray(baseline, dtype=float), np.asarray(model, dtype=float)
    if a.shape != b.shape:
        raise EvaluationError(f"paired values of different lengths ({len(a)} and {len(b)}): not the same items")
    keep = ~(np.isnan(a) | np.isnan(b))
    diff = b[keep] - a[keep]
    if not len(diff):
        return float("nan"), None, 0
    delta = float(diff.mean())
    if n_boot <= 0:
        return delta, None, len(diff)
    means = np.concatenate([diff[rows].mean(axis=1) for rows in _index_chunks(len(diff), n_boot, seed)])
    return delta, _percentiles(means), len(diff)


def paired_spearman_delta(baseline_cosines, model_cosines, human, *, n_boot: int = 1000,
                          seed: int = 0) -> tuple[float, tuple | None, int]:
    """Difference of two Spearman correlations with the same human scores, pairs resampled jointly.

    NaN cosines (a pair a model does not cover) leave the pair out for both models, so the
    delta is on the pairs both cover (the figures shown may each cover more).
    """
    a, b = np.asarray(baseline_cosines, dtype=float), np.asarray(model_cosines, dtype=float)
    h = np.asarray(human, dtype=float)
    if not (a.shape == b.shape == h.shape):
        raise EvaluationError("paired benchmark values of different lengths: not the same pairs")
    keep = ~(np.isnan(a) | np.isnan(b) | np.isnan(h))
    a, b, h = a[keep], b[keep], h[keep]
    delta = metrics.spearman(b, h) - metrics.spearman(a, h)
    if len(h) < 3 or n_boot <= 0:
        return delta, None, len(h)
    deltas = []
    for rows in _index_chunks(len(h), n_boot, seed):
        deltas.append(metrics.spearman_rows(b[rows], h[rows]) - metrics.spearman_rows(a[rows], h[rows]))
    deltas = np.concatenate(deltas)
    deltas = deltas[~np.isnan(deltas)]  # resamples where every value ties
    return delta, (_percentiles(deltas) if len(deltas) else None), len(h)


def paired_auc_delta(baseline_sims, model_sims, distances, key: str, *, n_boot: int = 1000,
                     seed: int = 0) -> tuple[float, tuple | None, int]:
    """Difference of one hierarchy AUC (``"i-j"``) or of the mean AUC (``"mean_auc"``), pairs
    resampled within each distance for both models alike."""
    a, b = np.asarray(baseline_sims, dtype=float), np.asarray(model_sims, dtype=float)
    dist = np.asarray(distances)
    if not (a.shape == b.shape == dist.shape):
        raise EvaluationError("paired hierarchy pairs of different lengths: not the same pairs")

    def pick(aucs: dict) -> np.ndarray:
        if key == "mean_auc":
            return np.mean(list(aucs.values()), axis=0)
        return aucs[key]

    delta = float(pick(metrics.auc_by_distance(b, dist, None))[0] - pick(metrics.auc_by_distance(a, dist, None))[0])
    n = len(dist)
    if n_boot <= 0:
        return delta, None, n
    rows = metrics.stratified_resamples(dist, n_boot, seed)
    boot = pick(metrics.auc_by_distance(b, dist, rows)) - pick(metrics.auc_by_distance(a, dist, rows))
    return delta, _percentiles(boot), n


def item_values(result: EvalResult, key: str) -> np.ndarray | None:
    """The per-item values a ranking figure is the mean of, or None when the result lacks them.

    ``map`` is the mean AP, ``mrr`` of 1 / rank, ``acc1`` of rank == 1 (a prefix such as
    ``test.`` names the synonym-retrieval part).
    """
    per_item = result.per_item
    prefix, name = (key.rsplit(".", 1)[0] + ".", key.rsplit(".", 1)[1]) if "." in key else ("", key)
    source = per_item.get(prefix + ("ap" if name == "map" else "rank"))
    if not isinstance(source, list) or name not in ("map", "mrr", "acc1"):
        return None
    values = np.array([np.nan if v is None else v for v in source], dtype=float)
    if name == "mrr":
        return 1.0 / values
    if name == "acc1":
        return np.where(np.isnan(values), np.nan, (values == 1).astype(float))
    return values


def _floats(values) -> np.ndarray | None:
    if not isinstance(values, list):
        return None
    return np.array([np.nan if v is None else v for v in values], dtype=float)


def difference(baseline: EvalResult, model: EvalResult, key: str, *, n_boot: int = 1000, seed: int = 0) -> Difference:
    """``model``'s figure ``key`` minus ``baseline``'s, with a paired interval when both results
    keep per-item values of the same items (same task and data), else without one."""
    a, b = baseline.metrics.get(key), model.metrics.get(key)
    delta = None if a is None or b is None else float(b) - float(a)
    out = dict(model=model.model, baseline=baseline.model, task=model.task, metric=key)
    if delta is None or baseline.data != model.data:
        return Difference(**out, delta=delta, ci=None, n=0)
    try:
        paired = _paired(baseline, model, key, n_boot, seed)
    except EvaluationError:  # different items after all (a damaged stored result): no interval
        paired = None
    if paired is None:
        return Difference(**out, delta=delta, ci=None, n=0)
    _, ci, n = paired
    # The shown delta stays the difference of the shown figures; the interval is the paired one.
    return Difference(**out, delta=delta, ci=ci, n=n)


def _paired(baseline: EvalResult, model: EvalResult, key: str, n_boot: int, seed: int):
    """(delta, ci, n) from both results' per-item values, or None when either lacks them."""
    pa, pb = baseline.per_item, model.per_item
    if key == "spearman":
        a, b, h = _floats(pa.get("cosine")), _floats(pb.get("cosine")), _floats(pb.get("human"))
        if a is None or b is None or h is None:
            return None
        return paired_spearman_delta(a, b, h, n_boot=n_boot, seed=seed)
    if key == "mean_auc" or (key.replace("-", "").isdigit() and "-" in key):
        a, b, dist = _floats(pa.get("similarity")), _floats(pb.get("similarity")), pb.get("distance")
        if a is None or b is None or not isinstance(dist, list):
            return None
        return paired_auc_delta(a, b, np.asarray(dist), key, n_boot=n_boot, seed=seed)
    a, b = item_values(baseline, key), item_values(model, key)
    if a is None or b is None:
        return None
    return paired_mean_delta(a, b, n_boot=n_boot, seed=seed)


def differences(results: list[EvalResult], baseline: ModelSpec | str, *, n_boot: int = 1000,
                seed: int = 0) -> list[Difference]:
    """Every other model's difference from ``baseline`` on every task and figure both have.

    Parameters
    ----------
    results : list of EvalResult
    baseline : ModelSpec or str
        The baseline model (its results are those of its MODEL text, ``result.model_spec``), or
        its label as the results show it (``result.model``: the Evaluation page's pick).
    n_boot, seed : int
        Paired bootstrap resamples and their seed.

    Returns
    -------
    list of Difference
        In the order of ``results``.

    Raises
    ------
    EvaluationError
        When no result is the baseline's.
    """
    if isinstance(baseline, ModelSpec):
        base = {r.task: r for r in results if r.model_spec == baseline.spec}
    else:
        base = {r.task: r for r in results if baseline in (r.model, r.model_spec)}
    if not base:
        models = ", ".join(dict.fromkeys(r.model for r in results))
        named = baseline.spec if isinstance(baseline, ModelSpec) else baseline
        raise EvaluationError(f"baseline {named!r} is not among the evaluated models ({models})")
    out = []
    for result in results:
        reference = base.get(result.task)
        if reference is None or result is reference or result.model == reference.model:
            continue
        for key in result.metrics:
            if key in reference.metrics:
                out.append(difference(reference, result, key, n_boot=n_boot, seed=seed))
    return out


def beats_all(results: list[EvalResult], model: str, task: str, key: str, *, n_boot: int = 1000,
              seed: int = 0) -> bool:
    """True when ``model``'s paired difference from every other model on ``task``/``key``
    has an interval above 0 (the paired test behind a best mark)."""
    mine = next((r for r in results if r.model == model and r.task == task), None)
    if mine is None:
        return False
    others = [r for r in results if r.task == task and r.model != model and key in r.metrics]
    for other in others:
        d = difference(other, mine, key, n_boot=n_boot, seed=seed)
        if d.ci is None or not d.ci[0] > 0:
            return False
    return bool(others)
