"""The bundled biomedical encoder med-minilm loads offline and gives the vectors it was shipped with."""

from __future__ import annotations

import json

import numpy as np
from safetensors import safe_open

from bioviz.models.registry import load_encoder
from bioviz.models.model_spec import MED_MINILM_DIR, ModelSpec

# Written when the model was shipped (benchmarks/med_minilm.py ship): a changed file changes these.
FINGERPRINT = "5e1679ad67fff525e6432111ffec3d13"  # med-minilm 2 (issue 31)
NAMES = ["heart attack", "Myocardial infarction", "Hesitancy of micturition"]
FIRST_DIMS = [[-0.00389, 0.07985, 0.01152, 0.11603, 0.01836, 0.03021],
              [-0.01741, 0.02769, 0.02478, 0.05532, 0.0612, -0.078],
              [0.08896, -3e-05, 0.02502, 0.07158, -0.03933, 0.00637]]


def test_med_minilm_is_a_bundled_preset_in_float16_within_50_mb():
    spec = ModelSpec.parse("med-minilm")
    assert spec.kind == "bundled" and spec.is_preset and spec.path == MED_MINILM_DIR
    weights = MED_MINILM_DIR / "model.safetensors"
    assert sum(f.stat().st_size for f in MED_MINILM_DIR.rglob("*") if f.is_file()) <= 50 * 2**20
    with safe_open(str(weights), "pt") as handle:
        assert {str(handle.get_tensor(k).dtype) for k in handle.keys()} == {"torch.float16"}
    recipe = json.loads((MED_MINILM_DIR / "pretrain.json").read_text(encoding="utf-8"))
    # version 2: made in steps (pretrainings and merges), each recorded; the development files' texts were
    # excluded from every step's pairs, and are named, never shipped
    assert recipe["version"] == 2 and recipe["recipe"] == "recipes/candidates.sh"
    assert [step["name"] for step in recipe["lineage"]] == ["med-minilm-1", "c1", "c2", "c2-wise-0.4", "c5",
                                                            "c5-wise-0.85"]
    assert recipe["config"]["exclude_names"].startswith("recipes/med-minilm-excluded.txt")


def test_med_minilm_loads_offline_with_its_fingerprint_and_vectors(tmp_home):
    encoder = load_encoder("med-minilm")  # HF_HUB_OFFLINE=1 (tests/conftest.py): nothing is downloaded
    assert encoder.fingerprint == FINGERPRINT and encoder.dim == 384
    vectors = encoder.encode(NAMES)
    assert np.allclose(vectors[:, :6], FIRST_DIMS, atol=2e-4)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    # what the pretraining taught: a lay synonym near its concept, far from an unrelated one
    assert vectors[0] @ vectors[1] > 0.5 > vectors[0] @ vectors[2]
