"""Vectorised sampling of training tuples: positives, distance-weighted negatives, and
HiPrBERT's hierarchy distance categories.

Everything here works on whole arrays at once (no per-sample Python loops), so an epoch
over tens of thousands of names spends its time in matrix products.
"""

from __future__ import annotations

import logging

import numpy as np
import scipy.sparse as sp
import torch

logger = logging.getLogger(__name__)

SYNONYM, SIBLING, PARENT_CHILD, SAME_CLASS, OTHER = 0, 1, 2, 3, 4


def random_positives(labels: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """For every row, a random other row of the same class (itself when the class has one row).

    Parameters
    ----------
    labels : torch.Tensor
        ``int64`` class of each row.
    generator : torch.Generator
        Source of randomness (a seeded generator makes it deterministic).

    Returns
    -------
    torch.Tensor
        ``int64`` row index of the positive of each row.
    """
    n = len(labels)
    order = torch.argsort(labels, stable=True)
    sorted_labels = labels[order]
    counts = torch.bincount(sorted_labels)
    starts = torch.cumsum(counts, 0) - counts
    size = counts[sorted_labels]
    position = torch.arange(n) - starts[sorted_labels]
    # Draw among the other size-1 members: offset in [1, size-1], wrapped inside the class.
    draw = torch.rand(n, generator=generator)
    offset = 1 + torch.floor(draw * (size - 1).clamp(min=1)).long()
    offset = torch.where(size > 1, offset, torch.zeros_like(offset))
    partner_sorted = starts[sorted_labels] + (position + offset) % size
    positives = torch.empty(n, dtype=torch.long)
    positives[order] = order[partner_sorted]
    return positives


def distance_weighted_negatives(
    anchors: torch.Tensor,
    anchor_labels: torch.Tensor,
    pool: torch.Tensor,
    pool_labels: torch.Tensor,
    *,
    generator: torch.Generator,
    cutoff: float = 0.5,
    nonzero_loss_cutoff: float = 1.4,
    chunk: int = 2048,
) -> torch.Tensor:
    """Distance-weighted negative sampling of Wu et al. (2017) over a pool of names.

    A negative is drawn with probability proportional to ``1 / q(d)``, where ``q`` is the
    density of pairwise distances between points uniform on the unit sphere of the
    embedding dimension ``n``: ``q(d) ~ d^(n-2) (1 - d^2/4)^((n-3)/2)``. Distances are
    clipped below at ``cutoff`` (avoids the noisy hardest negatives) and negatives further
    than ``nonzero_loss_cutoff`` (which give no loss) are not drawn. Names of the anchor's
    own class are never drawn; when no candidate is left, any other-class name is drawn
    uniformly.

    Parameters
    ----------
    anchors, pool : torch.Tensor
        ``(m, d)`` and ``(n, d)`` encodings (normalised here).
    anchor_labels, pool_labels : torch.Tensor
        Classes of the rows.
    generator : torch.Generator
    cutoff, nonzero_loss_cutoff : float
        Wu et al.'s 0.5 and 1.4 (Euclidean distances between unit vectors, in [0, 2]).
    chunk : int
        Anchors handled per matrix product (bounds memory to ``chunk x n``).

    Returns
    -------
    torch.Tensor
        ``int64`` index into ``pool`` of each anchor's negative.
    """
    anchors = torch.nn.functional.normalize(anchors.float(), dim=1)
    pool = torch.nn.functional.normalize(pool.float(), dim=1)
    dim = anchors.shape[1]
    out = torch.empty(len(anchors), dtype=torch.long)
    for start in range(0, len(anchors), chunk):
        a = anchors[start : start + chunk]
        same = anchor_labels[start : start + chunk, None].cpu() == pool_labels[None, :].cpu()
        cos = (a @ pool.T).cpu().clamp(-1.0, 1.0)
        dist = torch.sqrt((2.0 - 2.0 * cos).clamp(min=1e-12)).clamp(min=cutoff)
        log_w = (2.0 - dim) * torch.log(dist) - (dim - 3.0) / 2.0 * torch.log((1.0 - 0.25 * dist**2).clamp(min=1e-8))
        allowed = ~same & (dist < nonzero_loss_cutoff)
        log_w = log_w.masked_fill(~allowed, float("-inf"))
        # Rows where nothing is allowed (every other-class name is far): uniform over other classes.
        empty = ~allowed.any(dim=1)
        if empty.any():
            log_w[empty] = torch.where(same[empty], float("-inf"), 0.0)
        weights = torch.softmax(log_w.double(), dim=1)  # max-subtracted exponent: no overflow
        out[start : start + chunk] = torch.multinomial(weights, 1, generator=generator).squeeze(1)
    return out


def hierarchy_categories(
    concept_of_row: list[str],
    class_of_row: np.ndarray,
    parents: dict[str, list[str]],
) -> torch.Tensor:
    """HiPrBERT distance categories between every pair of rows (HiPrBERT §3.3).

    0 synonyms (same concept), 1 siblings (concepts share a parent), 2 parent-child,
    then, as an ordered extension for level views, 3 other names of the same class and
    4 everything else.

    Parameters
    ----------
    concept_of_row : list of str
        Concept id of each training name.
    class_of_row : numpy.ndarray
        Level class of each training name.
    parents : dict
        ``concept id -> parent ids`` (only the rows' concepts are looked up).

    Returns
    -------
    torch.Tensor
        ``(n, n)`` ``int8`` matrix of categories.
    """
    concepts = sorted(set(concept_of_row))
    index = {c: i for i, c in enumerate(concepts)}
    parent_ids = sorted({p for c in concepts for p in parents.get(c, [])} | set(concepts))
    pindex = {p: i for i, p in enumerate(parent_ids)}
    rows, cols = [], []
    for c in concepts:
        for p in parents.get(c, []):
            rows.append(index[c])
            cols.append(pindex[p])
    has_parent = sp.csr_matrix((np.ones(len(rows), dtype=np.int32), (rows, cols)),
                               shape=(len(concepts), len(parent_ids)))
    sibling = (has_parent @ has_parent.T).toarray() > 0
    # parent-child among the rows' concepts: column of a parent that is itself a row concept.
    as_concept = np.array([index.get(p, -1) for p in parent_ids])
    child_parent = np.zeros((len(concepts), len(concepts)), dtype=bool)
    r, cidx = has_parent.nonzero()
    keep = as_concept[cidx] >= 0
    child_parent[r[keep], as_concept[cidx[keep]]] = True
    parent_child = child_parent | child_parent.T
    row_concept = np.array([index[c] for c in concept_of_row])
    same_class = class_of_row[:, None] == class_of_row[None, :]
    cats = np.full(same_class.shape, OTHER, dtype=np.int8)
    cats[same_class] = SAME_CLASS
    cats[parent_child[row_concept][:, row_concept]] = PARENT_CHILD
    cats[sibling[row_concept][:, row_concept]] = SIBLING
    cats[row_concept[:, None] == row_concept[None, :]] = SYNONYM
    return torch.from_numpy(cats)


def hierarchy_batches(categories: torch.Tensor, batch_size: int, generator: torch.Generator) -> list[torch.Tensor]:
    """Batches built from the hierarchy: each anchor comes with its closest related name.

    Every row is an anchor once per epoch; it is paired with a random row at the smallest
    category it has (a synonym if any, else a sibling, a parent or child, a class mate), so
    each batch holds positives for the low thresholds of the multi-similarity loss.

    Returns
    -------
    list of torch.Tensor
        Row indices per batch (``batch_size`` rows: half anchors, half partners).
    """
    n = categories.shape[0]
    cats = categories.clone().long()
    cats.fill_diagonal_(127)
    lowest = cats.min(dim=1, keepdim=True).values
    weights = (cats == lowest).double()
    partners = torch.multinomial(weights, 1, generator=generator).squeeze(1)
    order = torch.randperm(n, generator=generator)
    half = max(batch_size // 2, 1)
    return [torch.cat([order[s : s + half], partners[order[s : s + half]]]) for s in range(0, n, half)]
