"""Fixtures of the trainer tests: a tiny level view with synthetic, class-structured vectors."""

from __future__ import annotations

import numpy as np
import pytest

from bioviz.ontology import level_view, load_source, make_split
from trainer.config import TrainConfig, validate
from trainer.data import TrainingData


def synthetic_data(data_dir, shots: int = 3, seed: int = 0, dim: int = 16) -> TrainingData:
    """The tiny table's level view with noisy class-centred unit vectors (no model needed)."""
    ontology = load_source(str(data_dir / "trainer_tiny.tsv"))
    view = level_view(ontology, depth=1)
    split = make_split(view, shots=shots, seed=seed)
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(len(view.classes), dim))
    vectors = centres[view.labels] + 1.5 * rng.normal(size=(len(view.names), dim))
    vectors = (vectors / np.linalg.norm(vectors, axis=1, keepdims=True)).astype(np.float32)
    return TrainingData(ontology, view, split, vectors, "synthetic", "0" * 32, 0.0)


@pytest.fixture
def tiny_data(data_dir, tmp_home) -> TrainingData:
    """Synthetic TrainingData over tests/data/trainer_tiny.tsv."""
    return synthetic_data(data_dir)


@pytest.fixture
def tiny_config(data_dir, tmp_home):
    """A factory of validated configs on the tiny table (small hidden layer, CPU)."""

    def make(**overrides) -> TrainConfig:
        values = {"source": str(data_dir / "trainer_tiny.tsv"), "depth": 1, "shots": 3, "hidden": 32,
                  "epochs": 5, "device": "cpu"}
        values.update(overrides)
        return validate(TrainConfig(**values))

    return make
