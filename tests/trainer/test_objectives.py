"""The objectives: one per head type, and the one place that routes fine-tuning elsewhere."""

from __future__ import annotations

import pytest
import torch

from trainer.config import HEADS, TrainConfig
from trainer.definitions import fine_tune
from trainer.encoders import Stack
from trainer.finetune import fine_tune_hierarchy
from trainer.objectives import OBJECTIVES, fine_tuning


def test_every_head_type_has_its_objective():
    assert set(OBJECTIVES) == set(HEADS)
    assert all(cls.name == name for name, cls in OBJECTIVES.items())


@pytest.mark.parametrize("encoder, finetune, path", [
    ("definitions", False, fine_tune),
    ("hierarchical", True, fine_tune_hierarchy),
    ("hierarchical", False, None),
    ("residual", False, None),
])
def test_fine_tuning_paths_are_told_apart_from_heads(encoder, finetune, path):
    assert fine_tuning(TrainConfig(source="icd10", encoder=encoder, finetune=finetune)) is path


@pytest.mark.parametrize("encoder", sorted(HEADS))
def test_batches_cover_the_training_names_and_give_finite_terms(encoder, tiny_data, tiny_config):
    objective = OBJECTIVES[encoder](tiny_config(encoder=encoder), tiny_data, torch.device("cpu"),
                                    torch.Generator().manual_seed(0))
    model = objective.build_head()
    n_train = len(tiny_data.split.train)
    encoded = model.eval()(objective.inputs[torch.from_numpy(tiny_data.split.train)]).detach()
    batches = objective.epoch_batches(encoded)
    assert set(torch.cat(batches).tolist()) == set(range(n_train))
    terms = objective.batch_terms(model.train(), batches[0])
    assert terms and all(torch.isfinite(value) and value.ndim == 0 for value in terms.values())
    if encoder == "cca":  # the projection travels in front of the head and is saved on its own
        assert isinstance(objective.trained_head(model), Stack) and objective.projection is not None
    else:
        assert objective.trained_head(model) is model and objective.projection is None
