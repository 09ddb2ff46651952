"""The head of a head run, read from its files and applied to its input model's vectors.

The trainer exports a *head run* (residual, dan, cca, hierarchical without ``--finetune``,
any of them with a base weight) as a sentence-transformers directory: the input model's
own modules, a ``Normalize``, the head as ``Dense`` modules, and a final ``Normalize``
(:mod:`trainer.export`). Everything after the input model's modules is a few matrix
products, so a run's vectors are its input model's vectors (usually cached already) put
through this chain: seconds for a whole level instead of minutes of transformer.

:class:`HeadChain` reads only what it can apply exactly: ``Dense`` modules (ReLU, Tanh or
no activation, no residual) and ``Normalize`` modules. Anything else is refused with the
reason (:class:`NotAHeadChain`), and the run is then encoded through its whole model.
Weights that are damaged, of the wrong shape, not finite or so large that float32 overflows
are refused with a one-line :class:`~bioviz.errors.ModelError` when the run is read: no
whole-model fallback would serve them better.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from bioviz.models.load_errors import DAMAGED, cannot_load, quiet_foreign_pickle, weights_reason
from bioviz.models.vectors_formats import is_vectors_path
from bioviz.space import l2_normalise

HEAD_FILE = "head.safetensors"  # the raw head weights the trainer keeps in every head run
ROWS_PER_STEP = 1024  # rows through the chain at once: bounds memory (a hidden layer of 10k floats per row)
# The activations a Dense module may name (sentence-transformers stores the class's full name)
_ACTIVATIONS = {
    "torch.nn.modules.linear.Identity": "identity",
    "torch.nn.modules.activation.ReLU": "relu",
    "torch.nn.modules.activation.Tanh": "tanh",
}
_EMBEDDING = "sentence_embedding"  # the only feature a head chain reads and writes
# Largest norm a head's output may reach for a unit input: its squares (summed for the final
# Normalize) must stay below float32's maximum (3.4e38), or every vector becomes 0 or NaN.
MAX_OUTPUT_NORM = 1e18


class NotAHeadChain(ValueError):
    """A run whose modules after its input model cannot be applied as a head chain (the reason)."""


def module_kind(entry: dict) -> str:
    """The class name of a ``modules.json`` entry (``Dense`` for ``sentence_transformers....Dense``)."""
    return str(entry.get("type", "")).rsplit(".", 1)[-1]


def read_modules(path: str | Path) -> list[dict] | None:
    """The entries of ``path/modules.json``; None when there is none or it is not a list of objects."""
    try:
        modules = json.loads((Path(path) / "modules.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(modules, list) or not all(isinstance(m, dict) for m in modules):
        return None
    return modules


def input_module_kinds(path: str | Path) -> list[str] | None:
    """The module kinds the trainer copies from the input model at ``path`` (:func:`trainer.export._input_modules`).

    Its own modules, with a ``Normalize`` added when it has none at the end; a plain
    transformers checkpoint is a transformer with [CLS] pooling. None when ``path`` is no model.
    """
    path = Path(path)
    if path.is_file() and is_vectors_path(path):  # a vectors file: its rows are the input, unit already
        return ["Normalize"]
    modules = read_modules(path)
    if modules is None:
        return ["Transformer", "Pooling", "Normalize"] if (path / "config.json").is_file() else None
    kinds = [module_kind(m) for m in modules]
    return kinds if kinds and kinds[-1] == "Normalize" else [*kinds, "Normalize"]


def _activation(name) -> str:
    if name not in _ACTIVATIONS:
        raise NotAHeadChain(f"a Dense module with the activation {name!r}")
    return _ACTIVATIONS[name]


def _dense_weights(folder: Path) -> dict[str, np.ndarray]:
    """``linear.weight`` and ``linear.bias`` of a Dense folder (safetensors; older runs: a torch pickle).

    Raises
    ------
    ModelError
        Weights that are damaged, or a pickle that torch's safe loader refuses (never unpickled).
    """
    try:
        if (folder / "model.safetensors").is_file():
            from safetensors.numpy import load_file  # imported here: only head runs need it

            return load_file(str(folder / "model.safetensors"))
        if (folder / "pytorch_model.bin").is_file():
            import torch  # imported here: only runs saved by old sentence-transformers versions need it

            with quiet_foreign_pickle():
                state = torch.load(folder / "pytorch_model.bin", map_location="cpu", weights_only=True)
            if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor) for v in state.values()):
                raise cannot_load(folder.parent, f"{DAMAGED} ({folder.name})")
            return {key: value.numpy() for key, value in state.items()}
    except Exception as error:  # noqa: BLE001 - torch, safetensors and pickle raise their own types
        why = weights_reason(error)
        if why is None:
            raise
        raise cannot_load(folder.parent, f"{why} ({folder.name})") from None
    raise NotAHeadChain(f"no weights in {folder.name}")


@dataclass(frozen=True)
class DenseStep:
    """``activation(x @ weight.T + bias)``, as sentence-transformers' ``Dense`` computes it."""

    weight: np.ndarray  # (out, in) float32
    bias: np.ndarray | None  # (out,) float32
    activation: str  # identity, relu or tanh

    @classmethod
    def read(cls, folder: Path) -> DenseStep:
        """The Dense module saved in ``folder``.

        Raises
        ------
        NotAHeadChain
            A configuration this step cannot compute exactly, or missing weights.
        ModelError
            Weights that are damaged, do not have the configuration's shape, or are not finite.
        """
        try:
            dense = json.loads((folder / "config.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            raise NotAHeadChain(f"{folder.name}/config.json cannot be read") from None
        if not isinstance(dense, dict):
            raise NotAHeadChain(f"{folder.name}/config.json is not an object")
        if dense.get("use_residual") or dense.get("module_input_name", _EMBEDDING) != _EMBEDDING or \
                dense.get("module_output_name", _EMBEDDING) != _EMBEDDING:
            raise NotAHeadChain(f"{folder.name} is not a plain Dense module")
        activation = _activation(dense.get("activation_function", "torch.nn.modules.activation.Tanh"))
        shape = (dense.get("out_features"), dense.get("in_features"))
        if not all(isinstance(n, int) and not isinstance(n, bool) for n in shape):
            raise NotAHeadChain(f"{folder.name}/config.json gives no in_features and out_features")
        weights = _dense_weights(folder)
        weight = weights.get("linear.weight")
        bias = weights.get("linear.bias") if dense.get("bias", True) else None
        for name, array, expected in (("weight", weight, shape), ("bias", bias, shape[:1])):
            if name == "weight" and array is None:
                raise cannot_load(folder.parent, f"its Dense module {folder.name} has no weight")
            if array is not None and tuple(array.shape) != expected:
                raise cannot_load(folder.parent, f"its Dense {name} ({folder.name}) has shape {tuple(array.shape)}, "
                                                 f"expected {expected}")
            if array is not None and not np.isfinite(array).all():
                raise cannot_load(folder.parent, f"its Dense {name} ({folder.name}) holds NaN or infinite values")
        return cls(np.ascontiguousarray(weight, np.float32),
                   None if bias is None else np.ascontiguousarray(bias, np.float32), activation)

    def output_bound(self, input_norm: float) -> float:
        """An upper bound of this step's output norm for inputs of norm ``input_norm`` (float64).

        ``|W x + b| <= |W|_F |x| + |b|``; ReLU never grows a vector, tanh bounds every value by 1.
        """
        bound = float(np.linalg.norm(self.weight.astype(np.float64))) * input_norm
        if self.bias is not None:
            bound += float(np.linalg.norm(self.bias.astype(np.float64)))
        if self.activation == "tanh":
            bound = min(bound, float(np.sqrt(self.weight.shape[0])))
        return bound


class HeadChain:
    """The Dense and Normalize modules of a head run that follow its input model's modules.

    Parameters
    ----------
    steps : sequence of DenseStep or the string ``"normalize"``
        In order; the last one is a ``normalize``.
    """

    def __init__(self, steps) -> None:
        self.steps = tuple(steps)
        dense = [s for s in self.steps if isinstance(s, DenseStep)]
        if not dense or self.steps[-1] != "normalize":
            raise NotAHeadChain("a head chain is Dense modules ending with a Normalize")
        for before, after in zip(dense, dense[1:]):
            if before.weight.shape[0] != after.weight.shape[1]:
                raise NotAHeadChain("Dense modules of mismatched widths")
        self.in_dim, self.out_dim = int(dense[0].weight.shape[1]), int(dense[-1].weight.shape[0])

    @classmethod
    def read(cls, run_dir: str | Path, input_kinds: list[str]) -> HeadChain:
        """The modules of ``run_dir`` after those its input model contributed.

        Parameters
        ----------
        run_dir : path-like
            A head run's directory.
        input_kinds : list of str
            The input model's module kinds (:func:`input_module_kinds`); the run must start
            with exactly these.

        Raises
        ------
        NotAHeadChain
            With the reason: no head weights, modules that do not start with the input
            model's, or a module after them that is not a plain Dense or a Normalize.
        ModelError
            Dense weights that are damaged, of the wrong shape or not finite (weights so large
            that float32 overflows are refused by :meth:`apply`, on the vectors they give).
        """
        run_dir = Path(run_dir)
        if not (run_dir / HEAD_FILE).is_file():
            raise NotAHeadChain(f"no {HEAD_FILE} (a fine-tuned model, not a head)")
        modules = read_modules(run_dir)
        if modules is None:
            raise NotAHeadChain("modules.json cannot be read")
        kinds = [module_kind(m) for m in modules]
        if kinds[:len(input_kinds)] != input_kinds or len(kinds) <= len(input_kinds):
            raise NotAHeadChain(f"its modules ({', '.join(kinds)}) do not extend its input model's "
                                f"({', '.join(input_kinds)})")
        steps: list = []
        for entry, kind in zip(modules[len(input_kinds):], kinds[len(input_kinds):]):
            if kind == "Normalize":
                steps.append("normalize")
            elif kind == "Dense":
                steps.append(DenseStep.read(run_dir / str(entry.get("path", ""))))
            else:
                raise NotAHeadChain(f"a {kind} module after the input model's")
        chain = cls(steps)
        # Too large is judged on what the weights give (apply), not on a bound over every unit
        # input: an honest CCA fitted on a few names has huge weights in directions its inputs
        # never take, and its bound (1e34 on the tests' fixture) says nothing about its outputs.
        chain.source = run_dir
        return chain

    def output_bound(self) -> float:
        """An upper bound of the norm any step's output reaches from a unit input (the input model's vectors).

        Every sum in a matrix product is bounded by its output's norm, so below
        :data:`MAX_OUTPUT_NORM` neither a product nor a Normalize overflows in float32.
        """
        norm, largest = 1.0, 1.0
        for step in self.steps:
            norm = 1.0 if step == "normalize" else step.output_bound(norm)
            largest = max(largest, norm)
        return largest

    def apply(self, vectors: np.ndarray, rows_per_step: int = ROWS_PER_STEP) -> np.ndarray:
        """The run's vectors from its input model's: unit float32 rows.

        Uses torch when it is already imported (its matrix products are faster here), numpy
        otherwise (a fresh command-line process then does not pay torch's import).

        Parameters
        ----------
        vectors : array (n, in_dim)
            The input model's unit vectors.
        rows_per_step : int
            Rows computed at once.
        """
        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        if vectors.ndim != 2 or vectors.shape[1] != self.in_dim:
            raise ValueError(f"a head chain reads {self.in_dim}-dimensional vectors, not {vectors.shape}")
        out = np.empty((len(vectors), self.out_dim), dtype=np.float32)
        run = _run_torch if "torch" in sys.modules else _run_numpy
        for start in range(0, len(vectors), max(1, rows_per_step)):
            x = vectors[start:start + rows_per_step]
            for step in self.steps:  # one step at a time: an overflow is caught where it happens
                x = run((step,), x)
                largest = float(np.max(np.abs(x))) if x.size else 0.0
                if not largest < MAX_OUTPUT_NORM:  # NaN compares False too
                    raise cannot_load(getattr(self, "source", "a head run"), "its Dense weights are too large: "
                                      f"outputs up to {largest:.1e} overflow float32")
            out[start:start + rows_per_step] = x
        return l2_normalise(out)


def _run_numpy(steps, x: np.ndarray) -> np.ndarray:
    for step in steps:
        if step == "normalize":
            # as torch.nn.functional.normalize: x / max(|x|, 1e-12)
            x = x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)
            continue
        x = x @ step.weight.T
        if step.bias is not None:
            x += step.bias
        if step.activation == "relu":
            np.maximum(x, 0, out=x)
        elif step.activation == "tanh":
            np.tanh(x, out=x)
    return x


def _run_torch(steps, x: np.ndarray) -> np.ndarray:
    import torch  # already imported (see HeadChain.apply)
    from torch.nn import functional

    with torch.inference_mode():
        # A memory-mapped block is read-only; torch wants writable memory, so copy this one chunk.
        t = torch.from_numpy(x if x.flags.writeable else x.copy())
        for step in steps:
            if step == "normalize":
                t = functional.normalize(t, p=2, dim=1)
                continue
            t = functional.linear(t, torch.from_numpy(step.weight),
                                  None if step.bias is None else torch.from_numpy(step.bias))
            if step.activation == "relu":
                t = torch.relu(t)
            elif step.activation == "tanh":
                t = torch.tanh(t)
        return t.numpy()
