"""A relatedness-keeping term: the base model's cosine on random name pairs as a target.

Pretraining on synonyms and IS-A edges moves names of the ontologies together and apart for
what the ontologies say; the relations a general-domain base learned elsewhere (how related
two unrelated-looking clinical terms are) are not asked for, and issue 31 measured them lost
on held-out clinical relatedness. ``--relatedness-weight W`` trains, alongside the main loss,
a distillation term: ``--relatedness-pairs N`` random pairs of the pool's names
(:mod:`trainer.pretrain.name_pool`, the leakage rule applied), each with the base model's
cosine as its target, and ``W · MSE(cos(u, v), target)`` (sentence-transformers'
``CosineSimilarityLoss``) as their loss. The pairs are one more dataset of the trainer's
``DatasetDict``: their share of the batches is their share of all rows.
"""

from __future__ import annotations

import dataclasses
import random
from dataclasses import dataclass

import numpy as np

from trainer.pretrain.name_pool import PoolName, base_vectors

OBJECTIVE = "relatedness"  # the name of its dataset and of its count in pretrain.json


@dataclass(frozen=True)
class ScoredPair:
    """Two names and the base model's cosine between them.

    Attributes
    ----------
    anchor, positive : str
        The two names (named as a pair's texts so that the terms file and the counts read them alike).
    source : str
        The SOURCE of the first name.
    target : float
        The base's cosine (0 until :func:`with_targets`).
    """

    anchor: str
    positive: str
    source: str
    target: float = 0.0

    @property
    def names(self) -> tuple[str, str]:
        """The names the pair was built from (both texts)."""
        return self.anchor, self.positive


def random_pairs(pool: list[PoolName], n: int, seed: int) -> list[ScoredPair]:
    """``n`` distinct random pairs of two different names of ``pool`` (fewer when the pool is small).

    Seeded by ``seed`` alone: the same pool gives the same pairs, so a resumed run trains on
    the pairs it started with.
    """
    if len(pool) < 2:
        return []
    rng = random.Random(f"{seed}:{OBJECTIVE}")
    most = len(pool) * (len(pool) - 1) // 2
    seen: set = set()
    out = []
    while len(out) < min(n, most):
        i, j = sorted(rng.sample(range(len(pool)), 2))
        if (i, j) in seen:
            continue
        seen.add((i, j))
        out.append(ScoredPair(pool[i].text, pool[j].text, pool[i].source))
    return out


def with_targets(pairs: list[ScoredPair], base: str) -> list[ScoredPair]:
    """``pairs`` with the cosine of ``base`` (a MODEL text) as each target (vectors from the cache)."""
    if not pairs:
        return []
    texts = list(dict.fromkeys(t for p in pairs for t in (p.anchor, p.positive)))
    position = {t: k for k, t in enumerate(texts)}
    vectors = base_vectors(texts, base)
    first = vectors[[position[p.anchor] for p in pairs]]
    second = vectors[[position[p.positive] for p in pairs]]
    cosines = np.sum(first * second, axis=1)
    return [dataclasses.replace(p, target=float(c)) for p, c in zip(pairs, cosines)]


def relatedness_columns(pairs: list[ScoredPair]) -> dict:
    """The trainer's columns of the pairs: two texts and the target as ``label``."""
    return {"anchor": [p.anchor for p in pairs], "positive": [p.positive for p in pairs],
            "label": [p.target for p in pairs]}
