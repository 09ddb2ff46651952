"""The process-wide encoder registry: one encoder per MODEL, reloaded when its files change.

A head run (a small head trained on the vectors of an input model) gets a
:class:`~bioviz.models.encoders.HeadRunEncoder` fed by the input model's cached vectors
(:func:`~bioviz.models.cached_encoding.encode_cached`): only fine-tuned runs go through a
transformer of their own. :func:`embed` is names -> :class:`~bioviz.space.Space` for a MODEL.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from pathlib import Path

from bioviz.errors import ModelError
from bioviz.models import char_tfidf
from bioviz.models.backend_choice import check_backend, default_backend
from bioviz.models.blob_store import check_run_blobs
from bioviz.models.cached_encoding import encode_cached
from bioviz.models.encoders import CharTfidfEncoder, Encoder, HeadRunEncoder, Progress, SentenceTransformerEncoder
from bioviz.models.head_chain import HeadChain, NotAHeadChain, input_module_kinds
from bioviz.models.model_files import dimension_from_files, file_signature
from bioviz.models.model_spec import ModelSpec
from bioviz.models.quantized import check_named_backend, default_int8, named_backend
from bioviz.models.runs import read_run, runs_dir
from bioviz.models.vectors_encoder import VectorsFileEncoder
from bioviz.space import Space

logger = logging.getLogger(__name__)

_ENCODERS: dict[tuple, Encoder] = {}
# Re-entrant: loading a head run loads its input model's encoder (and an init run's input run's) inside.
_LOCK = threading.RLock()
MAX_CHAIN = 8  # init runs stacked deeper than this (or a cycle) are encoded through their whole model


def _model_files(path: Path, read):
    """``read(path)``; a model directory removed or changed while its files are read is a ModelError."""
    try:
        return read(path)
    except OSError as error:  # e.g. a run deleted between resolving it and hashing its weights
        raise ModelError(f"cannot read the model files in {path}: {error.strerror or error}") from None


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
            base = _load_encoder(ModelSpec.parse(candidate), depth + 1)
        except ModelError as error:
            reason = f"its input model cannot be loaded ({error})"
            continue
        if not isinstance(base, (SentenceTransformerEncoder, VectorsFileEncoder)):
            raise NotAHeadChain(f"its input model {spec} is not a sentence-transformers model or a vectors file")
        if base.fingerprint != recorded:
            reason = f"its input model {spec} has changed since the run was trained"
            continue
        kinds = input_module_kinds(base.path)
        if kinds is None:
            raise NotAHeadChain(f"its input model {spec} has no readable modules")
        return base, HeadChain.read(ref.path, kinds)
    raise NotAHeadChain(reason)


def _cached_vectors_of(base: Encoder):
    """``base``'s vectors through the vector cache: a head run's input, encoded once for every run on it."""
    return lambda texts, batch_size: encode_cached(base, texts, batch_size=batch_size)[0]


def _new_encoder(ref: ModelSpec, depth: int) -> Encoder:
    if ref.kind == "char-tfidf":
        return CharTfidfEncoder()
    if ref.kind == "vectors":
        return VectorsFileEncoder(ref)
    if ref.kind == "run":
        try:
            base, chain = _input_encoder(ref, depth)
            return HeadRunEncoder(ref, base, chain, base_vectors=_cached_vectors_of(base))
        except NotAHeadChain as why:
            logger.info("run %s is encoded through its whole model: %s", ref.label, why)
    return SentenceTransformerEncoder(ref)


def _load_encoder(ref: ModelSpec, depth: int) -> Encoder:
    if ref.kind == "run":  # a blob written in place would change every run linking it (issue 41)
        check_run_blobs(ref.path, ref.label)
    if ref.kind == "char-tfidf":
        home = str(Path(os.environ.get("BIOVIZ_HOME", ".bioviz")).resolve())
        key: tuple = ("char-tfidf", char_tfidf.corpus_key(), home)
    elif ref.kind == "hub":
        key = ("hub", ref.spec)
    elif ref.kind == "vectors":  # a file: its content hash (a changed file is another model)
        key = ("vectors", str(ref.path), ref.label, ref.fingerprint())
    else:
        key = (ref.kind, str(ref.path), _model_files(ref.path, file_signature))
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


def load_encoder(spec: ModelSpec | str, backend: str | None = None) -> Encoder:
    """The encoder for a MODEL, loaded once per process (reloaded if its files change).

    Text (the trainer's configs, benchmarks, tests) is parsed here (:meth:`ModelSpec.of`);
    the app and the command line pass the :class:`ModelSpec` they parsed once.

    A head run gets a :class:`HeadRunEncoder` (its vectors from its input model's cached
    vectors); other models a :class:`SentenceTransformerEncoder` or :class:`CharTfidfEncoder`.

    Every page, command and job gets its encoder here, so names and queries are encoded by
    the same backend: :func:`bioviz.models.backend_choice.default_backend` unless ``backend``
    is given. Under ``onnx-int8`` a sentence-transformers model whose first module is a
    transformer gets an :class:`~bioviz.models.quantized.OnnxInt8Encoder` (its own
    fingerprint, so its vectors are cached apart from torch's); other models, and trained
    runs, stay as they are (:func:`bioviz.models.quantized.default_int8`).

    Parameters
    ----------
    spec : ModelSpec or str
    backend : str, optional
        ``torch`` for the model as trained, whatever the default (the trainer, which trains
        heads on fp32 vectors); None for the default backend.

    Raises
    ------
    ModelError
        If the model cannot be found or loaded (one-line reason and how to fix it).
    """
    encoder = _load_encoder(ModelSpec.of(spec), 0)
    if backend is not None:
        check_backend(backend, "backend")
    if type(encoder) is not SentenceTransformerEncoder or encoder.model_spec.kind == "run":
        return encoder  # nothing int8 would run (char-tfidf, vectors, runs): no need to ask which backend
    if (default_backend() if backend is None else backend) == "torch":
        return encoder
    return default_int8(encoder)


def backend_encoder(spec: ModelSpec | str, backend: str = "torch") -> Encoder:
    """The encoder of a MODEL under a backend named by the user, loaded once per process.

    Parameters
    ----------
    spec : ModelSpec or str
        The model (text is parsed, as :func:`load_encoder` does).
    backend : str
        ``torch`` (the model as it is), ``onnx-int8`` (its transformer as an int8 ONNX Runtime
        graph, exported once into ``BIOVIZ_HOME/onnx``; head runs too) or ``openvino-int8``
        (not offered yet). Unlike the default backend of :func:`load_encoder`, nothing falls
        back: a model the backend cannot run, or a failed export, is the error.

    Raises
    ------
    ModelError
        An unknown backend, a model the backend cannot run (char-tfidf, a plain transformers
        checkpoint), or a model that cannot be loaded.
    """
    check_named_backend(backend)
    return named_backend(load_encoder(spec, backend="torch"), backend)


def model_dimension(spec: ModelSpec | str) -> int:
    """Output dimensionality of a MODEL, for checks before any work starts.

    Read from the model's configuration files (:func:`dimension_from_files`), so a check in
    the app's process never loads weights it will not use; only a model whose files do not
    say (char-tfidf) is loaded.

    Raises
    ------
    ModelError
        If the model cannot be found or loaded.
    """
    ref = ModelSpec.of(spec)
    if ref.is_neural:
        dim = dimension_from_files(ref.files())
        if dim:
            return dim
    return load_encoder(ref, backend="torch").dim  # the same under every backend


def embed(texts, model: ModelSpec | str = "minilm", *, batch_size: int = 64, progress: Progress | None = None,
          use_cache: bool = True) -> Space:
    """Encode ``texts`` with ``model`` into a :class:`~bioviz.space.Space`.

    Parameters
    ----------
    texts : sequence of str
    model : ModelSpec or str
        The model (text is parsed, :meth:`ModelSpec.of`).
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
