"""Encoder registry: MODELs to encoders, and cached embedding of names.

What a MODEL string names (the presets ``med-minilm``, ``minilm`` and ``char-tfidf``, a trained
run, a model directory, a hub id) is decided once, by :class:`bioviz.models.model_spec.ModelSpec`;
this module loads what it names. A *head run* (a small head trained on the vectors of an input
model) is encoded from the input model's cached vectors (:class:`HeadRunEncoder`): only
fine-tuned runs go through a transformer of their own. A plain transformers checkpoint
(``config.json`` only) is pooled with [CLS], as SapBERT-style encoders define their output.

Every encoder returns L2-normalised float32 rows and has a *fingerprint*: a hash of its
weights and configuration files (not its name), which keys the vector cache so a changed
model never serves stale vectors.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from huggingface_hub import constants

from bioviz.errors import ModelError
from bioviz.models import char_tfidf, ray_embedding
from bioviz.models.encoding_estimate import record_rate
from bioviz.models.head_chain import HeadChain, NotAHeadChain, input_module_kinds, module_kind, read_modules
from bioviz.models.load_errors import (cannot_load, check_finite, foreign_module_reason, foreign_module_type,
                                       quiet_foreign_pickle, weights_reason)
from bioviz.models.model_spec import ModelSpec, bundled_minilm_path, check_model_files  # bundled_minilm_path: re-exported
from bioviz.models.runs import NAME_FILE, read_run, runs_dir
from bioviz.models.vector_cache import BLOCK_MIN, VectorCache
from bioviz.space import Space, l2_normalise

logger = logging.getLogger(__name__)

FINGERPRINT_SCHEMA = "st-1"  # bump when the encoding path changes the vectors a model gives
# Files that describe a model but do not change its vectors: left out of the fingerprint so
# that the trainer adding metrics to run.json does not invalidate cached vectors.
_NOT_HASHED = {"README.md", "run.json", "training_log.jsonl", NAME_FILE}
# Other runtimes' copies of the weights (hub repositories often carry them): never loaded
# by sentence-transformers' torch backend, so neither downloaded nor hashed.
_OTHER_RUNTIMES = ("onnx", "openvino", "coreml")
_HUB_IGNORE = [f"{d}/*" for d in _OTHER_RUNTIMES] + ["*.onnx", "*.h5", "*.msgpack", "*.ot", "tf_model*",
                                                      "flax_model*", "rust_model*"]
# Chunks of this many batches between progress callbacks; large enough that the cost of
# calling encode once per chunk is lost in the noise.
_CHUNK_BATCHES = 16

Progress = Callable[[int, int], None]


def device() -> str:
    """The best available torch device: ``cuda``, ``mps`` or ``cpu``."""
    import torch  # imported here: torch takes seconds to import and the app imports this module early

    if torch.cuda.is_available():
        return "cuda"
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        return "mps"
    return "cpu"


_best_device = device  # parameters named ``device`` below shadow the function


def _offline() -> bool:
    return bool(constants.HF_HUB_OFFLINE) or os.environ.get("HF_HUB_OFFLINE", "0") not in ("", "0", "false")


def _hub_snapshot(repo_id: str) -> Path:
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
    if _offline():
        raise ModelError(f"model {repo_id!r} is not a local directory and is not in the Hugging Face cache, "
                         f"and the hub is offline (HF_HUB_OFFLINE=1): {how}")
    try:
        return Path(snapshot_download(repo_id, ignore_patterns=_HUB_IGNORE))
    except (HfHubHTTPError, OSError, ValueError) as error:
        raise ModelError(f"model {repo_id!r} could not be downloaded ({error.__class__.__name__}): {how}") from None


def resolve(spec: str) -> ModelSpec:
    """What a MODEL string names, without loading weights (:meth:`ModelSpec.parse`).

    Raises
    ------
    ModelError
        If the string names nothing that can be loaded, with a one-line hint.
    """
    return ModelSpec.parse(spec)


def _missing_module_folder(path: Path) -> str | None:
    """The first module folder that ``modules.json`` names and that is missing, if any.

    Only a diagnosis after a failed load. A Normalize module has no files (minilm names a
    ``2_Normalize`` folder it does not ship), so its folder is never blamed.
    """
    try:
        modules = json.loads((path / "modules.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    for module in modules if isinstance(modules, list) else []:
        folder = module.get("path") if isinstance(module, dict) else None
        if module_kind(module) == "Normalize":
            continue
        if isinstance(folder, str) and folder and not (path / folder).is_dir():
            return folder
    return None


def _file_signature(path: Path) -> tuple:
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
    signature = (str(path.resolve()), extra, _file_signature(path))
    if signature not in _FINGERPRINTS:
        digest = hashlib.sha256(f"{FINGERPRINT_SCHEMA}|{extra}".encode())
        for rel, _, _ in signature[2]:
            digest.update(rel.encode() + b"\0")
            with open(path / rel, "rb") as handle:
                for block in iter(lambda: handle.read(1 << 22), b""):
                    digest.update(block)
        _FINGERPRINTS[signature] = digest.hexdigest()[:32]
    return _FINGERPRINTS[signature]


def _sentence_transformer_at(path: Path, device_name: str):
    """Load ``path`` as a SentenceTransformer; plain checkpoints get [CLS] pooling."""
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    from sentence_transformers import SentenceTransformer  # imported here: it imports torch (seconds)

    modules = read_modules(path)
    foreign = foreign_module_type(modules) if modules is not None else None
    if foreign is not None:  # a hub snapshot is not checked by resolve(); ST would refuse it with a traceback
        raise cannot_load(path, foreign_module_reason(foreign))
    try:
        if (path / "modules.json").is_file():
            with quiet_foreign_pickle():
                return SentenceTransformer(str(path), device=device_name, local_files_only=True)
        # A plain transformers checkpoint (SapBERT, PubMedBERT, CODER): these encoders
        # define the [CLS] token's final state as the name's representation.
        from sentence_transformers.sentence_transformer.modules import Pooling, Transformer

        transformer = Transformer(str(path), config_kwargs={"local_files_only": True},
                                  model_kwargs={"local_files_only": True},
                                  processor_kwargs={"local_files_only": True})
        pooling = Pooling(transformer.get_embedding_dimension(), "cls")
        return SentenceTransformer(modules=[transformer, pooling], device=device_name)
    except (OSError, ValueError, KeyError, TypeError) as error:
        # TypeError: a module's configuration (or its folder) missing, or mistyped fields
        first = str(error).strip().splitlines()
        missing = _missing_module_folder(path)
        why = f"the module folder {missing!r} that modules.json names is missing" if missing else \
            first[0] if first else type(error).__name__
        raise cannot_load(path, why) from None
    except Exception as error:  # noqa: BLE001 - torch, safetensors and pickle raise their own types
        # A pickle torch refuses, safetensors that are truncated or random, a size mismatch:
        # the files are damaged. Anything else (out of memory) is not about the files.
        why = weights_reason(error)
        if why is None:
            raise
        raise cannot_load(path, why) from None


def load_sentence_transformer(spec: str, device: str | None = None):
    """Load a sentence-transformers model for a MODEL string.

    Parameters
    ----------
    spec : str
        ``minilm``, a sentence-transformers or transformers directory, a run directory, or a
        hub id (from the local cache; downloaded only when online).
    device : str, optional
        torch device; the best available (:func:`device`) by default.

    Raises
    ------
    ModelError
        For ``char-tfidf`` (not a neural model) and for anything that cannot be found.
    """
    ref = resolve(spec)
    if ref.kind == "char-tfidf":
        raise ModelError("char-tfidf is a lexical baseline, not a sentence-transformers model")
    path = ref.path if ref.kind != "hub" else _hub_snapshot(ref.spec)
    return _sentence_transformer_at(path, device or _best_device())


class Encoder:
    """An encoder of names: ``encode(texts) -> (n, dim)`` L2-normalised float32.

    Attributes
    ----------
    spec : str
        The MODEL string.
    label : str
        Short readable name for titles.
    fingerprint : str
        Hash of what determines the vectors (weights and configuration files).
    dim : int
        Output dimensionality.
    """

    spec: str
    label: str
    fingerprint: str
    dim: int

    def _encode(self, texts: list[str], batch_size: int) -> np.ndarray:
        raise NotImplementedError

    def encode(self, texts, batch_size: int = 64, progress: Progress | None = None) -> np.ndarray:
        """Encode ``texts`` in batches.

        Parameters
        ----------
        texts : sequence of str
        batch_size : int
            Names per forward pass.
        progress : callable, optional
            ``progress(done, total)`` after every chunk of batches.

        Returns
        -------
        numpy.ndarray
            ``(len(texts), dim)`` float32, rows of unit length, in the order of ``texts``.
        """
        texts = list(texts)
        total = len(texts)
        if not total:
            return np.zeros((0, self.dim), dtype=np.float32)
        # Longest first, as sentence-transformers does inside one call, so that chunking
        # for progress reports keeps batches of similar length (little padding).
        order = np.argsort([-len(t) for t in texts], kind="stable")
        out = np.empty((total, self.dim), dtype=np.float32)
        chunk = max(1, batch_size * _CHUNK_BATCHES)
        for start in range(0, total, chunk):
            rows = order[start:start + chunk]
            out[rows] = self._encode([texts[i] for i in rows], batch_size)
            if progress is not None:
                progress(min(start + chunk, total), total)
        return out

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.label!r}, dim={self.dim}, fingerprint={self.fingerprint[:12]})"


class SentenceTransformerEncoder(Encoder):
    """A sentence-transformers model (bundled, directory, hub id or trained run).

    The weights are loaded on first use: a fully cached request needs only the
    fingerprint (a hash of the files), so reopening an encoded level never loads torch
    weights.
    """

    def __init__(self, ref: ModelSpec, device_name: str | None = None) -> None:
        path = ref.path if ref.kind != "hub" else _hub_snapshot(ref.spec)
        self.spec = ref.spec
        self.label = ref.label
        self.path = path
        self.device_name = device_name
        pooling = "" if (path / "modules.json").is_file() else "cls"
        self.fingerprint = directory_fingerprint(path, extra=pooling)
        self._model = None
        self._load_lock = threading.Lock()

    @property
    def model(self):
        """The SentenceTransformer (loaded on first access)."""
        with self._load_lock:
            if self._model is None:
                started = time.perf_counter()
                self._model = _sentence_transformer_at(self.path, self.device_name or device())
                logger.info("loaded weights of %s in %.1fs", self.label, time.perf_counter() - started)
            return self._model

    @property
    def dim(self) -> int:
        """Output dimensionality (loads the weights)."""
        get_dim = getattr(self.model, "get_embedding_dimension", None) or self.model.get_sentence_embedding_dimension
        return int(get_dim())

    def _encode(self, texts: list[str], batch_size: int) -> np.ndarray:
        vectors = self.model.encode(texts, batch_size=batch_size, convert_to_numpy=True,
                                    normalize_embeddings=True, show_progress_bar=False)
        return l2_normalise(vectors)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.label!r}, fingerprint={self.fingerprint[:12]})"


class CharTfidfEncoder(Encoder):
    """The ``char-tfidf`` lexical baseline (:mod:`bioviz.models.char_tfidf`)."""

    def __init__(self, model=None) -> None:
        self.tfidf = model if model is not None else char_tfidf.load_default()
        self.spec = "char-tfidf"
        self.label = "char-tfidf"
        self.fingerprint = self.tfidf.fingerprint
        self.dim = self.tfidf.dim

    def _encode(self, texts: list[str], batch_size: int) -> np.ndarray:
        return self.tfidf.transform(texts)


def _model_files(path: Path, read):
    """``read(path)``; a model directory removed or changed while its files are read is a ModelError."""
    try:
        return read(path)
    except OSError as error:  # e.g. a run deleted between resolving it and hashing its weights
        raise ModelError(f"cannot read the model files in {path}: {error.strerror or error}") from None


class HeadRunEncoder(SentenceTransformerEncoder):
    """A head run encoded from its input model's vectors: ``chain(input(texts))``.

    A head run's directory holds its input model's modules followed by a head of Dense and
    Normalize modules (:mod:`bioviz.models.head_chain`). Its vectors are those of the input
    model, served by :func:`encode_cached` (so a level encoded once for the input model is
    never put through the transformer again), put through the head: a few matrix products.
    The fingerprint is the run directory's, as for the whole model, so vectors cached
    before stay valid. An ``init`` run chains: its input encoder is itself a head run.

    Parameters
    ----------
    ref : ModelSpec
        The run.
    base : SentenceTransformerEncoder
        The encoder of the run's input model (its fingerprint checked against the run's record).
    chain : HeadChain
        The run's head.
    """

    def __init__(self, ref: ModelSpec, base: SentenceTransformerEncoder, chain: HeadChain) -> None:
        super().__init__(ref)
        self.base = base
        self.chain = chain

    @property
    def dim(self) -> int:
        """Output dimensionality (from the head's files: no weights are loaded)."""
        return self.chain.out_dim

    def encode(self, texts, batch_size: int = 64, progress: Progress | None = None) -> np.ndarray:
        """Vectors of ``texts``: the input model's (through the vector cache), then the head.

        Parameters
        ----------
        texts : sequence of str
        batch_size : int
            Names per forward pass of the input model, for names it has not cached.
        progress : callable, optional
            ``progress(done, total)``, counting names whose final vector is ready.
        """
        texts = list(texts)
        total = len(texts)
        if not total:
            return np.zeros((0, self.dim), dtype=np.float32)
        # A whole level the input model has encoded before is one block: read it at once.
        whole = VectorCache().get_block(self.base.fingerprint, texts) if total >= BLOCK_MIN else None
        out = np.empty((total, self.dim), dtype=np.float32)
        step = max(1, min(BLOCK_MIN - 1, batch_size * _CHUNK_BATCHES))  # chunks never stored as blocks
        for start in range(0, total, step):
            chunk = texts[start:start + step]
            inputs = whole[start:start + step] if whole is not None else encode_cached(self.base, chunk, batch_size)[0]
            out[start:start + len(chunk)] = self.chain.apply(inputs)
            if progress is not None:
                progress(start + len(chunk), total)
        return out

    def encode_full(self, texts, batch_size: int = 64, progress: Progress | None = None) -> np.ndarray:
        """The same vectors through the run's whole sentence-transformers model (loads its weights).

        What every head run cost before: kept for checks and benchmarks.
        """
        return SentenceTransformerEncoder.encode(self, texts, batch_size=batch_size, progress=progress)

    def __repr__(self) -> str:
        return (f"{type(self).__name__}({self.label!r}, on {self.base.label!r}, "
                f"fingerprint={self.fingerprint[:12]})")


_ENCODERS: dict[tuple, Encoder] = {}
# Re-entrant: loading a head run loads its input model's encoder (and an init run's input run's) inside.
_LOCK = threading.RLock()
MAX_CHAIN = 8  # init runs stacked deeper than this (or a cycle) are encoded through their whole model


def _input_encoder(ref: ModelSpec, depth: int) -> tuple[SentenceTransformerEncoder, HeadChain]:
    """The input model's encoder and the head of run ``ref``, when its vectors can come from them.

    Raises
    ------
    NotAHeadChain
        With the reason the run must be encoded through its whole model: fine-tuned, an
        input model that is gone or has changed since training, or a head that is not a
        plain chain of Dense modules.
    """
    settings = read_run(ref.path).settings
    if settings.fine_tuned:
        raise NotAHeadChain("a fine-tuned run")
    if settings.input is None or settings.input.fingerprint is None:
        raise NotAHeadChain("run.json names no input model with its fingerprint")
    spec, recorded = settings.input.spec, settings.input.fingerprint
    if depth >= MAX_CHAIN:
        raise NotAHeadChain(f"more than {MAX_CHAIN} runs stacked on each other")
    candidates = [spec]
    if not Path(spec).expanduser().exists() and Path(spec).name:
        # an input run recorded under a home that has moved since: the same run under this home's runs
        # (the fingerprint check below makes sure it is the same)
        moved = runs_dir() / Path(spec).name
        if moved.is_dir():
            candidates.append(str(moved))
    reason = f"its input model {spec} cannot be loaded"
    for candidate in candidates:
        try:
            base = _load_encoder(candidate, depth + 1)
        except ModelError as error:
            reason = f"its input model cannot be loaded ({error})"
            continue
        if not isinstance(base, SentenceTransformerEncoder):
            raise NotAHeadChain(f"its input model {spec} is not a sentence-transformers model")
        if base.fingerprint != recorded:
            reason = f"its input model {spec} has changed since the run was trained"
            continue
        kinds = input_module_kinds(base.path)
        if kinds is None:
            raise NotAHeadChain(f"its input model {spec} has no readable modules")
        return base, HeadChain.read(ref.path, kinds)
    raise NotAHeadChain(reason)


def _new_encoder(ref: ModelSpec, depth: int) -> Encoder:
    if ref.kind == "char-tfidf":
        return CharTfidfEncoder()
    if ref.kind == "run":
        try:
            base, chain = _input_encoder(ref, depth)
            return HeadRunEncoder(ref, base, chain)
        except NotAHeadChain as why:
            logger.info("run %s is encoded through its whole model: %s", ref.label, why)
    return SentenceTransformerEncoder(ref)


def _load_encoder(spec: str, depth: int) -> Encoder:
    ref = resolve(spec)
    if ref.kind == "char-tfidf":
        home = str(Path(os.environ.get("BIOVIZ_HOME", ".bioviz")).resolve())
        key: tuple = ("char-tfidf", char_tfidf.corpus_key(), home)
    elif ref.kind == "hub":
        key = ("hub", ref.spec)
    else:
        key = (ref.kind, str(ref.path), _model_files(ref.path, _file_signature))
    with _LOCK:
        if key not in _ENCODERS:
            started = time.perf_counter()
            _ENCODERS[key] = _model_files(ref.path, lambda _path: _new_encoder(ref, depth)) if ref.path else \
                _new_encoder(ref, depth)
            logger.info("loaded %r in %.1fs", _ENCODERS[key], time.perf_counter() - started)
        encoder = _ENCODERS[key]
        if ref.kind == "run" and encoder.label != ref.label:
            encoder.label = ref.label  # renamed since it was loaded (the name is not part of the key)
        return encoder


def load_encoder(spec: str) -> Encoder:
    """The encoder for a MODEL string, loaded once per process (reloaded if its files change).

    A head run gets a :class:`HeadRunEncoder` (its vectors from its input model's cached
    vectors); other models a :class:`SentenceTransformerEncoder` or :class:`CharTfidfEncoder`.

    Raises
    ------
    ModelError
        If the model cannot be found or loaded (one-line reason and how to fix it).
    """
    return _load_encoder(spec, 0)


@dataclass(frozen=True)
class EmbedStats:
    """How an embedding call was served."""

    names: int
    cache_hits: int
    encoded: int
    seconds: float

    @property
    def names_per_second(self) -> float:
        """Throughput over the whole call (cache lookups included)."""
        return self.names / self.seconds if self.seconds > 0 else float("inf")


def model_dimension(spec: str) -> int:
    """Output dimensionality of a MODEL, for checks before any work starts.

    Read from the model's configuration files (:func:`dimension_from_files`), so a check in
    the app's process never loads weights it will not use; only a model whose files do not
    say (char-tfidf) is loaded.

    Raises
    ------
    ModelError
        If the model cannot be found or loaded.
    """
    ref = resolve(spec)
    if ref.kind != "char-tfidf":
        dim = dimension_from_files(ref.path if ref.kind != "hub" else _hub_snapshot(ref.spec))
        if dim:
            return dim
    return load_encoder(spec).dim


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
        config = read(path / str(module.get("path", "")) / "config.json") if module.get("path") else {}
        if isinstance(config.get("out_features"), int):
            dim = config["out_features"]
        elif isinstance(config.get("word_embedding_dimension"), int):
            modes = sum(1 for key, on in config.items() if key.startswith("pooling_mode_") and on is True)
            dim = config["word_embedding_dimension"] * max(modes, 1)
    return dim


def encode_missing(encoder: Encoder, texts: list[str], batch_size: int = 64,
                   progress: Progress | None = None) -> np.ndarray:
    """``encoder.encode(texts)`` here, or on the Ray cluster when the Ray executor is configured.

    The cluster takes the names when ``BIOVIZ_EXECUTOR=ray`` (and at least
    ``BIOVIZ_RAY_MIN_NAMES`` are missing) or inside ``ray_embedding.executor("ray")``, for
    models a worker can load by name (:mod:`bioviz.models.ray_embedding`).
    """
    kind = None
    if type(encoder) is SentenceTransformerEncoder:  # not a head run: its head runs here, on cached vectors
        kind = resolve(encoder.spec).kind
    if ray_embedding.wanted(encoder.label, kind, len(texts)):
        return ray_embedding.encode(encoder, load_encoder, texts, batch_size=batch_size, progress=progress)
    return encoder.encode(texts, batch_size=batch_size, progress=progress)


def encode_cached(encoder: Encoder, texts, batch_size: int = 64, progress: Progress | None = None,
                  use_cache: bool = True) -> tuple[np.ndarray, EmbedStats]:
    """Vectors of ``texts`` from the disk cache, encoding (and storing) only the missing ones.

    Parameters
    ----------
    encoder : Encoder
    texts : sequence of str
        Duplicates are encoded once.
    batch_size : int
    progress : callable, optional
        ``progress(done, total)`` counted in names; cache hits count as done at once.
    use_cache : bool
        Read and write the cache (``BIOVIZ_HOME/embeddings``).

    Returns
    -------
    (vectors, stats)
        ``(len(texts), dim)`` float32 unit rows in the order of ``texts``, and an :class:`EmbedStats`.
    """
    started = time.perf_counter()
    texts = list(texts)
    cache = VectorCache() if use_cache else None
    if cache is not None and len(texts) >= BLOCK_MIN:
        # a whole level asked for again: one file read instead of a lookup per name
        block = cache.get_block(encoder.fingerprint, texts)
        if block is not None:
            if progress is not None:
                progress(len(texts), len(texts))
            stats = EmbedStats(len(texts), len(dict.fromkeys(texts)), 0, time.perf_counter() - started)
            logger.info("%s: %d names from a cached block in %.2fs", encoder.label, len(texts), stats.seconds)
            return block, stats
    unique = list(dict.fromkeys(texts))
    found: dict[str, np.ndarray] = {}
    if cache is not None:
        found = cache.get(encoder.fingerprint, unique)
    missing = [t for t in unique if t not in found]
    hits = len(unique) - len(missing)
    if progress is not None:
        progress(hits, len(unique))
    if missing:
        report = None if progress is None else (lambda done, _total: progress(hits + done, len(unique)))
        encoding_started = time.perf_counter()
        fresh = encode_missing(encoder, missing, batch_size=batch_size, progress=report)
        check_finite(fresh, encoder.label)  # the one place new vectors pass before the cache and callers
        record_rate(encoder, len(missing), time.perf_counter() - encoding_started)  # for the next estimate
        if cache is not None:
            cache.put(encoder.fingerprint, missing, fresh, label=encoder.label)
        found.update(zip(missing, fresh))
    vectors = np.stack([found[t] for t in texts]) if texts else np.zeros((0, encoder.dim), dtype=np.float32)
    vectors = np.ascontiguousarray(vectors, dtype=np.float32)
    if cache is not None and len(texts) >= BLOCK_MIN:
        cache.put_block(encoder.fingerprint, texts, vectors)
    stats = EmbedStats(len(texts), hits, len(missing), time.perf_counter() - started)
    logger.info("%s: %d names, %d from cache, %d encoded in %.2fs", encoder.label, len(texts), hits,
                len(missing), stats.seconds)
    return vectors, stats


def embed(texts, model: str = "minilm", batch_size: int = 64, progress: Progress | None = None,
          use_cache: bool = True) -> Space:
    """Encode ``texts`` with ``model`` into a :class:`~bioviz.space.Space`.

    Parameters
    ----------
    texts : sequence of str
    model : str
        A MODEL string (see the module docstring).
    batch_size : int
        Names per forward pass.
    progress : callable, optional
        ``progress(done, total)`` in names, e.g. to drive a progress bar.
    use_cache : bool
        Serve known vectors from the disk cache and store new ones.

    Returns
    -------
    Space
        Rows L2-normalised float32; ``model_id`` is the model's readable label.

    Raises
    ------
    ModelError
        If the model cannot be loaded.
    """
    encoder = load_encoder(model)
    vectors, _ = encode_cached(encoder, texts, batch_size=batch_size, progress=progress, use_cache=use_cache)
    return Space(tuple(texts), vectors, encoder.label)
