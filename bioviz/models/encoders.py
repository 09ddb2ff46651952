"""Encoders: a parsed MODEL (:class:`~bioviz.models.model_spec.ModelSpec`) turned into names -> vectors.

A :class:`SentenceTransformerEncoder` serves any sentence-transformers directory, hub id or
trained run (a plain transformers checkpoint, ``config.json`` only, is pooled with [CLS], as
SapBERT-style encoders define their output); a :class:`CharTfidfEncoder` the lexical
baseline; a :class:`HeadRunEncoder` a head run, from its input model's vectors through its
head. Every encoder returns L2-normalised float32 rows and has a fingerprint
(:mod:`bioviz.models.model_files`). Which encoder a MODEL gets, once per process, is
:mod:`bioviz.models.registry`'s decision.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from bioviz.models import char_tfidf
from bioviz.models.head_chain import HeadChain, module_kind, read_modules
from bioviz.models.load_errors import cannot_load, foreign_module_reason, foreign_module_type, no_loading_bar, \
    quiet_foreign_pickle, weights_reason
from bioviz.models.model_spec import ModelSpec
from bioviz.models.vector_cache import BLOCK_MIN, VectorCache
from bioviz.space import l2_normalise
from bioviz.text_clean import model_text

logger = logging.getLogger(__name__)

# Chunks of this many batches between progress callbacks; large enough that the cost of
# calling encode once per chunk is lost in the noise.
CHUNK_BATCHES = 16

Progress = Callable[[int, int], None]
# ``base_vectors(texts, batch_size) -> (len(texts), dim)``: where a head run's input vectors come from.
BaseVectors = Callable[[list[str], int], np.ndarray]


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


def token_lengths(model, texts: list[str]) -> list[int]:
    """Tokens of each text as ``model`` (a SentenceTransformer) encodes it, truncated to its length.

    Characters when the model has no tokenizer that counts them (a custom first module): the
    order only decides the padding, never the vectors' values beyond their last bits.
    """
    tokenizer = getattr(model, "tokenizer", None)
    most = getattr(model, "max_seq_length", None) or 512
    try:
        ids = tokenizer(texts, add_special_tokens=True, truncation=True, max_length=most)["input_ids"]
    except Exception:  # noqa: BLE001 - any tokenizer failure only costs padding: fall back to characters
        return [len(t) for t in texts]
    return [len(i) for i in ids]


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


def _sentence_transformer_at(path: Path, device_name: str):
    """Load ``path`` as a SentenceTransformer; plain checkpoints get [CLS] pooling."""
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    from sentence_transformers import SentenceTransformer  # imported here: it imports torch (seconds)

    modules = read_modules(path)
    foreign = foreign_module_type(modules) if modules is not None else None
    if foreign is not None:  # a hub snapshot is not checked by ModelSpec.parse(); ST would refuse it with a traceback
        raise cannot_load(path, foreign_module_reason(foreign))
    try:
        with no_loading_bar():
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


def load_sentence_transformer(spec: ModelSpec | str, device: str | None = None):
    """Load a sentence-transformers model for a MODEL.

    Parameters
    ----------
    spec : ModelSpec or str
        ``minilm``, a sentence-transformers or transformers directory, a run directory, or a
        hub id (from the local cache; downloaded only when online); text is parsed
        (:meth:`ModelSpec.parse`) for the trainer's callers, which hold a config's text.
    device : str, optional
        torch device; the best available (:func:`device`) by default.

    Raises
    ------
    ModelError
        For ``char-tfidf`` (not a neural model) and for anything that cannot be found.
    """
    return _sentence_transformer_at(ModelSpec.of(spec).files(), device or _best_device())


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

    @property
    def worker_kind(self) -> str | None:
        """The :class:`ModelSpec` kind a Ray worker would load by name, or None: only this process can encode it."""
        return None

    def _encode(self, texts: list[str], batch_size: int) -> np.ndarray:
        raise NotImplementedError

    def _lengths(self, texts: list[str]) -> list[int]:
        """What batches are grouped by: characters here; tokens where an encoder has its tokenizer."""
        return [len(t) for t in texts]

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
        texts = [model_text(t) for t in texts]  # what the model reads: the tokenizer never sees a 5 MB name
        total = len(texts)
        if not total:
            return np.zeros((0, self.dim), dtype=np.float32)
        # Longest first, so that a batch pads its names to nearly their own length and chunking
        # for progress reports keeps that. By tokens where the encoder can count them: names of
        # one length in characters differ in tokens, and sorting by characters (as
        # sentence-transformers does inside one call) left 36% of ICD-10-CM's batch positions
        # padding, by tokens 0.2% (benchmarks/names_to_encode.py, docs/scale.md).
        order = np.argsort([-n for n in self._lengths(texts)], kind="stable")
        out = np.empty((total, self.dim), dtype=np.float32)
        chunk = max(1, batch_size * CHUNK_BATCHES)
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
        self.model_spec = ref
        self.spec = ref.spec
        self.label = ref.label
        self.path = ref.files()
        self.device_name = device_name
        self.fingerprint = ref.fingerprint()
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
    def worker_kind(self) -> str | None:
        """What a Ray worker loading this model by name would load (the ModelSpec kind)."""
        return self.model_spec.kind

    @property
    def dim(self) -> int:
        """Output dimensionality (loads the weights)."""
        get_dim = getattr(self.model, "get_embedding_dimension", None) or self.model.get_sentence_embedding_dimension
        return int(get_dim())

    def _encode(self, texts: list[str], batch_size: int) -> np.ndarray:
        vectors = self.model.encode(texts, batch_size=batch_size, convert_to_numpy=True,
                                    normalize_embeddings=True, show_progress_bar=False)
        return l2_normalise(vectors)

    def _lengths(self, texts: list[str]) -> list[int]:
        return token_lengths(self.model, texts)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.label!r}, fingerprint={self.fingerprint[:12]})"


class CharTfidfEncoder(Encoder):
    """The ``char-tfidf`` lexical baseline (:mod:`bioviz.models.char_tfidf`)."""

    def __init__(self, model=None) -> None:
        self.tfidf = model if model is not None else char_tfidf.load_default()
        self.model_spec = ModelSpec.parse("char-tfidf")
        self.spec = "char-tfidf"
        self.label = "char-tfidf"
        self.fingerprint = self.tfidf.fingerprint
        self.dim = self.tfidf.dim

    def _encode(self, texts: list[str], batch_size: int) -> np.ndarray:
        return self.tfidf.transform(texts)


class HeadRunEncoder(SentenceTransformerEncoder):
    """A head run encoded from its input model's vectors: ``chain(input(texts))``.

    A head run's directory holds its input model's modules followed by a head of Dense and
    Normalize modules (:mod:`bioviz.models.head_chain`). Its vectors are those of the input
    model, served by ``base_vectors`` (the registry passes the vector cache,
    :func:`bioviz.models.cached_encoding.encode_cached`, so a level encoded once for the input model is
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
    base_vectors : callable
        ``base_vectors(texts, batch_size) -> vectors`` of ``base`` (for names not in a cached block).
    """

    def __init__(self, ref: ModelSpec, base: SentenceTransformerEncoder, chain: HeadChain,
                 base_vectors: BaseVectors) -> None:
        super().__init__(ref)
        self.base = base
        self.chain = chain
        self.base_vectors = base_vectors

    @property
    def worker_kind(self) -> str | None:
        """None: its head runs here, on the input model's cached vectors."""
        return None

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
        step = max(1, min(BLOCK_MIN - 1, batch_size * CHUNK_BATCHES))  # chunks never stored as blocks
        for start in range(0, total, step):
            chunk = texts[start:start + step]
            inputs = whole[start:start + step] if whole is not None else self.base_vectors(chunk, batch_size)
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


def worker_encoder(spec: str) -> SentenceTransformerEncoder:
    """The encoder a Ray worker builds for a MODEL it is sent by name (see :attr:`Encoder.worker_kind`).

    Only plain sentence-transformers models travel (a head run's head runs in the app's
    process), so the worker needs neither the registry nor the vector cache.
    """
    return SentenceTransformerEncoder(ModelSpec.parse(spec))
