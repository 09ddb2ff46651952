"""evaluate(): tasks on the mini ontology, result caching, results stored with runs."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from bioviz.errors import EvaluationError
from bioviz.evaluation import run as evaluation, splits, store
from bioviz.evaluation.result import EvalResult
from bioviz.evaluation.run import EvalSettings
from bioviz.models.model_spec import ModelSpec
from bioviz.ontology import SplitSpec, level_view, load_source

DATA = Path(__file__).parents[2] / "data"
SETTINGS = EvalSettings(n_boot=50, pairs_per_distance=20)


@pytest.fixture
def fake_models(fake_eval_models):
    return fake_eval_models


@pytest.fixture
def mini(tmp_home):
    onto = load_source(str(DATA / "mini.obo"))
    view = level_view(onto, depth=1)
    return onto, view, SplitSpec(shots=2).make(view)


def test_every_task_gives_figures_and_sizes(mini, fake_models):
    onto, view, split = mini
    results = evaluation.evaluate(view, split, ["a", "b"], "all", ontology=onto, settings=SETTINGS)
    assert [(r.model, r.task) for r in results] == [
        (m, t) for m in ("tri-a", "tri-b") for t in evaluation.TASKS]
    by_task = {r.task: r for r in results if r.model == "tri-a"}
    assert 0 <= by_task["ranking"].metrics["map"] <= 1
    assert by_task["ranking"].sizes == {"queries": 2, "skipped": 0, "references": 4}
    assert set(by_task["ranking"].per_class) <= set(view.classes)
    assert set(by_task["hypernym"].metrics) == {"acc1", "mrr"}
    assert {"train.map", "test.acc1", "test.mrr"} <= set(by_task["synonym"].metrics)
    assert by_task["leaf2parent"].sizes["queries"] > 0
    assert "mean_auc" in by_task["hierarchy-auc"].metrics
    low, high = by_task["synonym"].ci["train.map"]
    assert low <= by_task["synonym"].metrics["train.map"] <= high
    json.dumps([r.to_dict() for r in results], allow_nan=False)  # strict JSON: NaN became null


def test_results_are_cached(mini, fake_models, tmp_home):
    onto, view, split = mini
    first = evaluation.evaluate(view, split, "a", ["ranking", "hypernym"], ontology=onto, settings=SETTINGS)
    second = evaluation.evaluate(view, split, "a", ["ranking", "hypernym"], ontology=onto, settings=SETTINGS)
    assert not any(r.cached for r in first) and all(r.cached for r in second)
    assert fake_models["a"].encoded == 0  # nothing embedded the second time
    assert [r.metrics for r in first] == [r.metrics for r in second]
    assert len(list((tmp_home / "eval").glob("*.json"))) == 2
    other_split = SplitSpec(shots=2, seed=5).make(view)
    third = evaluation.evaluate(view, other_split, "a", ["ranking"], ontology=onto, settings=SETTINGS)
    assert not third[0].cached  # another split is another key


def test_results_stored_with_run(mini, fake_models, tmp_path):
    onto, view, split = mini
    run = tmp_path / "run-1"
    run.mkdir()
    (run / "run.json").write_text(json.dumps({"run_id": "run-1", "config": {
        "shots": 2, "seed": 3, "split_seed": None, "test_per_class": 1, "zero_shot_classes": 0}}))
    (run / "config.json").write_text("{}")  # parses as a model (the fake models load no weights)
    assert splits.split_spec_for_run(run) == SplitSpec(shots=2, seed=3, test_per_class=1, zero_shot_classes=0)
    assert splits.split_spec_for_run(tmp_path) is None
    evaluation.evaluate(view, split, str(run), ["ranking", "hypernym"], ontology=onto, settings=SETTINGS)
    stored = store.read_run_evaluations(run)
    assert sorted(r["task"] for r in stored) == ["hypernym", "ranking"]
    assert not list(run.glob(".eval.json.*.tmp"))  # atomic write left no temporary file
    (run / ".eval.json").write_text("{broken")
    assert store.read_run_evaluations(run) == []
    # A cached result is written back to a run that lost its file.
    evaluation.evaluate(view, split, str(run), ["ranking"], ontology=onto, settings=SETTINGS)
    assert [r["task"] for r in store.read_run_evaluations(run)] == ["ranking"]


def test_benchmarks(fake_models, tmp_home):
    results = evaluation.evaluate_benchmarks(["a"], "all", settings=SETTINGS)
    assert [r.task for r in results] == ["MayoSRS", "UMNSRS-sim", "UMNSRS-rel"]
    assert results[0].sizes == {"pairs": 101, "covered": 101}
    assert -1 <= results[0].metrics["spearman"] <= 1
    assert evaluation.evaluate_benchmarks(["a"], "mayosrs", settings=SETTINGS)[0].cached


def test_bad_requests(mini, fake_models):
    onto, view, split = mini
    with pytest.raises(EvaluationError, match="unknown task 'nope'"):
        evaluation.evaluate(view, split, "a", ["nope"], ontology=onto, settings=SETTINGS)
    with pytest.raises(EvaluationError, match="needs the ontology"):
        evaluation.evaluate(view, split, "a", ["leaf2parent"], ontology=None, settings=SETTINGS)


def test_cross_level(mini, fake_models):
    onto, _, _ = mini
    table = evaluation.cross_level(onto, ["a", "b"], depths=(1, 2, 3), split_spec=SplitSpec(shots=1),
                                   settings=SETTINGS)
    assert table["depths"] == [1, 2]  # depth 3 is as deep as the tree: reported, not an error
    assert "too deep" in table["skipped"][3]
    assert table["models"] == ["tri-a", "tri-b"]
    assert len(table["map"]) == 2 and len(table["map"][0]) == 2


def test_real_model_on_mini(mini, monkeypatch):
    """minilm end to end (bundled model, a handful of names)."""
    import torch
    torch.set_num_threads(1)
    onto, view, split = mini
    results = evaluation.evaluate(view, split, "minilm", ["ranking", "hypernym"], ontology=onto, settings=SETTINGS)
    assert results[0].model == "minilm" and len(results[0].fingerprint) >= 12
    assert results[1].metrics["mrr"] > 0


def test_names_a_compared_run_has_seen_leave_the_queries(mini, fake_models, tmp_path):
    onto, view, split = mini
    run = tmp_path / "run-2"
    run.mkdir()
    (run / "run.json").write_text(json.dumps({"run_id": "run-2", "config": {}}))
    (run / "config.json").write_text("{}")
    test_names = [view.names[i] for i in split.test]
    (run / "split.json").write_text(json.dumps({"train": [test_names[0]], "validation": [], "test": []}))
    assert splits.seen_by_runs([ModelSpec.parse("minilm"), ModelSpec.parse(str(run))]) == [test_names[0]]
    alone = evaluation.evaluate(view, split, "a", ["ranking"], ontology=onto, settings=SETTINGS)
    beside = evaluation.evaluate(view, split, ["a", str(run)], ["ranking"], ontology=onto, settings=SETTINGS)
    assert alone[0].sizes["queries"] == 2
    assert [r.sizes["queries"] for r in beside] == [1, 1]  # the base model is scored on the same names
    assert beside[0].data["excluded_names"]["count"] == 1


def test_storing_results_keeps_the_run_fingerprint(tmp_path):
    from bioviz.models.model_files import directory_fingerprint

    run = tmp_path / "run-3"
    run.mkdir()
    (run / "run.json").write_text("{}")
    (run / "model.safetensors").write_bytes(b"weights")
    before = directory_fingerprint(run)
    store.store_with_run(run, "key", {"task": "ranking"})
    assert store.read_run_evaluations(run) == [{"task": "ranking"}]
    assert directory_fingerprint(run) == before  # cached vectors of the run stay valid


def test_results_stored_before_eval_result_read_back_unchanged():
    # As the dict-building code wrote them to BIOVIZ_HOME/eval and <run>/.eval.json (key order included).
    ranking = {"model": "minilm", "model_spec": "minilm", "run_id": None, "fingerprint": "f1", "task": "ranking",
               "metrics": {"map": 0.5}, "ci": {"map": [0.4, 0.6]}, "sizes": {"queries": 2, "skipped": 0},
               "data": {"settings": {"n_boot": 50}}, "seconds": 0.1, "cached": False,
               "per_item": {"rank": [1.0, None]}, "per_class": {"C1": 0.5}}
    bench = {"model": "r (ab12)", "model_spec": "/runs/r", "run_id": "r", "fingerprint": "f2", "task": "MayoSRS",
             "metrics": {"spearman": None}, "ci": {"spearman": None}, "sizes": {"pairs": 3, "covered": 3},
             "data": {"benchmark": "mayosrs"}, "per_item": {"cosine": [0.1], "human": [1.0]}, "seconds": 0.2,
             "cached": False}
    for stored in (ranking, bench):
        result = EvalResult.from_dict(stored)
        assert result.to_dict() == stored
    assert list(EvalResult.from_dict(ranking).to_dict()) == list(ranking)
    assert EvalResult.from_dict(bench).per_class is None and EvalResult.from_dict(bench).metrics["spearman"] is None
