"""trainer.base_mix: the input weight is chosen on validation figures only, or kept as given."""

from __future__ import annotations

import numpy as np
import pytest

from bioviz.evaluation.metrics import CrossClassRetention
from trainer.base_mix import BASE_WEIGHTS, choose_base_weight, derive_min_retention, head_scale, knee, mix


def _split(seed=0, per_class=6, classes=4, dim=10):
    """Inputs with some class structure and a 'head' that separates classes but scrambles the rest."""
    rng = np.random.default_rng(seed)
    labels = np.repeat(np.arange(classes), per_class)
    inputs = rng.normal(size=(classes, dim))[labels] * 0.5 + rng.normal(size=(len(labels), dim))
    inputs /= np.linalg.norm(inputs, axis=1, keepdims=True)
    outputs = 3.0 * (np.eye(classes, dim)[labels] * 2 + rng.normal(size=(len(labels), dim)))
    order = rng.permutation(len(labels))  # interleave classes between the train and validation halves
    return outputs[order], inputs[order], labels[order]


def test_auto_weight_is_the_best_validation_map_that_keeps_the_retention():
    outputs, inputs, labels = _split()
    n_train = 12
    retention = CrossClassRetention(inputs[n_train:], labels[n_train:])
    record = choose_base_weight(outputs, inputs, labels, n_train=n_train, retention=retention, min_retention=0.6)
    assert record["chosen_by"] == "validation"
    assert [c["weight"] for c in record["candidates"]] == list(BASE_WEIGHTS)
    keeping = [c for c in record["candidates"] if c["val_retention"] >= 0.6]
    assert record["weight"] == max(keeping, key=lambda c: (c["val_mAP"], c["weight"]))["weight"]
    # The input itself keeps all of its own order; the raw head keeps less.
    assert record["candidates"][-1]["val_retention"] == pytest.approx(1.0)
    assert record["candidates"][0]["val_retention"] < 0.6 <= record["candidates"][-1]["val_retention"]
    assert record["scale"] == pytest.approx(np.linalg.norm(outputs[:n_train], axis=1).mean())


def test_a_stricter_retention_never_chooses_a_smaller_weight():
    outputs, inputs, labels = _split(seed=3)
    retention = CrossClassRetention(inputs[12:], labels[12:])
    weights = [choose_base_weight(outputs, inputs, labels, n_train=12, retention=retention,
                                  min_retention=r)["weight"] for r in (0.0, 0.5, 0.9, 1.0)]
    assert weights == sorted(weights) and weights[-1] == 1.0


def test_fixed_weight_is_evaluated_not_chosen():
    outputs, inputs, labels = _split()
    retention = CrossClassRetention(inputs[12:], labels[12:])
    record = choose_base_weight(outputs, inputs, labels, n_train=12, retention=retention, min_retention=0.85,
                                weight=0.3)
    assert record["weight"] == 0.3 and record["chosen_by"] == "fixed"
    assert [c["weight"] for c in record["candidates"]] == [0.3]


def test_without_validation_names_the_head_is_kept_as_the_papers_define_it():
    outputs, inputs, labels = _split()
    record = choose_base_weight(outputs, inputs, labels, n_train=len(labels), retention=lambda v: float("nan"),
                                min_retention=0.85)
    assert record == {**record, "weight": 0.0, "chosen_by": "no validation names", "candidates": []}


def test_mix_and_scale():
    outputs, inputs, _ = _split()
    assert np.allclose(mix(outputs, inputs, 1.0, 5.0), inputs)
    assert np.allclose(np.linalg.norm(mix(outputs, inputs, 0.4, 2.0), axis=1), 1.0)
    assert head_scale(np.zeros((3, 4))) == 1.0 and head_scale(np.zeros((0, 4))) == 1.0


def test_a_large_validation_split_is_sampled_and_progress_is_reported():
    outputs, inputs, labels = _split(per_class=30)  # 120 names
    retention = CrossClassRetention(inputs[20:], labels[20:])
    calls = []
    full = choose_base_weight(outputs, inputs, labels, n_train=20, retention=retention, min_retention=0.85)
    sampled = choose_base_weight(outputs, inputs, labels, n_train=20, retention=retention, min_retention=0.85,
                                 max_queries=30, progress=lambda done, total: calls.append((done, total)))
    assert calls == [(i, len(BASE_WEIGHTS)) for i in range(1, len(BASE_WEIGHTS) + 1)]
    # Retention always uses every validation name; the mAP of 30 sampled queries differs from all 100.
    assert [c["val_retention"] for c in sampled["candidates"]] == [c["val_retention"] for c in full["candidates"]]
    assert [c["val_mAP"] for c in sampled["candidates"]] != [c["val_mAP"] for c in full["candidates"]]


def test_without_a_measurable_retention_the_head_is_kept():
    outputs, inputs, labels = _split()
    record = choose_base_weight(outputs, inputs, labels, n_train=20, retention=lambda v: float("nan"),
                                min_retention=0.85)
    assert record["weight"] == 0.0 and record["chosen_by"].startswith("retention not measurable")
    assert len(record["candidates"]) == len(BASE_WEIGHTS)


def _curve(maps, retentions):
    return [{"weight": round(0.1 * i, 1), "val_mAP": m, "val_retention": r}
            for i, (m, r) in enumerate(zip(maps, retentions))]


def test_the_knee_is_the_weight_closest_to_losing_neither_figure():
    # mAP holds up to w = 0.3 then falls; retention climbs fast up to 0.3 then slowly
    run = _curve([0.80, 0.79, 0.78, 0.77, 0.60, 0.45, 0.40], [0.50, 0.70, 0.82, 0.90, 0.93, 0.96, 1.0])
    assert knee(run)["weight"] == 0.3
    # a run whose head costs nothing (mAP flat): the largest weight keeps most and loses nothing
    assert knee(_curve([0.5, 0.5, 0.5], [0.6, 0.8, 1.0]))["weight"] == 0.2
    assert knee(_curve([0.5], [0.6])) is None
    assert knee([{"weight": 0.0, "val_mAP": None, "val_retention": 0.5},
                 {"weight": 1.0, "val_mAP": 0.4, "val_retention": None}]) is None


def test_derived_min_retention_is_the_median_knee_retention_rounded_from_validation_only():
    runs = [_curve([0.8, 0.78, 0.5], [0.6, 0.83, 1.0]),   # knee 0.1, retention 0.83
            _curve([0.7, 0.69, 0.4], [0.7, 0.88, 1.0]),   # knee 0.1, retention 0.88
            _curve([0.9, 0.89, 0.3], [0.5, 0.91, 1.0]),   # knee 0.1, retention 0.91
            [{"weight": 0.0, "val_mAP": None, "val_retention": None}]]  # no validation figures
    derived = derive_min_retention(runs)
    assert derived["median"] == pytest.approx(0.88) and derived["min_retention"] == 0.9
    assert derived["knees"][:3] == [{"weight": 0.1, "val_retention": r} for r in (0.83, 0.88, 0.91)]
    assert derived["knees"][3] is None
    # columns the rule must not see (test mAP, benchmark changes) change nothing
    noisy = [[{**c, "test_mAP": 1 - c["weight"], "mayosrs_change": c["weight"]} for c in run] for run in runs]
    assert derive_min_retention(noisy) == derived
    assert derive_min_retention([[]])["min_retention"] is None
