"""Paired differences against a baseline (bioviz.evaluation.paired) and the best mark they allow."""

from __future__ import annotations

import numpy as np
import pytest

from bioviz.errors import EvaluationError
from bioviz.evaluation import paired
from bioviz.evaluation import tables as result_tables
from bioviz.evaluation.result import EvalResult
from bioviz.evaluation.tasks import RankingTask, SplitData


def ranking_result(model: str, ap, rank, data=None, *, per_item=True) -> EvalResult:
    ap, rank = np.asarray(ap, float), np.asarray(rank, float)
    items = {"ap": [None if np.isnan(v) else v for v in ap], "rank": [None if np.isnan(v) else v for v in rank]}
    return EvalResult(model=model, model_spec=model, task="ranking", data=data or {"view": "v"},
                      metrics={"map": float(np.nanmean(ap)), "mrr": float(np.nanmean(1 / rank))},
                      sizes={"queries": len(ap)}, per_item=items if per_item else {})


def test_identical_models_differ_by_zero_with_a_zero_interval():
    rng = np.random.default_rng(0)
    ap = rng.random(40)
    delta, ci, n = paired.paired_mean_delta(ap, ap, n_boot=200)
    assert delta == 0.0 and ci == (0.0, 0.0) and n == 40
    same = paired.difference(ranking_result("a", ap, np.ones(40)), ranking_result("b", ap, np.ones(40)), "map")
    assert same.delta == 0.0 and same.ci == (0.0, 0.0) and not same.excludes_zero


def test_a_clearly_better_model_has_an_interval_above_zero():
    rng = np.random.default_rng(1)
    base = rng.random(60) * 0.5
    better = np.clip(base + 0.3 + rng.normal(scale=0.05, size=60), 0, 1)
    found = paired.differences([ranking_result("base", base, np.full(60, 3.0)),
                                ranking_result("better", better, np.full(60, 1.0))], "base", n_boot=300)
    by_metric = {d.metric: d for d in found}
    assert by_metric["map"].delta == pytest.approx(better.mean() - base.mean())
    assert by_metric["map"].ci[0] > 0 and by_metric["map"].excludes_zero
    assert by_metric["mrr"].delta == pytest.approx(1 - 1 / 3) and by_metric["mrr"].ci[0] > 0


def test_pairing_is_tighter_than_two_separate_intervals():
    # Per-query AP varies a lot between queries, but the better model gains a little on every one.
    rng = np.random.default_rng(2)
    base = rng.random(50)
    better = np.clip(base + 0.03, 0, 1)
    _, ci, _ = paired.paired_mean_delta(base, better, n_boot=300)
    assert ci[0] > 0  # every query gained: the paired interval excludes 0
    from bioviz.evaluation.metrics import bootstrap_mean_ci
    assert bootstrap_mean_ci(better)[0] < bootstrap_mean_ci(base)[1]  # the separate intervals overlap


def test_unscored_queries_are_left_out_of_both_and_lengths_must_match():
    delta, _, n = paired.paired_mean_delta([1.0, np.nan, 0.5], [1.0, np.nan, 1.0], n_boot=10)
    assert n == 2 and delta == pytest.approx(0.25)
    with pytest.raises(EvaluationError):
        paired.paired_mean_delta([1.0], [1.0, 2.0])


def test_spearman_and_auc_deltas_resample_pairs_for_both_models():
    rng = np.random.default_rng(3)
    human = rng.random(80)
    good = human + rng.normal(scale=0.1, size=80)
    noisy = human + rng.normal(scale=1.0, size=80)
    delta, ci, n = paired.paired_spearman_delta(noisy, good, human, n_boot=300)
    assert delta > 0 and ci[0] > 0 and n == 80
    assert paired.paired_spearman_delta(good, good, human, n_boot=50)[1] == (0.0, 0.0)
    dist = np.repeat([0, 1, 3], 30)
    sims = -dist + rng.normal(scale=0.1, size=90)
    delta, ci, _ = paired.paired_auc_delta(sims, sims, dist, "mean_auc", n_boot=50)
    assert delta == 0.0 and ci == (0.0, 0.0)
    worse = rng.random(90)
    delta, ci, _ = paired.paired_auc_delta(worse, sims, dist, "0-3", n_boot=100)
    assert delta > 0.3 and ci[0] > 0


