"""A training job caches its head run's vectors of the level as its last step (so "Open in views" waits for nothing)."""

from __future__ import annotations

import pytest

from bioviz.ontology import LevelSpec
from bioviz.search.neighbours import level_space
from trainer import runs
from trainer.config import TrainConfig, validate
from trainer.runs import train_run


@pytest.fixture
def config(data_dir, tmp_home) -> TrainConfig:
    return validate(TrainConfig(source=str(data_dir / "trainer_tiny.tsv"), depth=1, shots=3, hidden=32, epochs=2,
                                base="minilm", device="cpu"))


def test_a_published_head_run_finds_its_level_vectors_cached(config, tmp_path):
    out = tmp_path / "run-a"
    train_run(config, out)
    view = LevelSpec(config.source, depth=1).load()
    space, info = level_space(view, str(out))  # what the Neighbours page asks for after "Open in views"
    assert info["encoded"] == 0 and info["cache_hits"] == len(set(view.names))
    assert space.vectors.shape == (len(view.names), 384)


def test_a_failed_encoding_leaves_the_run_published(config, tmp_path, monkeypatch):
    def disk_refuses(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(runs, "encode_cached", disk_refuses)
    out = tmp_path / "run-b"
    summary = train_run(config, out)
    assert summary["run_dir"] == str(out) and (out / "run.json").is_file()
    monkeypatch.undo()
    _, info = level_space(LevelSpec(config.source, depth=1).load(), str(out))
    assert info["encoded"] == len(set(LevelSpec(config.source, depth=1).load().names))  # computed when asked for


def test_only_head_runs_are_encoded_by_the_job(tmp_path, tmp_home, monkeypatch):
    class WholeModel:  # a fine-tuned run loads as a plain sentence-transformers encoder
        label = "fine-tuned"

    monkeypatch.setattr(runs, "load_encoder", lambda spec: WholeModel())
    monkeypatch.setattr(runs, "encode_cached", lambda *a, **k: pytest.fail("a fine-tuned run's level was encoded"))
    assert runs.encode_level(tmp_path, ["fever"]) is False
