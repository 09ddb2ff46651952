"""``trainer train --base VECTORS``: a head trained on fixed static vectors (the papers' condition) is a run."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from bioviz.models.encoders import HeadRunEncoder
from bioviz.models.model_spec import ModelSpec
from bioviz.models.registry import load_encoder
from bioviz.models.vectors_coverage import covered_view, vectors_models
from bioviz.models.vectors_encoder import VectorsFileEncoder
from bioviz.models.vectors_export import write_vectors
from bioviz.models.vectors_file import VectorsCard
from bioviz.ontology import LevelSpec
from bioviz.search.neighbours import level_space
from trainer.cli import main


def static_vectors(names, dim: int = 24) -> np.ndarray:
    """Word-averaged vectors: each word a seeded random vector, a name the mean of its words' (fastText-like)."""
    rng = np.random.default_rng(0)
    words: dict[str, np.ndarray] = {}
    return np.stack([np.mean([words.setdefault(w, rng.normal(size=dim)) for w in re.findall(r"\w+", n.lower())],
                             axis=0) for n in names]).astype(np.float32)


@pytest.fixture
def static_file(tmp_home, tmp_path, data_dir):
    ontology = LevelSpec(str(data_dir / "trainer_tiny.tsv")).ontology()
    names = sorted({n for concept in ontology.concepts.values() for n in concept.names})
    names.remove("auricular fibrillation")  # one level name without a vector: left out of the training
    path = tmp_path / "static.parquet"
    write_vectors(names, static_vectors(names), path, VectorsCard("static words", source="word-averaged"))
    return path


def _train(data_dir, base, out, capsys, *extra) -> tuple[int, str, str]:
    code = main(["train", "--source", str(data_dir / "trainer_tiny.tsv"), "--depth", "1", "--shots", "3",
                 "--hidden", "48", "--epochs", "3", "--base", str(base), "--out", str(out), "--json", *extra])
    out_text, err = capsys.readouterr()
    return code, out_text, err


def test_a_residual_head_trains_on_a_static_vectors_file_and_opens_as_a_run(static_file, tmp_path, data_dir, capsys):
    code, out, err = _train(data_dir, static_file, tmp_path / "run-static", capsys, "--encoder", "residual")
    assert code == 0, err
    summary = json.loads(out)
    assert "mAP" in summary["trained"]["test"]
    record = json.loads((tmp_path / "run-static" / "run.json").read_text())
    assert record["config"]["base"] == str(static_file)
    assert record["config"]["base_fingerprint"].startswith("vectors-")
    run = ModelSpec.parse(str(tmp_path / "run-static"))
    encoder = load_encoder(run)
    assert isinstance(encoder, HeadRunEncoder) and isinstance(encoder.base, VectorsFileEncoder)
    assert [m.label for m in vectors_models([run])] == ["static words"]  # the views cut the level by its file
    view, (coverage,) = covered_view(LevelSpec(str(data_dir / "trainer_tiny.tsv")).load(), [run])
    assert coverage.missing == 1 and "auricular fibrillation" not in view.names
    space, _ = level_space(view, run)
    assert space.vectors.shape == (len(view.names), 24)
    np.testing.assert_allclose(np.linalg.norm(space.vectors, axis=1), 1, atol=1e-5)


def test_fine_tuning_a_vectors_file_is_refused_in_one_line(static_file, tmp_path, data_dir, capsys):
    code, _, err = _train(data_dir, static_file, tmp_path / "run-ft", capsys, "--encoder", "definitions")
    assert code == 2
    assert "no transformer to fine-tune" in err