def test_results_without_per_item_values_give_a_delta_without_interval():
    old = ranking_result("old", [0.5, 0.5], [1, 1], per_item=False)
    d = paired.difference(old, ranking_result("new", [1.0, 1.0], [1, 1]), "map")
    assert d.delta == pytest.approx(0.5) and d.ci is None and d.n == 0
    other_data = ranking_result("x", [1.0, 1.0], [1, 1], data={"view": "another"})
    assert paired.difference(ranking_result("a", [0.5, 0.5], [1, 1]), other_data, "map").ci is None


def test_an_unknown_baseline_is_a_one_line_error():
    with pytest.raises(EvaluationError, match="baseline 'nope' is not among"):
        paired.differences([ranking_result("a", [1.0], [1])], "nope")


def rows(*cells):
    return [{"model": m, "task": "Ranking", "metric": "mAP", "value": v, "ci_low": lo, "ci_high": hi, "n": 20}
            for m, v, lo, hi in cells]


def test_best_is_marked_only_when_intervals_are_separated_and_never_on_a_tie():
    overlapping = result_tables.wide_tables(rows(("a", 0.520, 0.45, 0.59), ("b", 0.518, 0.44, 0.58)))
    assert not result_tables.best_mask(*overlapping).any().any()  # 0.520 vs 0.518: not a finding
    separated = result_tables.wide_tables(rows(("a", 0.80, 0.75, 0.85), ("b", 0.50, 0.44, 0.58)))
    assert result_tables.best_mask(*separated).loc[:, ("Ranking", "mAP")].tolist() == [True, False]
    tied = result_tables.wide_tables(rows(("a", 0.80, 0.79, 0.81), ("b", 0.80, 0.79, 0.81), ("c", 0.1, 0.0, 0.2)))
    assert not result_tables.best_mask(*tied).any().any()  # a tie is never starred, let alone twice
    no_intervals = result_tables.wide_tables(rows(("a", 0.9, None, None), ("b", 0.1, None, None)))
    assert not result_tables.best_mask(*no_intervals).any().any()


def test_a_paired_test_can_mark_a_best_whose_intervals_overlap():
    rng = np.random.default_rng(4)
    base = rng.random(50)
    results = [ranking_result("base", base, np.ones(50)), ranking_result("better", base + 0.03, np.ones(50))]
    values, lows, highs = result_tables.wide_tables(result_tables.results_table(results))
    column = ("Semantic similarity ranking", "mAP")
    assert not result_tables.best_mask(values, lows, highs).any().any()  # no stored intervals here
    beats = result_tables.paired_beats(results, n_boot=200)
    marked = result_tables.best_mask(values, lows, highs, beats=beats)
    assert marked[column].tolist() == [False, True]


def test_results_keep_per_item_values_and_an_old_cached_result_is_computed_again(tmp_home, fake_eval_models,
                                                                                  data_dir):
    import json

    from bioviz.evaluation import run as evaluation
    from bioviz.evaluation.store import cache_key
    from bioviz.ontology import level_view, load_source

    onto = load_source(str(data_dir / "mini.obo"))
    view = level_view(onto, depth=1)
    split = evaluation.SplitSpec(shots=2).make(view)
    settings = evaluation.EvalSettings(n_boot=20)
    first = evaluation.evaluate(view, split, ["a", "b"], ["ranking", "hierarchy-auc"], ontology=onto, settings=settings)
    ranking = first[0]
    assert len(ranking.per_item["ap"]) == len(ranking.per_item["rank"]) == ranking.sizes["queries"]
    auc = first[1]
    assert auc.ci["mean_auc"][0] <= auc.metrics["mean_auc"] <= auc.ci["mean_auc"][1]
    found = {d.metric: d for d in paired.differences(first, "tri-a", n_boot=20) if d.task == "ranking"}
    assert found["map"].delta == 0.0 and found["map"].ci == (0.0, 0.0)
    # A result cached before per-item values were kept: computed again, not served.
    data = RankingTask(SplitData(view, split, onto, settings)).data_key()
    path = tmp_home / "eval" / f"{cache_key('fp-a', 'ranking', data)}.json"
    old = json.loads(path.read_text())
    del old["per_item"]
    path.write_text(json.dumps(old))
    again = evaluation.evaluate(view, split, ["a"], ["ranking"], ontology=onto, settings=settings)[0]
    assert not again.cached and again.per_item["rank"]
    assert evaluation.evaluate(view, split, ["a"], ["ranking"], ontology=onto, settings=settings)[0].cached
