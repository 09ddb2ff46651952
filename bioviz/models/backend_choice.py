"""Which backend encodes by default: the one place that decides it.

``torch`` runs a model as trained; ``onnx-int8`` runs its transformer as an int8 ONNX Runtime
graph (:mod:`bioviz.models.quantized`). int8 was judged on the development files with the
selection protocol (docs/scale.md, "int8 judged on the development files"): every figure of
med-minilm inside fp32's interval, about 2.5x the names per second on a CPU. So, by issue 33:

1. ``BIOVIZ_BACKEND`` (``torch`` or ``onnx-int8``) when it is set (fp32 is one variable away);
2. else ``torch`` when ``BIOVIZ_EXECUTOR=ray``: the cluster's workers load a model as trained,
   by name, and the int8 export lives in this machine's home only;
3. else ``onnx-int8`` when torch would encode on the CPU (no CUDA or MPS device);
4. else ``torch`` (a GPU is faster than int8 on a CPU, and int8 on a GPU was never measured).

A command's ``--backend`` wins over all three, for the length of the command
(:func:`backend_override`). Names and queries are encoded by the same backend because every
encoder of a page, a command or a job comes through
:func:`bioviz.models.registry.load_encoder`, which asks :func:`default_backend`.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from bioviz.errors import ModelError

BACKEND_ENV = "BIOVIZ_BACKEND"
EXECUTOR_ENV = "BIOVIZ_EXECUTOR"  # bioviz.ray_cluster.EXECUTOR_ENV (not imported: that module is heavier)
# What the default may be: openvino-int8 is named by quantized.BACKENDS but not offered yet.
CHOICES = ("torch", "onnx-int8")

_OVERRIDE: list[str] = []  # a stack: the innermost --backend of a command (module-wide so threads see it)
_LOCK = threading.Lock()


def check_backend(name: str, where: str = BACKEND_ENV) -> str:
    """``name`` when it is a backend the default may be.

    Raises
    ------
    ModelError
        One line: the bad value and the values allowed.
    """
    if name not in CHOICES:
        raise ModelError(f"{where}={name!r} is not a backend: use {' or '.join(CHOICES)}")
    return name


def _on_cpu() -> bool:
    from bioviz.models.encoders import device  # here: the CLI imports this module at start, `levels` never encodes

    return device() == "cpu"


def default_backend() -> str:
    """The backend that encodes names and queries unless a command or a caller names one.

    Returns
    -------
    str
        ``torch`` or ``onnx-int8`` (see the module's docstring for the order of the rules).

    Raises
    ------
    ModelError
        When ``BIOVIZ_BACKEND`` holds anything else (one line).
    """
    with _LOCK:
        if _OVERRIDE:
            return _OVERRIDE[-1]
    chosen = os.environ.get(BACKEND_ENV, "").strip()
    if chosen:
        return check_backend(chosen)
    if os.environ.get(EXECUTOR_ENV, "").strip().lower() == "ray":
        return "torch"
    return "onnx-int8" if _on_cpu() else "torch"


@contextmanager
def backend_override(name: str | None) -> Iterator[None]:
    """Encode with ``name`` inside the block (a command's ``--backend``); None changes nothing.

    A module-wide setting rather than a context variable: the threads a command starts to
    encode must see it too. Commands run one at a time in a process, so nothing else shares it.
    """
    if name is None:
        yield
        return
    check_backend(name, "--backend")
    with _LOCK:
        _OVERRIDE.append(name)
    try:
        yield
    finally:
        with _LOCK:
            _OVERRIDE.pop()
