"""Training objectives of the papers, one small ``nn.Module`` each.

Every loss stores its hyperparameters in ``__init__`` and its ``forward`` takes
embeddings (and labels or targets) and returns a scalar. All distances are cosine
distances ``1 - cos`` (fewshot-biomedical-names §2.2, higher-level-semantics §3.2).
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F


def cosine_distance(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Row-wise cosine distance ``1 - cos(a_i, b_i)`` of two ``(n, d)`` tensors."""
    return 1.0 - F.cosine_similarity(a, b, dim=-1, eps=1e-8)


class TripletLoss(nn.Module):
    """Siamese triplet loss with cosine distance: ``max(d(a, p) - d(a, n) + margin, 0)``.

    Parameters
    ----------
    margin : float
        The papers use 0.1.

    Examples
    --------
    >>> loss = TripletLoss(margin=0.1)
    >>> a = torch.tensor([[1.0, 0.0]], requires_grad=True)
    >>> round(loss(a, torch.tensor([[1.0, 0.1]]), torch.tensor([[0.0, 1.0]])).item(), 3)
    0.0
    """

    def __init__(self, margin: float = 0.1):
        super().__init__()
        self.margin = margin

    def forward(self, anchor: torch.Tensor, positive: torch.Tensor, negative: torch.Tensor) -> torch.Tensor:
        pos = cosine_distance(anchor, positive)
        neg = cosine_distance(anchor, negative)
        return torch.clamp(pos - neg + self.margin, min=0.0).mean()


class GroundingLoss(nn.Module):
    """Mean cosine distance between encodings and fixed targets.

    Used for the grounding objective ``d(f(n), (u_c + u_n) / 2)`` (fewshot §2.2), the
    contextual objective ``d(f(n), u_n)`` and the DAN grounding ``d(f(n), (u_p + u_n) / 2)``
    (higher-level-semantics §3.2): the caller builds the target.

    Examples
    --------
    >>> loss = GroundingLoss()
    >>> out = torch.tensor([[1.0, 0.0]], requires_grad=True)
    >>> loss(out, torch.tensor([[2.0, 0.0]])).item()
    0.0
    """

    def forward(self, encoded: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return cosine_distance(encoded, target.detach()).mean()


class PrototypeLoss(nn.Module):
    """Prototypical grounding (conceptual-grounding §3.2): ``d(mean_c f(n), target_c)``.

    The encodings of each class's names are averaged after a random dropout of names
    (``synonym_dropout``; at least one name per class is always kept), and the mean is
    pulled towards the class target (the CCA-projected prototype). Vectorised: class means
    are one sparse-free ``index_add`` over the batch.

    Parameters
    ----------
    synonym_dropout : float
        Probability of leaving a name out of its class mean (the paper uses 0.5).

    Examples
    --------
    >>> loss = PrototypeLoss(synonym_dropout=0.0)
    >>> enc = torch.tensor([[1.0, 0.0], [1.0, 0.2]], requires_grad=True)
    >>> float(loss(enc, torch.tensor([0, 0]), torch.tensor([[1.0, 0.1]]))) < 1e-3
    True
    """

    def __init__(self, synonym_dropout: float = 0.5):
        super().__init__()
        self.synonym_dropout = synonym_dropout

    def forward(self, encoded: torch.Tensor, labels: torch.Tensor, targets: torch.Tensor,
                generator: torch.Generator | None = None) -> torch.Tensor:
        n_classes = targets.shape[0]
        keep = torch.ones(len(labels), dtype=encoded.dtype, device=encoded.device)
        if self.training and self.synonym_dropout > 0:
            draw = torch.rand(len(labels), generator=generator, device="cpu").to(encoded.device)
            keep = (draw >= self.synonym_dropout).to(encoded.dtype)
            # A class whose names were all dropped keeps them all: every class in the batch
            # must still contribute a prototype.
            kept_per_class = torch.zeros(n_classes, device=encoded.device).index_add_(0, labels, keep)
            keep = torch.where(kept_per_class[labels] > 0, keep, torch.ones_like(keep))
        sums = torch.zeros(n_classes, encoded.shape[1], dtype=encoded.dtype, device=encoded.device)
        sums = sums.index_add(0, labels, encoded * keep[:, None])
        counts = torch.zeros(n_classes, dtype=encoded.dtype, device=encoded.device).index_add(0, labels, keep)
        present = counts > 0
        means = sums[present] / counts[present, None]
        return cosine_distance(means, targets[present].detach()).mean()


class MultiSimilarityLoss(nn.Module):
    """HiPrBERT's hierarchical multi-similarity loss over ordered distance categories.

    For every threshold ``d0`` in ``0 .. max_category - 1`` and every anchor ``i``, names at
    category ``<= d0`` are positives and names further away are negatives (HiPrBERT §3.5)::

        sum_d0 mean_i [ 1/alpha log(1 + sum_pos exp(-alpha (S_ij - lambda)))
                      + 1/beta  log(1 + sum_neg exp( beta (S_ij - lambda))) ]

    ``S`` is the cosine similarity inside the batch. Anchors without a positive at a
    threshold contribute only their negative term, as in the paper's formula.

    Parameters
    ----------
    alpha, beta, lam : float
        The paper uses 2, 2 and 0.5.

    Examples
    --------
    >>> loss = MultiSimilarityLoss()
    >>> emb = torch.tensor([[1.0, 0.0], [0.9, 0.1], [0.0, 1.0]], requires_grad=True)
    >>> cats = torch.tensor([[0, 0, 3], [0, 0, 3], [3, 3, 0]])
    >>> loss(emb, cats).ndim
    0
    """

    def __init__(self, alpha: float = 2.0, beta: float = 2.0, lam: float = 0.5):
        super().__init__()
        self.alpha = alpha
        self.beta = beta
        self.lam = lam

    def forward(self, embeddings: torch.Tensor, categories: torch.Tensor) -> torch.Tensor:
        normed = F.normalize(embeddings, dim=1)
        sim = normed @ normed.T
        n = sim.shape[0]
        not_self = ~torch.eye(n, dtype=torch.bool, device=sim.device)
        max_category = int(categories.max().item()) if n else 0
        total = sim.new_zeros(())
        for d0 in range(max(max_category, 1)):
            pos = (categories <= d0) & not_self
            neg = categories > d0
            pos_term = torch.log1p((torch.exp(-self.alpha * (sim - self.lam)) * pos).sum(1)) / self.alpha
            neg_term = torch.log1p((torch.exp(self.beta * (sim - self.lam)) * neg).sum(1)) / self.beta
            total = total + (pos_term + neg_term).mean()
        return total
