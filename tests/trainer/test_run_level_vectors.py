"""A training job caches its head run's vectors of the level as its last step (so "Open in views" waits for nothing)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from bioviz.ontology import LevelSpec
from bioviz.search.neighbours import level_space
from trainer import runs
from trainer.config import TrainConfig, validate
from trainer.runs import train_run

DATA = Path(__file__).resolve().parents[1] / "data"


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """``(home, run_dir, level)``: one small residual run on minilm, trained and published by ``train_run``."""
    root = tmp_path_factory.mktemp("level-vectors")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("BIOVIZ_HOME", str(root / "home"))
        config = validate(TrainConfig(source=str(DATA / "trainer_tiny.tsv"), depth=1, shots=3, hidden=32, epochs=2,
                                      base="minilm", device="cpu"))
        train_run(config, root / "run-a")
    return root / "home", root / "run-a", LevelSpec(config.source, depth=1)


def test_a_published_head_run_finds_its_level_vectors_cached(trained, monkeypatch):
    home, run, level = trained
    monkeypatch.setenv("BIOVIZ_HOME", str(home))
    view = level.load()
    space, info = level_space(view, str(run))  # what the Neighbours page asks for after "Open in views"
    assert info["encoded"] == 0 and info["cache_hits"] == len(set(view.names))
    assert space.vectors.shape == (len(view.names), 384)


def test_a_failed_encoding_only_warns_and_the_run_stays(trained, monkeypatch, caplog):
    home, run, level = trained
    monkeypatch.setenv("BIOVIZ_HOME", str(home))

    def disk_refuses(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(runs, "encode_cached", disk_refuses)
    with caplog.at_level(logging.WARNING, logger="trainer.runs"):
        assert runs.encode_level(run, level.load().names) is False
    assert "computed when first asked for" in caplog.text and (run / "run.json").is_file()


def test_only_head_runs_are_encoded_by_the_job(tmp_path, monkeypatch):
    class WholeModel:  # a fine-tuned run loads as a plain sentence-transformers encoder
        label = "fine-tuned"

    monkeypatch.setattr(runs, "load_encoder", lambda spec: WholeModel())
    monkeypatch.setattr(runs, "encode_cached", lambda *a, **k: pytest.fail("a fine-tuned run's level was encoded"))
    assert runs.encode_level(tmp_path, ["fever"]) is False
