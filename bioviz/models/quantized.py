"""int8 ONNX Runtime backend for sentence-transformers models: faster encoding on CPU.

``bioviz.models.registry.backend_encoder(spec, "onnx-int8")`` gives an encoder whose transformer runs as a
dynamically quantized ONNX graph in ONNX Runtime (int8 weights per output channel, int8
activations quantized on the fly, one scale per token: :mod:`bioviz.models.per_token_int8`), while tokenisation and the modules after the
transformer (pooling, dense layers, normalisation) stay sentence-transformers' own, so the
vectors are the model's up to the quantization error (docs/scale.md measures the drift).

Why not ``SentenceTransformer(path, backend="onnx")``: that path goes through optimum-onnx,
whose only release (0.1.0) needs transformers < 4.58, and bioviz runs on transformers 5
(sentence-transformers 6 needs it). The export here uses torch's TorchScript ONNX exporter
and ``onnxruntime.quantization.quantize_dynamic``: onnxruntime (and onnx, which the quantizer
needs) is the only dependency it adds.

Each model is exported once into ``BIOVIZ_HOME/onnx/<fingerprint>/`` and reused by every
later process. The export is written into a temporary folder and renamed into place (a crash
never leaves half an export), under a file lock (two processes never export the same model
twice), and checked on reuse against the checksum it recorded (a damaged export is rebuilt).

The vectors of each backend are cached under their own fingerprint (:func:`backend_fingerprint`),
so torch and int8 vectors of the same model never mix in the vector cache.
"""

from __future__ import annotations

import copy
import hashlib
import importlib.util
import json
import logging
import shutil
import tempfile
import threading
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from bioviz.errors import ModelError
from bioviz.models.encoders import Encoder, HeadRunEncoder, SentenceTransformerEncoder, load_sentence_transformer, \
    token_lengths
from bioviz.models.model_files import dimension_from_files
from bioviz.models.per_token_int8 import per_token_scales
from bioviz.paths import home
from bioviz.space import l2_normalise

logger = logging.getLogger(__name__)

BACKENDS = ("torch", "onnx-int8", "openvino-int8")
# Bump when the export or the quantization changes the vectors it gives: it is part of the
# fingerprint, so vectors cached by an older export are never served for a newer one.
# ort-int8-2: activations quantized per token (bioviz.models.per_token_int8), not per batch.
QUANT_SCHEMA = "ort-int8-2"
MODEL_FILE = "model_int8.onnx"
# 7-bit weights: x86's u8 x s8 integer kernels add pairs of products in 16 bits, which saturate
# (255 * 127 * 2 > 32,767) and gave some outputs wrong by whole units; 255 * 63 * 2 always fits.
REDUCE_RANGE = True
META_FILE = "export.json"
# The tokenizer outputs a BERT-style transformer takes; a model without token types
# (RoBERTa, DistilBERT) is exported with fewer inputs.
_INPUTS = ("input_ids", "attention_mask", "token_type_ids")
_EXPORT_TEXTS = ["a short name", "a somewhat longer biomedical name of a disorder, for tracing"]


def backend_fingerprint(fingerprint: str, backend: str) -> str:
    """Fingerprint of a model's vectors under ``backend`` (the model's own for ``torch``)."""
    if backend == "torch":
        return fingerprint
    return hashlib.sha256(f"{fingerprint}|{backend}|{QUANT_SCHEMA}".encode()).hexdigest()[:32]


def exports_dir() -> Path:
    """Where exports live: ``BIOVIZ_HOME/onnx`` (not created here)."""
    return home() / "onnx"


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 22), b""):
            digest.update(block)
    return digest.hexdigest()


def read_export(folder: Path) -> dict | None:
    """The export's record when ``folder`` holds a complete, undamaged export, else None."""
    try:
        meta = json.loads((folder / META_FILE).read_text(encoding="utf-8"))
        if meta.get("schema") != QUANT_SCHEMA or _sha256(folder / MODEL_FILE) != meta.get("sha256"):
            return None
        if not isinstance(meta.get("inputs"), list):
            return None
        return meta
    except (OSError, ValueError, AttributeError):
        return None


