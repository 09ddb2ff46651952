"""Each loss gives a scalar that needs grad, lower for a correct arrangement than a wrong one."""

from __future__ import annotations

import torch

from trainer.losses import GroundingLoss, MultiSimilarityLoss, PrototypeLoss, TripletLoss


def _leaf(rows):
    return torch.tensor(rows, dtype=torch.float32, requires_grad=True)


def test_triplet_loss_scalar_grad_and_order():
    loss = TripletLoss(margin=0.1)
    anchor = _leaf([[1.0, 0.0], [0.0, 1.0]])
    close = torch.tensor([[0.9, 0.1], [0.1, 0.9]])
    far = torch.tensor([[-1.0, 0.2], [0.8, -0.5]])
    correct = loss(anchor, close, far)
    wrong = loss(anchor, far, close)
    assert correct.ndim == 0 and correct.requires_grad
    assert correct.item() < wrong.item()
    wrong.backward()
    assert anchor.grad is not None and anchor.grad.abs().sum() > 0


def test_triplet_loss_is_zero_beyond_the_margin():
    loss = TripletLoss(margin=0.1)
    assert loss(_leaf([[1.0, 0.0]]), torch.tensor([[1.0, 0.0]]), torch.tensor([[0.0, 1.0]])).item() == 0.0


def test_grounding_loss_scalar_grad_and_order():
    loss = GroundingLoss()
    encoded = _leaf([[1.0, 0.1], [0.2, 1.0]])
    right = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    correct, wrong = loss(encoded, right), loss(encoded, right.flip(0))
    assert correct.ndim == 0 and correct.requires_grad
    assert correct.item() < wrong.item()


def test_prototype_loss_scalar_grad_and_order():
    loss = PrototypeLoss(synonym_dropout=0.5)
    encoded = _leaf([[1.0, 0.1], [0.9, -0.1], [0.1, 1.0], [-0.1, 0.8]])
    labels = torch.tensor([0, 0, 1, 1])
    targets = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    gen = torch.Generator().manual_seed(0)
    correct = loss(encoded, labels, targets, generator=gen)
    wrong = loss(encoded, labels, targets.flip(0), generator=gen)
    assert correct.ndim == 0 and correct.requires_grad
    assert correct.item() < wrong.item()


def test_prototype_loss_keeps_a_class_whose_names_were_all_dropped():
    loss = PrototypeLoss(synonym_dropout=0.99)
    encoded = _leaf([[1.0, 0.0], [0.0, 1.0]])
    value = loss(encoded, torch.tensor([0, 1]), torch.tensor([[1.0, 0.0], [0.0, 1.0]]),
                 generator=torch.Generator().manual_seed(1))
    assert torch.isfinite(value) and value.item() < 1e-6


def test_multi_similarity_loss_scalar_grad_and_order():
    loss = MultiSimilarityLoss(alpha=2.0, beta=2.0, lam=0.5)
    # Rows 0-1 synonyms, 2 a sibling of 0-1, 3 unrelated.
    categories = torch.tensor([[0, 0, 1, 4], [0, 0, 1, 4], [1, 1, 0, 4], [4, 4, 4, 0]])
    ordered = _leaf([[1.0, 0.0, 0.0], [0.98, 0.1, 0.0], [0.8, 0.6, 0.0], [0.0, 0.0, 1.0]])
    shuffled = torch.tensor([[1.0, 0.0, 0.0], [0.0, 0.0, 1.0], [0.8, 0.6, 0.0], [0.98, 0.1, 0.0]])
    correct, wrong = loss(ordered, categories), loss(shuffled, categories)
    assert correct.ndim == 0 and correct.requires_grad
    assert correct.item() < wrong.item()


def test_hierarchy_loss_looks_up_the_categories_of_anchor_and_partner_rows():
    from trainer.finetune import HierarchyMultiSimilarityLoss

    class Identity(torch.nn.Module):
        def forward(self, features):
            return {"sentence_embedding": features["x"]}

    categories = torch.tensor([[0, 1, 4], [1, 0, 4], [4, 4, 0]])
    loss = HierarchyMultiSimilarityLoss(Identity(), categories)
    anchors = _leaf([[1.0, 0.0], [0.0, 1.0]])
    partners = torch.tensor([[0.9, 0.1], [0.1, 0.9]])
    labels = torch.tensor([0 * 3 + 1, 2 * 3 + 2])  # (row 0, row 1) and (row 2, row 2)
    value = loss([{"x": anchors}, {"x": partners}], labels)
    rows = torch.tensor([0, 2, 1, 2])
    expected = MultiSimilarityLoss()(torch.cat([anchors, partners]), categories[rows][:, rows])
    assert value.ndim == 0 and value.requires_grad
    assert torch.allclose(value, expected)
