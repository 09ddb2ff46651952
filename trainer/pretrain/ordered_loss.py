"""HiPrBERT's loss over ordered distance categories (hiprbert-hierarchical-pretraining §3.3-3.5).

Distances between two terms of a hierarchy: 0 synonyms, 1 siblings (same parent), 2
parent and child, 3 anything else; only their order matters. For every cut-off
``d0`` in 0, 1, 2 the multi-similarity loss pulls the anchor's similarity to every term at
most ``d0`` away above ``λ`` and pushes every farther term below it:

    Σ_{d0=0..2} mean_i [ α⁻¹ log(1 + Σ_{d(i,j) ≤ d0} e^{-α(S_ij - λ)})
                        + β⁻¹ log(1 + Σ_{d(i,j) > d0} e^{β(S_ij - λ)}) ]

with S the cosine similarity and the paper's α = β = 2, λ = 0.5. The candidates of an
anchor are its row's own texts (a sibling, distance 1, and the parent, distance 2) and
every text of the other rows of the batch (distance 3: the concept-aware sampler keeps two
rows of one concept, sibling or parent apart). sentence-transformers ships no loss with
several ordered positives per anchor, hence this module.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

FAR = 3  # "anything else"
CUT_OFFS = (0, 1, 2)


def ordered_distance_loss(anchors: Tensor, columns: list[Tensor], distances: tuple[int, ...], *,
                          alpha: float = 2.0, beta: float = 2.0, margin: float = 0.5,
                          cut_offs: tuple[int, ...] = CUT_OFFS) -> Tensor:
    """The summed multi-similarity loss of a batch.

    Parameters
    ----------
    anchors : Tensor
        ``(batch, dim)`` anchor embeddings.
    columns : list of Tensor
        One ``(batch, dim)`` tensor per candidate column, row ``i`` belonging to anchor ``i``.
    distances : tuple of int
        The distance category of each column to its own row's anchor (e.g. ``(1, 2)``).
    alpha, beta, margin : float
        The paper's α, β and λ.
    cut_offs : tuple of int
        The cut-offs summed over (``(0,)``: the plain multi-similarity loss of a positive against the rest).

    Returns
    -------
    Tensor
        A scalar.
    """
    batch = anchors.size(0)
    anchors = nn.functional.normalize(anchors, dim=-1)
    candidates = torch.cat([nn.functional.normalize(c, dim=-1) for c in columns] + [anchors])
    similarity = anchors @ candidates.T  # (batch, batch * (columns + 1)): the columns, then the anchors
    distance = torch.full_like(similarity, FAR)
    rows = torch.arange(batch, device=anchors.device)
    for k, d in enumerate(distances):
        distance[rows, k * batch + rows] = d
    itself = torch.zeros_like(similarity, dtype=torch.bool)
    itself[rows, len(columns) * batch + rows] = True  # an anchor is no candidate of its own
    loss = similarity.new_zeros(())
    for cut in cut_offs:
        near = (distance <= cut) & ~itself
        far = (distance > cut) & ~itself
        pull = torch.log1p((torch.exp(-alpha * (similarity - margin)) * near).sum(dim=1)) / alpha
        push = torch.log1p((torch.exp(beta * (similarity - margin)) * far).sum(dim=1)) / beta
        loss = loss + (pull + push).mean()
    return loss


class OrderedDistanceLoss(nn.Module):
    """HiPrBERT's multi-similarity loss as a sentence-transformers loss.

    Rows are (anchor, sibling, parent): ``column_distances`` (1, 2) by default.
    """

    def __init__(self, model, column_distances: tuple[int, ...] = (1, 2), alpha: float = 2.0, beta: float = 2.0,
                 margin: float = 0.5) -> None:
        super().__init__()
        self.model = model
        self.column_distances = tuple(column_distances)
        self.alpha, self.beta, self.margin = alpha, beta, margin

    def forward(self, sentence_features, labels: Tensor | None = None) -> Tensor:
        """Loss of one batch; ``labels`` (the concept keys of the batch sampler) are not used."""
        embeddings = [self.model(features)["sentence_embedding"] for features in sentence_features]
        return ordered_distance_loss(embeddings[0], embeddings[1:], self.column_distances,
                                     alpha=self.alpha, beta=self.beta, margin=self.margin)

    @property
    def citation(self) -> str:
        """Where the loss comes from."""
        return "Cai et al., Hierarchical Pretraining for Biomedical Term Embeddings (HiPrBERT), 2023, §3.5"