class _DropQuantizerRecords(logging.Filter):
    """Drops onnxruntime.quantization's own records, which it logs on the root logger."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "onnxruntime" not in record.pathname


@contextmanager
def _quiet_quantizer() -> Iterator[None]:
    root = logging.getLogger()
    dropped = _DropQuantizerRecords()
    root.addFilter(dropped)
    try:
        yield
    finally:
        root.removeFilter(dropped)


def _export(base: SentenceTransformerEncoder, folder: Path) -> None:
    """Write the int8 graph of ``base``'s transformer and its record into ``folder``."""
    import onnx  # imported here: only an export needs it
    import torch  # imported here: seconds to import, and only an export needs it
    from onnxruntime.quantization import QuantType, quantize_dynamic

    model = load_sentence_transformer(str(base.path), device="cpu")
    transformer = model[0]
    auto_model = getattr(transformer, "auto_model", None)
    if auto_model is None:
        raise ModelError(f"{base.label}: onnx-int8 needs a model whose first module is a transformer")
    # Eager attention traces into one graph valid for every batch and length; the fused SDPA
    # path has shape-dependent branches that the tracer would freeze at the example's shape.
    auto_model.set_attn_implementation("eager")
    features = model.preprocess(_EXPORT_TEXTS)
    inputs = [name for name in _INPUTS if name in features]

    class TokenEmbeddings(torch.nn.Module):
        """The transformer's last hidden states, called with positional tensors (what the exporter traces)."""

        def __init__(self) -> None:
            super().__init__()
            self.inner = auto_model

        def forward(self, *tensors):
            return self.inner(**dict(zip(inputs, tensors))).last_hidden_state

    fp32 = folder / "model_fp32.onnx"
    axes = {name: {0: "batch", 1: "tokens"} for name in [*inputs, "token_embeddings"]}
    # The tracer's and the quantizer's advice (TracerWarning, "consider pre-processing") is for
    # whoever writes an exporter, not for a user of the command or the page: kept out of their output
    with torch.no_grad(), warnings.catch_warnings(), _quiet_quantizer():
        warnings.simplefilter("ignore")
        torch.onnx.export(TokenEmbeddings().eval(), tuple(features[name] for name in inputs), str(fp32),
                          dynamo=False, input_names=inputs, output_names=["token_embeddings"],
                          dynamic_axes=axes, opset_version=17)
        # Per-channel int8 weights on the matrix products only: per-tensor scales, or quantized
        # embedding lookups, cost minilm about 0.03-0.08 of cosine against fp32; this keeps 0.99.
        dynamic = folder / "model_dynamic.onnx"
        quantize_dynamic(str(fp32), str(dynamic), weight_type=QuantType.QInt8, per_channel=True,
                         reduce_range=REDUCE_RANGE, op_types_to_quantize=["MatMul"])
    fp32.unlink()
    # One activation scale per token, not per batch: a name's vector is the same alone or among others
    onnx.save(per_token_scales(onnx.load(str(dynamic))), str(folder / MODEL_FILE))
    dynamic.unlink()
    meta = {"schema": QUANT_SCHEMA, "model": base.label, "model_fingerprint": base.fingerprint,
            "inputs": inputs, "sha256": _sha256(folder / MODEL_FILE)}
    (folder / META_FILE).write_text(json.dumps(meta, indent=1), encoding="utf-8")


def ensure_export(base: SentenceTransformerEncoder) -> tuple[Path, dict]:
    """The int8 export of ``base``, made now if there is none (or only a damaged one).

    Returns
    -------
    (folder, record)
        ``BIOVIZ_HOME/onnx/<fingerprint>`` and its ``export.json``.

    Raises
    ------
    ModelError
        When the model cannot be exported (one line: which model and why).
    """
    from filelock import FileLock

    fingerprint = backend_fingerprint(base.fingerprint, "onnx-int8")
    root = exports_dir()
    folder = root / fingerprint
    meta = read_export(folder)
    if meta is not None:
        return folder, meta
    root.mkdir(parents=True, exist_ok=True)
    with FileLock(str(root / f"{fingerprint}.lock")):
        meta = read_export(folder)  # another process may have exported it while we waited
        if meta is not None:
            return folder, meta
        if folder.exists():
            logger.warning("the int8 export of %s is damaged or incomplete: exporting it again", base.label)
            shutil.rmtree(folder)
        started = time.perf_counter()
        scratch = Path(tempfile.mkdtemp(prefix=f".{fingerprint}.", dir=root))
        try:
            _export(base, scratch)
            scratch.rename(folder)
        except ModelError:
            raise
        except (RuntimeError, ValueError, TypeError, AttributeError, ImportError) as error:
            first = (str(error).strip().splitlines() or [type(error).__name__])[0]
            raise ModelError(f"{base.label} cannot be exported to int8 ONNX: {first[:200]}") from None
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        logger.info("exported %s to int8 ONNX in %.1fs", base.label, time.perf_counter() - started)
    meta = read_export(folder)
    if meta is None:
        raise ModelError(f"the int8 export of {base.label} in {folder.name} could not be read back")
    return folder, meta


