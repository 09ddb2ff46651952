"""The papers' encoders as heads over base-model vectors, and the CCA constraint.

- :class:`ResidualEncoder` (fewshot-biomedical-names §2.1): ``f(n) = (enc(u_n) + u_n) / 2``.
- :class:`DANEncoder` (higher-level-semantics §3.1): ``f(n) = enc(u_n)``.
- :class:`LinearMap` holding a fitted CCA projection (conceptual-grounding §3.2); a CCA+DAN
  encoder is a ``LinearMap`` followed by a DAN.
- :class:`BaseMix`: any of them mixed with its input, ``(1 - w) f(u) / s + w u``, to keep
  what the base model knew between classes.

``enc`` is one hidden ReLU layer with dropout. Each head can be rewritten exactly as
sentence-transformers ``Dense`` modules (:meth:`to_dense_modules`), so an exported run is
an ordinary sentence-transformers model that loads without ``trust_remote_code``.
"""

from __future__ import annotations

import logging

import numpy as np
import torch
from torch import nn

logger = logging.getLogger(__name__)


def _dense(in_features: int, out_features: int, weight: torch.Tensor, bias: torch.Tensor, relu: bool):
    """A sentence-transformers Dense module with the given weights."""
    from sentence_transformers.sentence_transformer.modules import Dense

    module = Dense(in_features, out_features, activation_function=nn.ReLU() if relu else nn.Identity())
    with torch.no_grad():
        module.linear.weight.copy_(weight.detach().float().cpu())
        module.linear.bias.copy_(bias.detach().float().cpu())
    return module


