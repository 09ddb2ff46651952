"""RunRecord (bioviz.models.run_record): the one typed read of run.json, for runs old and new."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from bioviz.errors import ModelError
from bioviz.models.run_record import PRETRAIN_KIND, TRAIN_KIND, InputModel, RunRecord
from bioviz.models.model_spec import ModelSpec, input_chain
from bioviz.models.runs import list_runs
from bioviz.ontology import LevelSpec, SplitSpec, level_view, load_source

MINI = Path(__file__).resolve().parents[2] / "data" / "mini.obo"


def write_run(folder: Path, content: bytes | dict) -> Path:
    folder.mkdir(parents=True)
    (folder / "run.json").write_bytes(json.dumps(content).encode() if isinstance(content, dict) else content)
    return folder


def test_a_run_as_the_trainer_writes_it_reads_back_typed(tmp_path):
    from trainer.config import TrainConfig, validate
    from trainer.events import TrainResult
    from trainer.runs import run_record  # the trainer's own run.json, not a copy of its shape

    config = validate(TrainConfig(source=str(MINI), depth=1, shots=2, zero_shot_classes=1, seed=3, split_seed=5,
                                  base="minilm"))
    view = level_view(load_source(str(MINI)), depth=1)
    data = SimpleNamespace(split=config.split.make(view), view=view, input_fingerprint="fp-minilm",
                           input_label="minilm", dim=384, embedding_s=0.1)
    result = TrainResult(head=None, model=None, projection=None, vectors=np.zeros((0, 384)), history=[],
                         best_epoch=1, stopped_early=False, training_s=0.2, per_epoch_s=[0.2], device="cpu",
                         metrics={"trained": {}})
    run = write_run(tmp_path / "20261127-120000-ab12", run_record(config, data, result, run_id="20261127-120000-ab12",
                                                                  export_s=0.1))
    record = RunRecord.read(run)
    assert (record.kind, record.settings.encoder, record.settings.fine_tuned) == (TRAIN_KIND, "residual", False)
    assert record.settings.level == config.level and record.settings.trained_on(view.stats())
    assert not record.settings.trained_on(level_view(load_source(str(MINI)), depth=2).stats())
    assert record.split_spec() == config.split == SplitSpec(shots=2, seed=5, test_per_class=1, zero_shot_classes=1)
    assert (record.split.shots, record.split.seed, record.split.zero_shot_count) == (2, 5, 1)
    assert record.input == InputModel("minilm", "fp-minilm", "minilm")
    assert record.label == "residual · mini d1 · 2-shot (ab12)" and record.settings.seed == 3
    with pytest.raises(dataclasses.FrozenInstanceError):
        record.run_id = "other"
    with pytest.raises(TypeError):  # the file's objects are read-only views
        record.config["shots"] = 9


def test_a_pretrained_base_model_as_its_job_publishes_it(tmp_path):
    from trainer.jobs.pretrain_job import publish

    (tmp_path / "work").mkdir()
    config = {"base": "minilm", "sources": ["hpo", "/data/mini.obo"], "objectives": ["synonyms"],
              "max_pairs": 5000, "shots": 15, "seed": 0}
    publish(tmp_path / "work", tmp_path / "pre", {"config": config, "pairs": {"train": 1234}})
    record = RunRecord.read(tmp_path / "pre")
    assert record.kind == PRETRAIN_KIND and record.settings.fine_tuned
    assert record.settings.pretraining.sources == ("hpo", "/data/mini.obo")
    assert record.name == "pretrained minilm: synonyms, 1.23k pairs"
    assert record.split_spec() is None and record.settings.level is None  # trained on no level's split
    assert record.input == InputModel("minilm")


# config fields of the first trainer (d846b32): no finetune, kind, source_options, identity_start ...
OLD_CONFIG = {"source": "hpo", "depth": 1, "root": None, "synonyms": False, "keep_ambiguous": False, "shots": 15,
              "test_per_class": 1, "zero_shot_classes": 0, "encoder": "definitions", "base": "minilm",
              "init": "/old/home/runs/first", "seed": 0, "split_seed": None, "epochs": 1, "hidden": 9600,
              "max_pairs": 20000, "device": "auto", "base_fingerprint": "abc", "input_model": "/old/home/runs/first",
              "input_label": "first", "dim": 384,
              "split": {"seed": 0, "shots": 15, "test_per_class": 1, "zero_shot_classes": [], "sizes": {}},
              "view": {"source": "hpo", "root": "HP:0000118", "depth": 1, "mode": "level", "classes": 3,
                       "names": 40}}


def test_an_old_run_directory_still_reads(tmp_path):
    record = RunRecord.read(write_run(tmp_path / "old", {"run_id": "old", "config": OLD_CONFIG, "metrics": {}}))
    assert record.settings.fine_tuned  # definitions fine-tuned the transformer before "finetune" existed
    assert record.settings.level == LevelSpec("hpo", None, 1) and record.settings.init == "/old/home/runs/first"
    assert record.input == InputModel("/old/home/runs/first", "abc", "first")
    assert record.split_spec() == SplitSpec(shots=15, seed=0, test_per_class=1, zero_shot_classes=0)
    assert record.default_name == "definitions (continued) · HPO d1 · 15-shot"
    # older still: a head run's config without input_model follows init, then base
    chained = write_run(tmp_path / "chained", {"config": {"init": str(tmp_path / "old"), "base": "minilm"}})
    chained = ModelSpec(str(chained), "run", chained, "chained")  # no weights: parse would refuse it
    (tmp_path / "old" / "config.json").write_text("{}")  # the step parses as a model (no weights are read)
    # each step parsed; the chain ends where an input run has moved away since (/old/home/runs/first)
    assert [step.spec for step in input_chain(chained)] == [str(tmp_path / "old")]


def test_missing_keys_read_as_unknown_not_as_damage(tmp_path):
    record = RunRecord.read(write_run(tmp_path / "bare", {}))
    assert (record.run_id, record.damaged, record.kind, record.input) == ("bare", None, TRAIN_KIND, None)
    assert record.split_spec() is None and record.label == "run · ? · ? (bare)"


@pytest.mark.parametrize("content, reason", [
    (b'{"config": {"sour', "is not valid JSON"),
    (b"\xff\xfe", "is not UTF-8 text"),
    (b"[1]", "holds a list, not an object"),
    (b'{"config": ["hpo"]}', "the config in run.json is a list, not an object"),
    (b'{"config": {}, "metrics": 0.5}', "the metrics in run.json is a number, not an object"),
])
def test_a_damaged_run_json_is_one_line_and_listed_as_damaged(tmp_path, content, reason):
    run = write_run(tmp_path / "runs" / "broken", content)
    with pytest.raises(ModelError, match=rf"^run broken is damaged: .*{reason}.*; delete it or train it again$"):
        RunRecord.read(run)
    [listed] = list_runs(tmp_path / "runs", include_damaged=True)
    assert reason in listed.damaged and listed.settings.input is None and dict(listed.config) == {}
    with pytest.raises(ModelError, match="is not a trained run"):
        RunRecord.read(tmp_path / "runs")


def test_fields_of_the_wrong_type_are_unknown_and_split_settings_refused_where_used(tmp_path):
    config = {"shots": [2], "seed": True, "input_model": 5, "base": "", "init": 7, "encoder": 3, "depth": "deep",
              "source": "hpo", "view": [1], "split": "x", "kind": ["pretrain"], "base_fingerprint": 9}
    record = RunRecord.read(write_run(tmp_path / "odd", {"run_id": " ", "config": config}))
    settings = record.settings
    assert (record.run_id, settings.kind, settings.seed, settings.input, settings.level) == \
        ("odd", TRAIN_KIND, None, None, None)
    assert record.default_name == "run · HPO ? · ?"
    with pytest.raises(ModelError, match=r"^run odd is damaged: its split settings in run.json are not numbers"):
        record.split_spec()
