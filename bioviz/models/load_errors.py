"""Why a model's files cannot be served, in one line: foreign module types, damaged weights, non-finite vectors.

A model directory comes from anywhere (a download, a copy, a hand edit), so what its files
hold is input: a ``modules.json`` naming a class outside sentence-transformers, weights that
are a pickle or truncated, a Dense weight of the wrong shape, weights that are NaN or so
large that float32 overflows. Each is a :class:`~bioviz.errors.ModelError` with one line,
never a traceback from torch or safetensors, and vectors that are not finite are never
cached or returned (:func:`check_finite`).
"""

from __future__ import annotations

import contextlib
import pickle
import warnings

import numpy as np
from safetensors import SafetensorError

from bioviz.errors import ModelError

# sentence-transformers imports a module class named outside its own package only with
# trust_remote_code (which bioviz never passes): such a class is third-party code.
ST_NAMESPACE = "sentence_transformers."
DAMAGED = "its weights are damaged or not in safetensors form"


def cannot_load(path, why: str) -> ModelError:
    """The error for a model at ``path`` that cannot be loaded: ``cannot load model from PATH: WHY``."""
    return ModelError(f"cannot load model from {path}: {why}")


def foreign_module_type(modules: list[dict]) -> str | None:
    """The first module type in ``modules`` (``modules.json`` entries) outside sentence-transformers, if any.

    Examples
    --------
    >>> foreign_module_type([{"type": "sentence_transformers.models.Pooling"}, {"type": "os.system"}])
    'os.system'
    >>> foreign_module_type([{"type": "sentence_transformers.models.Normalize"}]) is None
    True
    """
    for module in modules:
        kind = module.get("type")
        if not isinstance(kind, str) or not kind.startswith(ST_NAMESPACE):
            return str(kind)
    return None


def foreign_module_reason(kind: str) -> str:
    """What to say about a module type that bioviz refuses to load."""
    return (f"modules.json names module type {kind!r}, which bioviz does not load: "
            f"only sentence-transformers' own modules")


@contextlib.contextmanager
def quiet_foreign_pickle():
    """Silence torch's warning about a pickle's protocol: it precedes the refusal of a foreign pickle.

    The refusal itself becomes one line (:func:`weights_reason`); the warning would be a second
    line on the command line's stderr.
    """
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Detected pickle protocol", category=UserWarning)
        yield


@contextlib.contextmanager
def no_loading_bar():
    """Hide transformers' "Loading weights" bar while a model loads.

    transformers 5 draws it on stderr for every load: noise in a server log, and a second line
    before a command line's one-line error (``--quiet`` then prints more than the error). The
    library's own bars report what takes long (encoding, training); a load takes a second.
    """
    from transformers.utils import logging as hf_logging

    was_on = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if was_on:
            hf_logging.enable_progress_bar()


def weights_reason(error: BaseException) -> str | None:
    """The one-line reason for an error raised while weights were read, or None when it is about something else.

    A pickle that torch's safe loader refuses (a foreign pickle, possibly one that would run
    code), a truncated pickle or zip, a safetensors file that is truncated or random bytes: all
    ``DAMAGED``. A ``size mismatch`` is weights that do not fit the model's configuration.
    Other RuntimeErrors (out of memory, a device error) are not about the files: None.
    """
    if isinstance(error, (pickle.UnpicklingError, EOFError, SafetensorError)):
        return DAMAGED
    if isinstance(error, RuntimeError):
        text = str(error)
        mismatch = [line.strip() for line in text.splitlines() if "size mismatch" in line]
        if mismatch:
            return f"its weights do not match its configuration ({mismatch[0].rstrip('.')})"
        if "PytorchStreamReader" in text or "zip archive" in text:
            return DAMAGED
    return None


def check_finite(vectors: np.ndarray, label: str) -> None:
    """Refuse vectors with NaN or infinite values, before they are cached or returned.

    Parameters
    ----------
    vectors : numpy.ndarray
        Rows an encoder has just produced.
    label : str
        The model's readable name, for the message.

    Raises
    ------
    ModelError
        If any value is not finite (NaN scores are not even valid JSON).
    """
    finite = np.isfinite(vectors)
    if not finite.all():
        bad = int((~finite.reshape(len(vectors), -1).all(axis=1)).sum()) if len(vectors) else 0
        raise ModelError(f"{label} gave vectors with NaN or infinite values for {bad} of {len(vectors)} names: "
                         f"its weights are damaged (nothing was cached)")