class FeedForward(nn.Module):
    """``enc``: Linear -> ReLU -> Dropout -> Linear (one hidden layer, as all papers use)."""

    def __init__(self, dim: int, hidden: int, dropout: float = 0.5, out_dim: int | None = None):
        super().__init__()
        self.hidden_layer = nn.Linear(dim, hidden)
        self.dropout = nn.Dropout(dropout)
        self.output_layer = nn.Linear(hidden, out_dim or dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.output_layer(self.dropout(torch.relu(self.hidden_layer(x))))

    @torch.no_grad()
    def start_at_identity(self) -> "FeedForward":
        """Start training from ``enc(x) = x`` instead of a random map.

        The first ``2 * dim`` hidden units become ``relu(x)`` and ``relu(-x)`` and the output
        layer reads ``relu(x) - relu(-x) = x`` from them; the other hidden units keep their
        random weights with zero output weights, so they start silent but get gradients.
        Why: trained on a few hundred names, a randomly initialised head never relearns the
        base space on names it has not seen (relatedness pairs, other levels), although the
        contextual and grounding objectives ask for it; starting there keeps it. Dropout is
        inverted, so the identity holds in expectation while training and exactly at
        inference.

        Returns
        -------
        FeedForward
            ``self``, for chaining.

        Raises
        ------
        ValueError
            If input and output widths differ or the hidden layer is narrower than ``2 * dim``.
        """
        d, h = self.hidden_layer.in_features, self.hidden_layer.out_features
        if self.output_layer.out_features != d:
            raise ValueError("an identity start needs the output as wide as the input")
        if h < 2 * d:
            raise ValueError(f"an identity start needs hidden >= 2 x {d} = {2 * d} (got {h})")
        eye = torch.eye(d)
        self.hidden_layer.weight[: 2 * d] = torch.cat([eye, -eye])
        self.hidden_layer.bias[: 2 * d] = 0
        self.output_layer.weight.zero_()
        self.output_layer.weight[:, : 2 * d] = torch.cat([eye, -eye], dim=1)
        self.output_layer.bias.zero_()
        return self


class Head(nn.Module):
    """A head that sentence-transformers can run: its function as ``a * chain(u) + b * u``.

    Subclasses give :meth:`linear_form`; :meth:`to_dense_modules` turns it into standard
    ``Dense`` modules (:func:`dense_modules`), so mixing a head with its input never carries
    the input through the layers twice.
    """

    def linear_form(self) -> tuple[list, float, float]:
        """``(modules, a, b)``: Dense modules computing ``chain`` from ``u``, and the coefficients."""
        raise NotImplementedError

    def to_dense_modules(self) -> list:
        """Dense modules computing exactly the head's function (at inference)."""
        return dense_modules(self)


class ResidualEncoder(Head):
    """``f(n) = (enc(u_n) + u_n) / 2``: the encoder updates rather than replaces ``u_n``.

    Parameters
    ----------
    dim : int
        Dimensionality of the base vectors (and of the output).
    hidden : int
        Width of the hidden layer (the fewshot paper tunes it to 9,600).
    dropout : float
        Dropout on the hidden layer (0.5 in the papers).
    """

    def __init__(self, dim: int, hidden: int = 9600, dropout: float = 0.5):
        super().__init__()
        self.enc = FeedForward(dim, hidden, dropout)

    def forward(self, u: torch.Tensor) -> torch.Tensor:
        return (self.enc(u) + u) / 2.0

    def linear_form(self) -> tuple[list, float, float]:
        """``enc`` with weights 1/2 and 1/2."""
        return _enc_dense_modules(self.enc), 0.5, 0.5


class DANEncoder(Head):
    """``f(n) = enc(u_n)`` (higher-level-semantics §3.1), output as wide as the input."""

    def __init__(self, dim: int, hidden: int = 9600, dropout: float = 0.5):
        super().__init__()
        self.enc = FeedForward(dim, hidden, dropout)

    def forward(self, u: torch.Tensor) -> torch.Tensor:
        return self.enc(u)

    def linear_form(self) -> tuple[list, float, float]:
        """``enc`` alone."""
        return _enc_dense_modules(self.enc), 1.0, 0.0


class LinearMap(Head):
    """A fixed affine map ``x @ weight + bias`` (a fitted CCA projection); not trained."""

    def __init__(self, weight: np.ndarray, bias: np.ndarray):
        super().__init__()
        self.register_buffer("weight", torch.as_tensor(np.asarray(weight), dtype=torch.float32))
        self.register_buffer("bias", torch.as_tensor(np.asarray(bias), dtype=torch.float32))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x @ self.weight + self.bias

    def linear_form(self) -> tuple[list, float, float]:
        """One Dense module without activation."""
        d_in, d_out = self.weight.shape
        return [_dense(d_in, d_out, self.weight.T, self.bias, relu=False)], 1.0, 0.0


class Stack(Head):
    """Heads applied in order (CCA then DAN); exported as the concatenation of their Dense modules."""

    def __init__(self, *parts: Head):
        super().__init__()
        self.parts = nn.ModuleList(parts)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for part in self.parts:
            x = part(x)
        return x

    def linear_form(self) -> tuple[list, float, float]:
        """Every part's exact Dense modules, in order (each part's own input is carried within it)."""
        return [module for part in self.parts for module in dense_modules(part)], 1.0, 0.0


def dense_modules(head: Head) -> list:
    """A head's exact Dense modules: its chain, with the input carried alongside when it has a share."""
    modules, head_weight, input_weight = head.linear_form()
    if head_weight == 1 and input_weight == 0:
        return modules
    return with_input_path(modules, head_weight, input_weight)


def _enc_dense_modules(enc: FeedForward) -> list:
    """``enc``'s two layers as Dense modules (ReLU, then linear)."""
    hidden, output = enc.hidden_layer, enc.output_layer
    return [_dense(hidden.in_features, hidden.out_features, hidden.weight, hidden.bias, relu=True),
            _dense(output.in_features, output.out_features, output.weight, output.bias, relu=False)]


def with_input_path(modules: list, head_weight: float, input_weight: float) -> list:
    """Dense modules computing ``head_weight * f(u) + input_weight * u``, where ``modules`` compute ``f``.

    sentence-transformers runs modules in a chain, with no skip connection, so the input
    ``u`` travels alongside ``f``'s activations: as ``u`` itself through linear modules and
    as ``relu(u)`` and ``relu(-u)`` (whose difference is ``u``) through ReLU modules. The
    result is exact and made of built-in ``Dense`` modules only.

    Parameters
    ----------
    modules : list of Dense
        ``f`` as a chain whose first module reads ``u`` and whose last one is linear, with
        an output as wide as ``u``.
    head_weight, input_weight : float
        The coefficients of ``f(u)`` and ``u``.

    Raises
    ------
    ValueError
        If the last module has an activation (the sum could not be formed linearly).
    """
    dim = modules[0].linear.in_features
    eye = torch.eye(dim)
    out_modules = []
    carry_kind = "signed"  # what carries u into the current module: u itself, or relu(u) and relu(-u)
    carry_start = 0  # its first column in the module's input (the input itself for the first module)
    for position, module in enumerate(modules):
        weight = module.linear.weight.detach().float().cpu()
        bias = module.linear.bias.detach().float().cpu()
        n_out, n_in = weight.shape
        total_in = n_in if position == 0 else n_in + (dim if carry_kind == "signed" else 2 * dim)
        # ``read`` turns the carried columns into u (signed) or into relu(u), relu(-u) rows.
        read = eye if carry_kind == "signed" else torch.cat([eye, -eye], dim=1)
        last = position == len(modules) - 1
        relu = isinstance(module.activation_function, nn.ReLU)
        if last:
            if relu:
                raise ValueError("the last module must be linear to add the input to its output")
            w = torch.zeros(n_out, total_in)
            w[:, :n_in] = head_weight * weight
            w[:, carry_start : carry_start + read.shape[1]] += input_weight * read
            out_modules.append(_dense(total_in, n_out, w, head_weight * bias, relu=False))
            break
        carry_rows = torch.cat([read, -read]) if relu else read
        if relu and carry_kind == "split":  # relu(u) and relu(-u) are non-negative: pass them on as they are
            carry_rows = torch.eye(2 * dim)
        w = torch.zeros(n_out + carry_rows.shape[0], total_in)
        w[:n_out, :n_in] = weight
        w[n_out:, carry_start : carry_start + carry_rows.shape[1]] = carry_rows
        b = torch.cat([bias, torch.zeros(carry_rows.shape[0])])
        out_modules.append(_dense(total_in, w.shape[0], w, b, relu=relu))
        carry_kind, carry_start = ("split" if relu else "signed"), n_out
    return out_modules


class BaseMix(Head):
    """``g(u) = (1 - w) f(u) / s + w u``: a trained head pulled back towards its input.

    The papers' heads move names so that classes separate; what they do between classes
    is what relatedness benchmarks see, and trained on a few hundred names they lose much
    of the input model's order there. Mixing the input back in, with ``w`` chosen on the
    validation split (:func:`trainer.base_mix.choose_base_weight`), trades some class
    separation for that order. ``s`` is the head's mean output norm on the training names,
    so ``w`` means the same for heads whose outputs have different scales. ``w = 0`` is the
    head itself; the residual head of fewshot-biomedical-names is ``enc`` mixed with
    ``w = 1/2``.

    Parameters
    ----------
    head : Head
        A trained head (input and output equally wide).
    weight : float
        ``w`` in ``[0, 1]``.
    scale : float
        ``s > 0``.
    """

    def __init__(self, head: Head, weight: float, scale: float = 1.0):
        super().__init__()
        if not 0 <= weight <= 1 or scale <= 0:
            raise ValueError(f"base weight must be in [0, 1] and scale positive (got {weight}, {scale})")
        self.head = head
        self.weight, self.scale = float(weight), float(scale)
        # Kept in the state dict too, so head.safetensors records the mix.
        self.register_buffer("mix", torch.tensor([self.weight, self.scale]))

    def forward(self, u: torch.Tensor) -> torch.Tensor:
        return (1.0 - self.weight) / self.scale * self.head(u) + self.weight * u

    def linear_form(self) -> tuple[list, float, float]:
        """The head's own form with the coefficients mixed: ``a (1 - w) / s`` and ``b (1 - w) / s + w``."""
        modules, a, b = self.head.linear_form()
        share = (1.0 - self.weight) / self.scale
        return modules, a * share, b * share + self.weight


def class_prototypes(vectors: np.ndarray, labels: np.ndarray, n_classes: int) -> np.ndarray:
    """Mean vector of each class (``u_c``/``u_p`` of the papers); zero rows for absent classes."""
    sums = np.zeros((n_classes, vectors.shape[1]), dtype=np.float64)
    np.add.at(sums, labels, vectors)
    counts = np.bincount(labels, minlength=n_classes)[:, None]
    return (sums / np.maximum(counts, 1)).astype(np.float32)


def fit_cca(vectors: np.ndarray, labels: np.ndarray, seed: int = 0) -> tuple[LinearMap, LinearMap, int]:
    """Fit the CCA constraint between training names and their class prototypes.

    scikit-learn's :class:`~sklearn.cross_decomposition.CCA` is fitted on pairs
    ``(u_n, u_p(n))`` with prototypes built from the same training names
    (conceptual-grounding §5.3). Prototypes of ``C`` classes span at most ``C - 1``
    centred directions, so at most that many canonical pairs exist; to keep the paper's
    "same dimensionality as the input" the remaining dimensions carry the part of the
    (standardised) input orthogonal to the canonical directions. Canonical variates have
    equal variance on the training names, and both maps share one scale that gives the
    projected training names unit mean norm (the scale of every other head input).

    Returns
    -------
    (names_map, prototypes_map, n_components)
        ``names_map`` projects name vectors (the "CCA" model alone), ``prototypes_map``
        projects prototype vectors (the grounding targets), both ``dim -> dim``.
    """
    from sklearn.cross_decomposition import CCA

    x = np.asarray(vectors, dtype=np.float64)
    n, d = x.shape
    n_classes = int(labels.max()) + 1
    y = class_prototypes(x, labels, n_classes).astype(np.float64)[labels]
    k = int(max(1, min(d, len(np.unique(labels)) - 1, n - 1)))
    cca = CCA(n_components=k, scale=True, max_iter=1000)
    cca.fit(x, y)
    x_mean, x_std = cca._x_mean, cca._x_std
    y_mean, y_std = cca._y_mean, cca._y_std
    rx, ry = cca.x_rotations_, cca.y_rotations_
    xs = (x - x_mean) / x_std
    ys = (y - y_mean) / y_std
    sx = np.maximum((xs @ rx).std(axis=0), 1e-8)
    sy = np.maximum((ys @ ry).std(axis=0), 1e-8)
    # Orthonormal complement of the canonical directions in the standardised input space.
    from scipy.linalg import null_space

    basis, _ = np.linalg.qr(rx)
    comp = null_space(basis.T) if d > k else np.zeros((d, 0))
    wx = np.concatenate([rx / sx, comp], axis=1) / x_std[:, None]
    bx = -(x_mean / x_std) @ np.concatenate([rx / sx, comp], axis=1)
    wy = np.concatenate([ry / sy / y_std[:, None], comp / x_std[:, None]], axis=1)
    by = np.concatenate([-(y_mean / y_std) @ (ry / sy), -(x_mean / x_std) @ comp])
    # One scale for both maps so projected training names have unit mean norm, like every
    # other input of the heads: the standardised space has norms near sqrt(d), which makes
    # the DAN's first Adam steps scramble the (cosine) structure the CCA kept.
    scale = float(np.linalg.norm(x @ wx + bx, axis=1).mean()) or 1.0
    wx, bx, wy, by = wx / scale, bx / scale, wy / scale, by / scale
    logger.info("CCA: %d canonical components of %d dimensions", k, d)
    return LinearMap(wx, bx), LinearMap(wy, by), k


def build_head(kind: str, dim: int, hidden: int, dropout: float, *, identity_start: bool = False) -> nn.Module:
    """A fresh trainable head for an encoder type (``hierarchical`` uses the residual head).

    ``identity_start`` starts the head's ``enc`` at the identity
    (:meth:`FeedForward.start_at_identity`), so the head starts at ``f(u) = u``.
    """
    if kind in ("residual", "hierarchical"):
        head = ResidualEncoder(dim, hidden, dropout)
    elif kind in ("dan", "cca"):
        head = DANEncoder(dim, hidden, dropout)
    else:
        raise ValueError(f"no head for encoder {kind!r}")
    if identity_start:
        head.enc.start_at_identity()
    return head
