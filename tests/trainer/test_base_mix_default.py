"""The shipped ``min_retention`` default is what the validation-only rule gives over the saved runs.

docs/training.md ("The threshold, re-derived on validation only") says the default was set by
``benchmarks/quality_base_weight.py --derive`` over the rows in benchmarks/results/; this
keeps the two from drifting apart (a new default without rows, or rows without the default).
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
from pathlib import Path

import pytest

from trainer.config import TrainConfig

RESULTS = Path(__file__).resolve().parents[2] / "benchmarks" / "results"
ROWS = sorted(RESULTS.glob("base_weight_*.json"))


def _benchmark_script():
    path = RESULTS.parent / "quality_base_weight.py"
    spec = importlib.util.spec_from_file_location("quality_base_weight", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_saved_runs_cover_both_levels_and_every_head_type():
    rows = [row for path in ROWS for row in json.loads(path.read_text(encoding="utf-8"))]
    runs = {(row["level"].split(":")[0], row["encoder"], row["seed"]) for row in rows}
    assert len(runs) == len(rows)  # no run saved twice (a merged file counts each run once)
    assert {(level, encoder) for level, encoder, _ in runs} == {
        (level, encoder) for level in ("icd10", "hpo") for encoder in ("residual", "dan", "cca", "hierarchical")}


def test_the_min_retention_default_is_the_rule_over_the_saved_runs():
    derived = _benchmark_script().derive(ROWS)
    assert len(derived["runs"]) >= 12 and all(run["knee"] is not None for run in derived["runs"])
    default = next(f.default for f in dataclasses.fields(TrainConfig) if f.name == "min_retention")
    assert default == pytest.approx(derived["min_retention"])
