"""Saving a trained encoder as a sentence-transformers model directory.

A head run is the input model's own modules, a ``Normalize`` (the head was trained on unit
vectors), the head rewritten as standard ``Dense`` modules, and a final ``Normalize``. A head
trained on a vectors file has no model before it: its directory starts at that ``Normalize``, and
bioviz encodes it from the file's rows (:class:`bioviz.models.encoders.HeadRunEncoder`). Only
sentence-transformers' built-in modules appear in ``modules.json``, so
``SentenceTransformer(run_dir)`` loads it anywhere, without ``trust_remote_code`` and
without bioviz installed. The raw head weights are also kept in ``head.safetensors``.
"""

from __future__ import annotations

import logging
from pathlib import Path

import torch

from bioviz.models.encoders import load_sentence_transformer
from bioviz.models.model_spec import ModelSpec

logger = logging.getLogger(__name__)

HEAD_FILE = "head.safetensors"


def _input_modules(input_model: ModelSpec) -> list:
    """The input model's modules, ending with a Normalize (a vectors file: a Normalize alone, its rows the input)."""
    from sentence_transformers.sentence_transformer.modules import Normalize

    if input_model.kind == "vectors":
        return [Normalize()]
    model = load_sentence_transformer(input_model, device="cpu")
    modules = list(model)
    if not isinstance(modules[-1], Normalize):
        modules.append(Normalize())
    return modules


def save_head_model(head: torch.nn.Module, input_model: ModelSpec, path: str | Path) -> None:
    """Write ``input model -> head -> Normalize`` as a sentence-transformers directory.

    Parameters
    ----------
    head : torch.nn.Module
        A trained head with ``to_dense_modules()`` (see :mod:`trainer.encoders`).
    input_model : ModelSpec
        The model whose vectors the head was trained on (base model or ``init`` run).
    path : path-like
        Target directory (created).
    """
    from safetensors.torch import save_file
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Normalize

    path = Path(path)
    modules = _input_modules(input_model) + head.to_dense_modules() + [Normalize()]
    model = SentenceTransformer(modules=modules, device="cpu")
    model.save(str(path))
    state = {k: v.detach().cpu().contiguous() for k, v in head.state_dict().items()}
    save_file(state, str(path / HEAD_FILE))
    logger.info("saved %d modules to %s", len(modules), path)


def save_fine_tuned(model, path: str | Path) -> None:
    """Write a fine-tuned SentenceTransformer (``definitions``) as a directory."""
    model.save(str(Path(path)))
