"""TrainConfig: its level and split, and the pure validation."""

from __future__ import annotations

import dataclasses

import pytest

from bioviz.errors import BiovizError
from bioviz.ontology import LevelSpec, SplitSpec
from bioviz.ontology.splits import DEFAULT_SPLIT
from trainer.config import TrainConfig, validate
from trainer.data import check_feasible


def test_level_and_split_come_from_the_flat_fields():
    config = TrainConfig(source="hpo", root="HP:0000118", depth=2, keep_ambiguous=True,
                         source_options={"sab": "HPO"})
    assert config.level == LevelSpec("hpo", root="HP:0000118", depth=2, keep_ambiguous=True,
                                     options={"sab": "HPO"})
    assert TrainConfig(source="icd10").split == DEFAULT_SPLIT
    # The split seed is split_seed when given, else the run's seed: one rule, here.
    assert TrainConfig(source="icd10", seed=4).split == SplitSpec(seed=4)
    assert TrainConfig(source="icd10", seed=4, split_seed=0, shots=None).split == SplitSpec(shots=None, seed=0)


def test_an_old_run_json_config_still_reads():
    """A run.json ``config`` from before: flat level fields, plus keys that are not options."""
    old = {"source": "icd10", "depth": 1, "root": None, "synonyms": False, "keep_ambiguous": False,
           "shots": 15, "encoder": "residual", "base": "minilm", "source_options": {},
           "base_fingerprint": "ab" * 16, "input_model": "minilm", "dim": 384,
           "split": {"seed": 0, "shots": 15, "test_per_class": 1}}
    fields = {f.name for f in dataclasses.fields(TrainConfig)}
    config = TrainConfig(**{k: v for k, v in old.items() if k in fields})
    assert config.level.label == "icd10 d1" and config.split == DEFAULT_SPLIT
    assert LevelSpec.from_config(old) == config.level


def test_validate_is_pure_and_check_feasible_reads_the_data(data_dir, tmp_home):
    # A missing source and a missing model pass validate: it reads nothing but the config.
    config = validate(TrainConfig(source="/no/such/source.obo", base="/no/such/model"))
    with pytest.raises(BiovizError, match="not found"):
        check_feasible(config)
    too_many = validate(TrainConfig(source=str(data_dir / "mini.obo"), shots=50))
    with pytest.raises(BiovizError, match="shots 50 is larger than the classes allow"):
        check_feasible(too_many)
    check_feasible(dataclasses.replace(too_many, shots=1))


@pytest.mark.parametrize("field, value, reason", [
    ("batch_size", 0, "batch_size must be >= 2 (got 0)"),
    ("lr", 0, "lr must be > 0 (got 0)"),
    ("epochs", 0, "epochs must be >= 1 (got 0)"),
    ("dropout", 1.0, "dropout must be in [0, 1) (got 1.0)"),
    ("shots", 0, "shots must be >= 1, or all (got 0)"),
    ("stop_on", "accuracy", "unknown stop_on 'accuracy': choose one of auto, loss, mAP"),
    ("identity_start", "yes", "identity_start must be true or false"),
])
def test_out_of_range_values_are_refused_zero_included(field, value, reason):
    """Zero is a value like any other: only None means "the encoder type's default"."""
    with pytest.raises(BiovizError) as error:
        validate(TrainConfig(source="icd10", **{field: value}))
    assert str(error.value) == reason or str(error.value).startswith(reason)


def test_options_describe_every_field_for_the_form_and_the_checks():
    from trainer.config import OPTIONS
    from trainer.job_options import hyperparameters

    assert OPTIONS["context_weight"].encoders == ("dan", "cca") and OPTIONS["context_weight"].per_encoder
    assert OPTIONS["base_weight"].none == "auto" and OPTIONS["base_weight"].menu[0] == 0.0
    assert OPTIONS["hidden"].kind is int and OPTIONS["lr"].kind is float and OPTIONS["lr"].optional
    assert OPTIONS["synonym_dropout"].help_text.startswith("cca: ")
    shown = {o.name for o in hyperparameters("hierarchical")}
    assert {"finetune", "ms_alpha", "hidden"} <= shown and not shown & {"context_weight", "synonym_dropout"}
    assert validate(TrainConfig(source="icd10", encoder="dan")).context_weight == 1.0  # gamma, higher-level §3
