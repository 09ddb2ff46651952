"""The run list (bioviz.evaluation.run_list): complete runs only, one line each, and what is stored with them."""

from __future__ import annotations

import json

from bioviz.evaluation.run_list import evaluated_on, run_row, stored_results_rows
from bioviz.models.runs import list_runs


def test_only_complete_runs_are_listed_with_their_settings(evaluated_run, tmp_home):
    (tmp_home / "runs" / ".half.partial-1").mkdir()  # the trainer's temporary directory: no run.json yet
    (tmp_home / "runs" / "damaged").mkdir()
    (tmp_home / "runs" / "damaged" / "run.json").write_text("{not json")
    [run] = list_runs()
    row = run_row(run)
    assert row == {
        "name": "definitions · mini d1 · 2-shot", "run": "mini-definitions", "encoder": "definitions", "trained on": "mini.obo d1", "shots": 2,
        "base": "minilm", "created (UTC)": "2026-01-02 03:04", "test mAP base": 0.5, "test mAP trained": 0.75,
        "base weight": None, "stored evaluations": 2, "damaged": None, "path": str(evaluated_run),
    }


def test_a_run_without_creation_time_or_figures_still_gets_a_line(tmp_home):
    run = tmp_home / "runs" / "old"
    run.mkdir(parents=True)
    (run / "run.json").write_text(json.dumps({"config": {"source": "hpo", "shots": None, "init": "/r/first"},
                                              "metrics": {"base_mix": {"weight": 0.4}}}))
    row = run_row(list_runs()[0])
    assert row["base weight"] == 0.4
    assert row["run"] == "old" and row["shots"] == "all" and row["base"] == "first (init)"
    assert row["test mAP trained"] is None and row["stored evaluations"] == 0
    assert len(row["created (UTC)"]) == 16  # from the file's modification time
    assert stored_results_rows(run) == []


def test_stored_figures_say_where_they_were_computed(evaluated_run):
    rows = stored_results_rows(evaluated_run)
    assert [(r["task"], r["metric"]) for r in rows] == [("Semantic similarity ranking", "mAP"),
                                                       ("MayoSRS", "Spearman")]
    level, bench = rows[0]["evaluated on"], rows[1]["evaluated on"]
    assert level.startswith("mini mini/2026-01-01 under MINI:0000001 d1 · 2 shots, seed 0")
    assert bench == "relatedness benchmark"
    assert rows[0]["n"] == 2 and 0 <= rows[0]["value"] <= 1 and rows[0]["ci_low"] <= rows[0]["ci_high"]


def test_evaluated_on_zero_shot_synonym_sets_and_leaf_to_parent():
    data = {"view": {"source": "hpo", "root": "HP:0000118", "depth": 0, "mode": "synonyms"},
            "split": {"shots": 15, "seed": 0, "zero_shot_classes": 3}}
    assert evaluated_on({"data": data}) == "hpo under HP:0000118 synonym sets · 15 shots, seed 0, 3 zero-shot classes"
    assert evaluated_on({"data": {"ontology": "icd10cm 2025", "root": "ICD10CM"}}) == "icd10cm 2025 under ICD10CM"
