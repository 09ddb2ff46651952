"""Runs that differ only by seed, aggregated into mean and standard deviation (bioviz.evaluation.aggregate)."""

from __future__ import annotations

import json

import pytest

from bioviz.evaluation import aggregate
from bioviz.evaluation.result import EvalResult
from bioviz.evaluation.tables import results_table


def make_run(home, name: str, **config):
    run = home / "runs" / name
    run.mkdir(parents=True)
    base = {"source": "hpo", "depth": 1, "shots": 15, "encoder": "residual", "lr": 0.001, "seed": 0,
            "split_seed": 0, "split": {"seed": 0}, "device": "cpu"}
    (run / "run.json").write_text(json.dumps({"run_id": name, "config": {**base, **config}}))
    return str(run)


def result(spec: str, label: str, value: float) -> EvalResult:
    return EvalResult(model=label, model_spec=spec, task="ranking", metrics={"map": value})


def test_runs_differing_only_by_seed_are_one_group_with_mean_and_sd(tmp_home):
    s0 = make_run(tmp_home, "r0", seed=0)
    s1 = make_run(tmp_home, "r1", seed=1, device="cuda")
    s2 = make_run(tmp_home, "r2", seed=2, split={"seed": 2})
    other_lr = make_run(tmp_home, "r3", seed=3, lr=0.01)
    other_split = make_run(tmp_home, "r4", seed=4, split_seed=4)
    results = [result("minilm", "minilm", 0.4), result(s0, "A", 0.50), result(s1, "B", 0.52),
               result(s2, "C", 0.54), result(other_lr, "D", 0.9), result(other_split, "E", 0.1)]
    groups = aggregate.seed_groups(results)
    assert groups == [aggregate.SeedGroup("residual · HPO d1 · 15-shot", ("A", "B", "C"), (0, 1, 2))]
    [summary] = aggregate.aggregate(results_table(results), groups)
    assert summary.mean == pytest.approx(0.52) and summary.std == pytest.approx(0.02)
    assert summary.seeds == (0, 1, 2) and summary.text() == "0.520 ± 0.020 (seeds 0, 1, 2)"
    table = aggregate.summary_table([summary])
    assert table.loc["residual · HPO d1 · 15-shot", "seeds"] == "0, 1, 2"
    assert table.loc["residual · HPO d1 · 15-shot", "Semantic similarity ranking · mAP"] == "0.520 ± 0.020"
    assert aggregate.summaries_json([summary], groups)[0]["figures"][0]["std"] == pytest.approx(0.02)


def test_a_single_seed_or_no_runs_make_no_group(tmp_home):
    s0 = make_run(tmp_home, "r0")
    assert aggregate.seed_groups([result(s0, "A", 0.5), result("minilm", "minilm", 0.4)]) == []
    assert aggregate.summary_table([]).empty