def _session(folder: Path):
    """An ONNX Runtime session of the export in ``folder``, on the CPU."""
    import onnxruntime as ort
    import torch

    options = ort.SessionOptions()
    # as many threads as torch uses, so the two backends compare like for like; no spinning
    # between operators: waiting threads that spin steal cores from the app and other jobs
    options.intra_op_num_threads = torch.get_num_threads()
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return ort.InferenceSession(str(folder / MODEL_FILE), options, providers=["CPUExecutionProvider"])


class OnnxInt8Encoder(Encoder):
    """A sentence-transformers model whose transformer runs as an int8 ONNX Runtime graph.

    The export is made (or checked) on first use, not at construction, so a fully cached
    request needs only the fingerprint, as with :class:`SentenceTransformerEncoder`.

    Parameters
    ----------
    base : SentenceTransformerEncoder
        The model in torch: its path, fingerprint and label.
    fallback : bool
        When the export or its session fails (onnxruntime missing, an export error), encode
        with ``base`` in torch after one logged warning, and take ``base``'s fingerprint and
        label from then on, so the torch vectors are cached as torch's. The default backend
        (:func:`default_int8`) sets it: a page never fails for want of int8. ``--backend
        onnx-int8`` does not: asked for by name, a failure is the error.
    """

    backend = "onnx-int8"

    def __init__(self, base: SentenceTransformerEncoder, fallback: bool = False) -> None:
        self.base = base
        self.fallback = fallback
        self.fallen_back = False
        self.spec = base.spec
        self.label = f"{base.label} · onnx-int8"
        self.path = base.path
        self.fingerprint = backend_fingerprint(base.fingerprint, self.backend)
        self._session = None
        self._inputs: list[str] = []
        self._model = None
        self._lock = threading.Lock()

    @property
    def dim(self) -> int:
        """Output dimensionality (from the model's files when they say; else the weights)."""
        return dimension_from_files(self.path) or self.base.dim

    def _load(self):
        """(session, model), or (None, None) once this encoder has fallen back to torch."""
        with self._lock:
            if self._session is None and not self.fallen_back:
                try:
                    self._start()
                except Exception as error:  # noqa: BLE001 - any failure of int8 must leave torch working
                    if not self.fallback:
                        raise
                    self._fall_back(error)
        return self._session, self._model

    def _fall_back(self, error: Exception) -> None:
        first = (str(error).strip().splitlines() or [type(error).__name__])[0][:200]
        logger.warning("%s: int8 is not available (%s); encoding with torch instead", self.base.label, first)
        # from now on this is the torch model: its vectors are cached under torch's fingerprint
        # (encode_cached reads the fingerprint again when it stores what was encoded)
        self.fallen_back = True
        self.backend = "torch"
        self.fingerprint = self.base.fingerprint
        self.label = self.base.label

    def _start(self) -> None:
        """Export (or check) the model and open its session: what the first encoding needs."""
        folder, meta = ensure_export(self.base)
        try:
            session = _session(folder)
        except Exception as error:  # noqa: BLE001 - onnxruntime raises its own untyped errors
            # checksummed, so only a change of onnxruntime can get here: a fresh export fixes it
            logger.warning("int8 export of %s does not load (%s): exporting it again", self.label, error)
            shutil.rmtree(folder, ignore_errors=True)
            folder, meta = ensure_export(self.base)
            session = _session(folder)
        # tokenizer and the modules after the transformer, in torch on the CPU (cheap)
        self._model = load_sentence_transformer(str(self.path), device="cpu")
        self._inputs = list(meta["inputs"])
        self._session = session

    def _encode(self, texts: list[str], batch_size: int) -> np.ndarray:
        import torch

        session, model = self._load()
        if session is None:
            return self.base._encode(texts, batch_size)
        out = []
        for start in range(0, len(texts), batch_size):
            features = model.preprocess(texts[start:start + batch_size])
            feeds = {name: features[name].numpy().astype(np.int64) for name in self._inputs}
            (tokens,) = session.run(["token_embeddings"], feeds)
            features = {"token_embeddings": torch.from_numpy(tokens), "attention_mask": features["attention_mask"]}
            with torch.no_grad():
                for module in list(model)[1:]:
                    features = module(features)
            out.append(features["sentence_embedding"].float().numpy())
        return l2_normalise(np.concatenate(out).astype(np.float32))

    def _lengths(self, texts: list[str]) -> list[int]:
        model = self._load()[1]
        return self.base._lengths(texts) if model is None else token_lengths(model, texts)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.label!r}, fingerprint={self.fingerprint[:12]})"


