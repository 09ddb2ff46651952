"""The overlap rule: which evaluation results saw a model's pretraining data (bioviz.evaluation.overlap)."""

from __future__ import annotations

import json

import pandas as pd

from bioviz.evaluation import overlap
from bioviz.evaluation.result import EvalResult
from bioviz.models.model_spec import ModelSpec
from bioviz.ontology import LevelSpec, SplitSpec


def pretrained_dir(path, levels=(), terms=None, sources=("hpo",)):
    """A model directory with the records of a pretraining run (no weights: the rule reads only records)."""
    path.mkdir(parents=True)
    record = {"config": {"sources": list(sources)},
              "excluded": {"pairs": {}, "total": 0, "levels": [
                  {"level": {"source": src, "depth": str(depth), **({"root": root} if root else {})},
                   "split": {"shots": shots, "seed": seed, "test_per_class": 1, "zero_shot_classes": 0}}
                  for src, root, depth, shots, seed in levels]}}
    (path / overlap.PRETRAIN_FILE).write_text(json.dumps(record))
    if terms is not None:
        (path / overlap.TERMS_FILE).write_text(json.dumps({"hashes": sorted(overlap.term_hash(t) for t in terms)}))
    return path


def head_run(path, base):
    path.mkdir(parents=True)
    (path / "run.json").write_text(json.dumps({"run_id": path.name, "config": {"encoder": "residual",
                                                                             "base": str(base), "shots": 15}}))
    return path


def test_a_level_is_clean_only_when_that_level_and_split_were_excluded(tmp_path):
    model = pretrained_dir(tmp_path / "pre", levels=[("hpo", "HP:0000118", 1, 15, 0)])
    found = overlap.pretraining_of(str(model))
    excluded, split = LevelSpec("hpo", root="HP:0000118", depth=1), SplitSpec(shots=15, seed=0)
    assert overlap.level_reason(found, excluded, split) is None
    assert "without keeping this level's held-out names out" in overlap.level_reason(
        found, excluded, SplitSpec(shots=15, seed=1))  # another split: other test names
    assert overlap.level_reason(found, LevelSpec("hpo", root="HP:0000118", depth=2), split)
    assert overlap.level_reason(found, LevelSpec("icd10", depth=1), split)
    assert overlap.level_reason(found, LevelSpec("hpo", root="HP:0000118", depth=1, synonyms=True), split)


def test_a_file_source_matches_by_its_resolved_path(tmp_path, data_dir, monkeypatch):
    model = pretrained_dir(tmp_path / "pre", levels=[(str(data_dir / "mini.obo"), None, 1, 1, 0)])
    monkeypatch.chdir(data_dir)
    found = overlap.pretraining_of(str(model))
    assert overlap.level_was_excluded(found, LevelSpec("mini.obo", depth=1), SplitSpec(shots=1))


def test_a_run_on_a_pretrained_base_inherits_its_pretraining_and_other_models_have_none(tmp_path):
    base = pretrained_dir(tmp_path / "pre", terms=["heart attack"])
    run = head_run(tmp_path / "runs" / "head", base)
    continued = head_run(tmp_path / "runs" / "again", run)
    assert overlap.pretraining_of(str(continued)).path == base
    assert overlap.pretraining_of("minilm") is None
    assert overlap.pretraining_of(str(head_run(tmp_path / "plain", "minilm"))) is None


def test_benchmark_terms_overlap_when_a_term_was_a_pretraining_text(tmp_path):
    found = overlap.pretraining_of(str(pretrained_dir(tmp_path / "pre", terms=["Heart  Attack", "asthma"])))
    assert overlap.benchmark_reason(found, ["myocardial infarction", "gout"]) is None
    assert overlap.benchmark_reason(found, ["heart attack", "HEART ATTACK", "gout"]).startswith("1 of its 2 terms")
    unrecorded = overlap.pretraining_of(str(pretrained_dir(tmp_path / "old")))  # no pretrain-terms.json
    assert "was not recorded" in overlap.benchmark_reason(unrecorded, ["gout"])


def test_results_are_marked_per_model_and_task_and_the_table_shows_it(tmp_path):
    pre = pretrained_dir(tmp_path / "pre", levels=[("hpo", None, 1, 15, 0)], terms=["gout"])
    results = [
        EvalResult(model="pre", model_spec=str(pre), task="ranking", metrics={}, data={"view": {}}),
        EvalResult(model="pre", model_spec=str(pre), task="MayoSRS", metrics={}, data={"benchmark": "x"}),
        EvalResult(model="minilm", model_spec="minilm", task="ranking", metrics={}, data={"view": {}}),
    ]
    terms = {"MayoSRS": ["gout", "fever"]}
    marks = overlap.result_marks(results, LevelSpec("hpo", depth=1), SplitSpec(shots=15, seed=0), terms)
    assert list(marks) == [("pre", "MayoSRS")]  # the level was kept out; the benchmark's "gout" was not
    marks = overlap.result_marks(results, LevelSpec("hpo", depth=2), SplitSpec(), terms)
    assert set(marks) == {("pre", "MayoSRS"), ("pre", "ranking")}
    labels = {"ranking": "Semantic similarity ranking"}.get
    table = pd.DataFrame({"Semantic similarity ranking · mAP": ["0.500", "★ 0.600"],
                          "MayoSRS · Spearman": ["0.1", "0.2"]}, index=["pre", "minilm"])
    shown = overlap.mark_table(table, marks, lambda t: labels(t) or t)
    assert shown.loc["pre"].tolist() == ["0.500 †", "0.1 †"]
    assert shown.loc["minilm"].tolist() == ["★ 0.600", "0.2"]
    caption = overlap.marks_caption(marks, lambda t: labels(t) or t)
    assert "† pre on MayoSRS: 1 of its 2 terms" in caption and "† pre on Semantic similarity ranking" in caption


def test_the_cross_level_table_names_the_levels_a_model_saw(tmp_path):
    pre = pretrained_dir(tmp_path / "pre", levels=[("hpo", "HP:0000118", 1, 15, 0)])
    (pre / "config.json").write_text("{}")  # parses as a model directory (no weights are loaded)
    models = [ModelSpec.parse(str(pre)), ModelSpec.parse("minilm")]
    lines = overlap.cross_level_reasons(models, ["pre", "minilm"], LevelSpec("hpo", root="HP:0000118"),
                                        [1, 2, 3], split=SplitSpec())
    assert lines == ["† pre in the cross-level table, level(s) 2, 3: pretrained on hpo without keeping those "
                     "levels' held-out names out."]
