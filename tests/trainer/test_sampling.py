"""Positives stay in the class, distance-weighted negatives never do, categories follow the tree."""

from __future__ import annotations

import numpy as np
import torch

from trainer.sampling import (
    OTHER,
    PARENT_CHILD,
    SAME_CLASS,
    SIBLING,
    SYNONYM,
    distance_weighted_negatives,
    hierarchy_batches,
    hierarchy_categories,
    random_positives,
)


def test_random_positives_are_other_members_of_the_class():
    labels = torch.tensor([0, 1, 0, 2, 1, 0, 1])
    gen = torch.Generator().manual_seed(0)
    for _ in range(20):
        pos = random_positives(labels, gen)
        assert torch.equal(labels[pos], labels)
        single = labels == 2
        assert torch.all(pos[~single] != torch.arange(len(labels))[~single])
        assert pos[3] == 3  # a one-name class pairs with itself


def test_distance_weighted_negatives_never_pick_the_same_class():
    rng = np.random.default_rng(0)
    labels = torch.from_numpy(rng.integers(0, 5, size=300))
    # Class clusters: same-class names are the closest, so a class-blind sampler would pick them.
    centres = rng.normal(size=(5, 32))
    vectors = torch.from_numpy(centres[labels.numpy()] + 0.3 * rng.normal(size=(300, 32))).float()
    gen = torch.Generator().manual_seed(0)
    for _ in range(10):
        neg = distance_weighted_negatives(vectors, labels, vectors, labels, generator=gen, chunk=64)
        assert not torch.any(labels[neg] == labels)


def test_distance_weighted_negatives_fall_back_to_uniform_when_all_are_far():
    # Opposite points: every distance is 2 > 1.4, so nothing passes the loss cutoff.
    vectors = torch.tensor([[1.0, 0.0], [-1.0, 0.0], [-1.0, 0.0]])
    labels = torch.tensor([0, 1, 1])
    neg = distance_weighted_negatives(vectors, labels, vectors, labels, generator=torch.Generator().manual_seed(0))
    assert labels[neg[0]] == 1 and labels[neg[1]] == 0 and labels[neg[2]] == 0


def test_distance_weighted_negatives_prefer_closer_negatives():
    # Anchor at angle 0; candidates at ~35 and ~70 degrees (distances 0.6 and 1.15).
    angles = torch.tensor([0.0, 0.6, 1.2])
    vectors = torch.stack([torch.cos(angles), torch.sin(angles), torch.zeros(3)], dim=1)
    labels = torch.tensor([0, 1, 2])
    gen = torch.Generator().manual_seed(0)
    anchors = vectors[:1].repeat(2000, 1)
    neg = distance_weighted_negatives(anchors, labels[:1].repeat(2000), vectors, labels, generator=gen)
    counts = torch.bincount(neg, minlength=3)
    assert counts[0] == 0 and counts[1] > counts[2]


def test_hierarchy_categories_follow_the_tree():
    parents = {"a": ["p"], "b": ["p"], "p": ["r"], "c": ["q"]}
    concepts = ["a", "a", "b", "p", "c"]
    classes = np.array([0, 0, 0, 0, 1])
    cats = hierarchy_categories(concepts, classes, parents)
    assert cats[0, 1] == SYNONYM
    assert cats[0, 2] == SIBLING and cats[2, 0] == SIBLING
    assert cats[0, 3] == PARENT_CHILD and cats[3, 2] == PARENT_CHILD
    assert cats[0, 4] == OTHER
    same_class = hierarchy_categories(["a", "c"], np.array([0, 0]), parents)
    assert same_class[0, 1] == SAME_CLASS


def test_hierarchy_batches_pair_each_anchor_with_its_closest_name():
    parents = {"a": ["p"], "b": ["p"], "c": ["q"], "d": ["q"]}
    concepts = ["a", "a", "b", "c", "d", "d"]
    cats = hierarchy_categories(concepts, np.array([0, 0, 0, 1, 1, 1]), parents)
    batches = hierarchy_batches(cats, batch_size=4, generator=torch.Generator().manual_seed(0))
    anchors = torch.cat([b[: len(b) // 2] for b in batches])
    assert sorted(anchors.tolist()) == list(range(6))
    for batch in batches:
        half = len(batch) // 2
        for anchor, partner in zip(batch[:half].tolist(), batch[half:].tolist()):
            assert anchor != partner
            assert cats[anchor, partner] == min(cats[anchor, j] for j in range(6) if j != anchor)
