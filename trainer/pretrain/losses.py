"""The in-batch losses a pretraining run chooses from (``--loss``), and the relatedness term's.

``mnrl``
    sentence-transformers' ``MultipleNegativesRankingLoss`` (InfoNCE over in-batch negatives,
    scale 20), BioLORD §3.2.
``cached``
    Its GradCache variant, for batches larger than memory.
``gist``
    ``GISTEmbedLoss`` (Solatorio, *GISTEmbed: Guided In-sample Selection of Training
    Negatives*, 2024): the frozen base model is the guide, and an in-batch candidate the
    guide finds more similar to the anchor than the anchor's own positive is masked out of
    the softmax (a likely false negative: an unlisted synonym, a near-duplicate concept).
    Temperature 0.05, MNRL's scale of 20, so that the masking is the only difference.
``multisimilarity``
    The multi-similarity loss (Wang et al., CVPR 2019; α = β = 2, λ = 0.5, HiPrBERT's settings)
    over the same candidates as ``mnrl``: the row's positive pulled above λ, every other
    text of the batch (and the row's hard negative) pushed below it.

Importing this module imports torch and sentence-transformers: the trainer imports it when a run starts.
"""

from __future__ import annotations

import copy

from sentence_transformers.sentence_transformer.losses import (CachedMultipleNegativesRankingLoss,
                                                                CosineSimilarityLoss, GISTEmbedLoss,
                                                                MultipleNegativesRankingLoss)
from torch import Tensor, nn

from trainer.pretrain.ordered_loss import ordered_distance_loss

GIST_TEMPERATURE = 0.05  # 1 / MultipleNegativesRankingLoss's scale of 20


class InBatchMultiSimilarityLoss(nn.Module):
    """The multi-similarity loss with in-batch candidates: rows (anchor, positive[, negative]).

    One cut-off of :func:`~trainer.pretrain.ordered_loss.ordered_distance_loss`: the row's
    positive at distance 0, its hard negative and every text of the other rows farther.
    """

    def __init__(self, model, alpha: float = 2.0, beta: float = 2.0, margin: float = 0.5) -> None:
        super().__init__()
        self.model = model
        self.alpha, self.beta, self.margin = alpha, beta, margin

    def forward(self, sentence_features, labels: Tensor | None = None) -> Tensor:
        """Loss of one batch; ``labels`` (the sampler's concept keys) are not used."""
        embeddings = [self.model(features)["sentence_embedding"] for features in sentence_features]
        distances = (0, *([3] * (len(embeddings) - 2)))  # the positive, then any hard negative: far
        return ordered_distance_loss(embeddings[0], embeddings[1:], distances, alpha=self.alpha, beta=self.beta,
                                     margin=self.margin, cut_offs=(0,))


class RelatednessLoss(CosineSimilarityLoss):
    """``weight · MSE(cos(u, v), label)``: sentence-transformers' ``CosineSimilarityLoss``, weighted."""

    def __init__(self, model, weight: float) -> None:
        super().__init__(model)
        self.weight = weight

    def forward(self, sentence_features, labels: Tensor) -> Tensor:
        """The weighted mean squared error of one batch of scored pairs."""
        return self.weight * super().forward(sentence_features, labels.float())


def frozen_copy(model):
    """A copy of ``model`` that no optimiser step reaches (the GIST guide: the base as it was)."""
    guide = copy.deepcopy(model)
    guide.eval()
    for parameter in guide.parameters():
        parameter.requires_grad_(False)
    return guide


def contrastive_loss(name: str, model, *, mini_batch_size: int = 32, guide=None) -> nn.Module:
    """The in-batch loss ``name`` (one of ``trainer.pretrain.config.LOSSES``) of ``model``.

    Parameters
    ----------
    name : str
    model : SentenceTransformer
    mini_batch_size : int
        The cached loss's mini-batch.
    guide : SentenceTransformer, optional
        The GIST guide (:func:`frozen_copy` of the base, taken before training).
    """
    if name == "cached":
        return CachedMultipleNegativesRankingLoss(model, mini_batch_size=mini_batch_size)
    if name == "gist":
        return GISTEmbedLoss(model, guide if guide is not None else frozen_copy(model), temperature=GIST_TEMPERATURE)
    if name == "multisimilarity":
        return InBatchMultiSimilarityLoss(model)
    return MultipleNegativesRankingLoss(model)
