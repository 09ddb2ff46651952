"""The bundled biomedical encoder med-minilm loads offline and gives the vectors it was shipped with."""

from __future__ import annotations

import json

import numpy as np
from safetensors import safe_open

from bioviz.models.registry import load_encoder
from bioviz.models.model_spec import MED_MINILM_DIR, ModelSpec

# Written when the model was shipped (benchmarks/med_minilm.py ship): a changed file changes these.
FINGERPRINT = "ab87fe3e2546c9f05cda4c526d0f3b94"
NAMES = ["heart attack", "Myocardial infarction", "Hesitancy of micturition"]
FIRST_DIMS = [[-0.00591, 0.0642, 0.01982, 0.11823, 0.02874, 0.04707],
              [-0.03299, 0.00023, 0.04027, 0.05114, 0.06635, -0.06621],
              [0.07095, 0.01001, 0.04232, 0.05946, -0.0175, 0.00243]]


def test_med_minilm_is_a_bundled_preset_in_float16_within_50_mb():
    spec = ModelSpec.parse("med-minilm")
    assert spec.kind == "bundled" and spec.is_preset and spec.path == MED_MINILM_DIR
    weights = MED_MINILM_DIR / "model.safetensors"
    assert sum(f.stat().st_size for f in MED_MINILM_DIR.rglob("*") if f.is_file()) <= 50 * 2**20
    with safe_open(str(weights), "pt") as handle:
        assert {str(handle.get_tensor(k).dtype) for k in handle.keys()} == {"torch.float16"}
    recipe = json.loads((MED_MINILM_DIR / "pretrain.json").read_text(encoding="utf-8"))
    assert recipe["config"]["exclude_names"] == "recipes/med-minilm-excluded.txt"


def test_med_minilm_loads_offline_with_its_fingerprint_and_vectors(tmp_home):
    encoder = load_encoder("med-minilm")  # HF_HUB_OFFLINE=1 (tests/conftest.py): nothing is downloaded
    assert encoder.fingerprint == FINGERPRINT and encoder.dim == 384
    vectors = encoder.encode(NAMES)
    assert np.allclose(vectors[:, :6], FIRST_DIMS, atol=2e-4)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    # what the pretraining taught: a lay synonym near its concept, far from an unrelated one
    assert vectors[0] @ vectors[1] > 0.5 > vectors[0] @ vectors[2]
