"""A model's files: its hub snapshot, its fingerprint, the width it declares.

Every encoder has a *fingerprint*: a hash of its weights and configuration files (not its
name), which keys the vector cache so a changed model never serves stale vectors. Nothing
here loads weights.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from huggingface_hub import constants

from bioviz.errors import ModelError
from bioviz.models.run_record import NAME_FILE

FINGERPRINT_SCHEMA = "st-1"  # bump when the encoding path changes the vectors a model gives
# Files that describe a model but do not change its vectors: left out of the fingerprint so
# that the trainer adding metrics to run.json does not invalidate cached vectors.
_NOT_HASHED = {"README.md", "run.json", "training_log.jsonl", NAME_FILE}
# Other runtimes' copies of the weights (hub repositories often carry them): never loaded
# by sentence-transformers' torch backend, so neither downloaded nor hashed.
_OTHER_RUNTIMES = ("onnx", "openvino", "coreml")
_HUB_IGNORE = [f"{d}/*" for d in _OTHER_RUNTIMES] + ["*.onnx", "*.h5", "*.msgpack", "*.ot", "tf_model*",
                                                      "flax_model*", "rust_model*"]


def hub_offline() -> bool:
    """Whether the Hugging Face Hub may not be reached (``HF_HUB_OFFLINE``, the library's or the environment's)."""
    return bool(constants.HF_HUB_OFFLINE) or os.environ.get("HF_HUB_OFFLINE", "0") not in ("", "0", "false")


def hub_snapshot(repo_id: str) -> Path:
    """Local snapshot directory of a hub model, downloading it only when online."""
    # imported here: the hub client (httpx, hf_api) is only needed for hub models
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import HfHubHTTPError, LocalEntryNotFoundError

    how = (f"download it once while online (python -c \"from sentence_transformers import SentenceTransformer; "
           f"SentenceTransformer('{repo_id}')\") or pass a local model directory")
    try:
        return Path(snapshot_download(repo_id, local_files_only=True))
    except LocalEntryNotFoundError:
        pass
    except Exception as error:  # noqa: BLE001 - invalid ids raise several validation errors
        raise ModelError(f"unknown model {repo_id!r}: use minilm, char-tfidf, a model directory, a run "
                         f"directory or a hub id like org/name ({error.__class__.__name__})") from None
    if hub_offline():
        raise ModelError(f"model {repo_id!r} is not a local directory and is not in the Hugging Face cache, "
                         f"and the hub is offline (HF_HUB_OFFLINE=1): {how}")
    try:
        return Path(snapshot_download(repo_id, ignore_patterns=_HUB_IGNORE))
    except (HfHubHTTPError, OSError, ValueError) as error:
        raise ModelError(f"model {repo_id!r} could not be downloaded ({error.__class__.__name__}): {how}") from None


def file_signature(path: Path) -> tuple:
    """(relative path, size, mtime) of every file that defines the model's vectors."""
    rows = []
    for file in sorted(p for p in path.rglob("*") if p.is_file()):
        rel = file.relative_to(path).as_posix()
        parts = Path(rel).parts
        if file.name in _NOT_HASHED or parts[0] in _OTHER_RUNTIMES or any(p.startswith(".") for p in parts):
            continue
        stat = file.stat()
        rows.append((rel, stat.st_size, stat.st_mtime_ns))
    return tuple(rows)


_FINGERPRINTS: dict[tuple, str] = {}


def directory_fingerprint(path: str | Path, extra: str = "") -> str:
    """Hash of the contents of every weight and configuration file under ``path``.

    Memoised per process on the files' sizes and modification times, so the weights are
    read once per change.
    """
    path = Path(path)
    signature = (str(path.resolve()), extra, file_signature(path))
    if signature not in _FINGERPRINTS:
        digest = hashlib.sha256(f"{FINGERPRINT_SCHEMA}|{extra}".encode())
        for rel, _, _ in signature[2]:
            digest.update(rel.encode() + b"\0")
            with open(path / rel, "rb") as handle:
                for block in iter(lambda: handle.read(1 << 22), b""):
                    digest.update(block)
        _FINGERPRINTS[signature] = digest.hexdigest()[:32]
    return _FINGERPRINTS[signature]


def dimension_from_files(path: str | Path) -> int | None:
    """The output width a sentence-transformers directory declares, or None when it does not say.

    The last module that sets a width wins: a ``Dense`` module's ``out_features``, or a
    ``Pooling`` module's ``word_embedding_dimension`` times its pooling modes. A plain
    checkpoint (no ``modules.json``, [CLS] pooling here) has its ``hidden_size``.
    """
    path = Path(path)

    def read(file: Path) -> dict:
        try:
            data = json.loads(file.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    try:
        modules = json.loads((path / "modules.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        hidden = read(path / "config.json").get("hidden_size")
        return int(hidden) if isinstance(hidden, int) else None
    dim = None
    for module in modules if isinstance(modules, list) else []:
        if not isinstance(module, dict):
            continue
        dense = read(path / str(module.get("path", "")) / "config.json") if module.get("path") else {}
        if isinstance(dense.get("out_features"), int):
            dim = dense["out_features"]
        elif isinstance(dense.get("word_embedding_dimension"), int):
            modes = sum(1 for key, on in dense.items() if key.startswith("pooling_mode_") and on is True)
            dim = dense["word_embedding_dimension"] * max(modes, 1)
    return dim