_ENCODERS: dict[str, Encoder] = {}
_LOCK = threading.Lock()


def _onnx_int8(encoder: Encoder) -> Encoder:
    if isinstance(encoder, HeadRunEncoder):
        # a head run: its input model runs in int8, its head (a few matrix products) stays as it is
        chained = copy.copy(encoder)
        chained.base = _onnx_int8(encoder.base)
        chained.fingerprint = backend_fingerprint(encoder.fingerprint, "onnx-int8")
        chained.label = f"{encoder.label} · onnx-int8"
        return chained
    if not isinstance(encoder, SentenceTransformerEncoder):
        raise ModelError(f"{encoder.label} is not a sentence-transformers model: onnx-int8 applies to "
                         "sentence-transformers models and runs only (use --backend torch)")
    if not (encoder.path / "modules.json").is_file():
        raise ModelError(f"{encoder.label} is a plain transformers checkpoint: onnx-int8 needs a "
                         "sentence-transformers directory (modules.json); use --backend torch")
    return OnnxInt8Encoder(encoder)


def check_named_backend(backend: str) -> None:
    """Refuse a backend bioviz does not offer, in one line (before any model is loaded).

    Raises
    ------
    ModelError
        An unknown backend, or ``openvino-int8`` (named, not offered yet).
    """
    if backend not in BACKENDS:
        raise ModelError(f"unknown backend {backend!r}: use one of {', '.join(BACKENDS)}")
    if backend == "openvino-int8":
        raise ModelError("openvino-int8 is not available in this version of bioviz (see docs/scale.md): "
                         "use --backend onnx-int8")


def named_backend(encoder: Encoder, backend: str) -> Encoder:
    """``encoder`` (the model in torch) under a backend named by the user, loaded once per process.

    What :func:`bioviz.models.registry.backend_encoder` gives: unlike the default
    (:func:`default_int8`), a model the backend cannot run is an error, and so is a failed export.

    Raises
    ------
    ModelError
        An unknown backend, or a model the backend cannot run (char-tfidf, a plain transformers
        checkpoint).
    """
    check_named_backend(backend)
    if backend == "torch":
        return encoder
    with _LOCK:
        key = backend_fingerprint(encoder.fingerprint, backend)
        if key not in _ENCODERS:
            _ENCODERS[key] = _onnx_int8(encoder)
        return _ENCODERS[key]


_WARNED: set[str] = set()


def _first_module_is_transformer(path: Path) -> bool:
    """Whether the sentence-transformers directory at ``path`` starts with a Transformer module."""
    try:
        modules = json.loads((path / "modules.json").read_text(encoding="utf-8"))
        first = sorted(modules, key=lambda module: int(module.get("idx", 0)))[0]
        return str(first.get("type", "")).endswith(".Transformer")
    except (OSError, ValueError, TypeError, AttributeError, IndexError):
        return False


def _onnx_runtime_missing() -> str | None:
    """The first package int8 needs that is not installed (checked without importing it), else None."""
    for package in ("onnxruntime", "onnx"):
        if importlib.util.find_spec(package) is None:
            return package
    return None


def default_int8(encoder: Encoder) -> Encoder:
    """``encoder`` under onnx-int8 as the default backend, where int8 applies; else ``encoder``.

    int8 applies to sentence-transformers models whose first module is a transformer: the
    bundled models, model directories and hub ids. Everything else is returned as it is:

    - char-tfidf and vectors files (no transformer to quantize);
    - trained runs, head or fine-tuned: a head was trained on its input model's fp32 vectors
      and a fine-tuned run was selected in fp32; int8 was judged on the bundled model only, so
      a run keeps the backend it was trained and judged with (``--backend onnx-int8`` still
      runs it in int8 when asked for by name);
    - any model when onnxruntime or onnx is not installed (one logged warning).

    The int8 encoder falls back to torch if its export fails when it first encodes
    (:class:`OnnxInt8Encoder` ``fallback``). It is loaded once per process and model.
    """
    if type(encoder) is not SentenceTransformerEncoder or encoder.model_spec.kind == "run":
        return encoder
    if not _first_module_is_transformer(encoder.path):
        return encoder
    missing = _onnx_runtime_missing()
    if missing is not None:
        if missing not in _WARNED:
            _WARNED.add(missing)
            logger.warning("%s is not installed: encoding with torch, not onnx-int8 (pip install %s)",
                           missing, missing)
        return encoder
    with _LOCK:
        key = f"default|{encoder.fingerprint}"
        if key not in _ENCODERS:
            _ENCODERS[key] = OnnxInt8Encoder(encoder, fallback=True)
        return _ENCODERS[key]
