"""Which pairs train and which validate: a held-out validation slice and stratified sampling.

The validation slice is drawn first, stratified like training, and every training pair
that shares a text or the anchor concept with a validation pair is then dropped, so the
validation figures measure pairs of concepts the model never trained on. ``--max-pairs``
then samples the training pairs so that each (source, objective) stratum gets an equal
share, the share of a stratum with fewer pairs passing to the others.
"""

from __future__ import annotations

import random
from collections import defaultdict

from bioviz.ontology.model import normalise_name
from trainer.pretrain.pairs import Pair


def stratum(pair: Pair) -> tuple[str, str]:
    """The stratum a pair is sampled in: its source and objective."""
    return pair.source, pair.objective


def quotas(sizes: dict, total: int) -> dict:
    """Equal shares of ``total`` over strata of the given ``sizes``, a small stratum's rest passed on.

    >>> quotas({"a": 2, "b": 100, "c": 100}, 50)
    {'a': 2, 'b': 24, 'c': 24}
    """
    left, out = total, {}
    pending = sorted(sizes, key=lambda k: (sizes[k], str(k)))
    while pending:
        share = left // len(pending)
        key = pending.pop(0)
        out[key] = min(sizes[key], share if pending else left)
        left -= out[key]
    return {k: out[k] for k in sizes}


def stratified_sample(pairs: list[Pair], max_pairs: int | None, seed: int) -> list[Pair]:
    """At most ``max_pairs`` pairs, equal shares per (source, objective); all when None or enough."""
    if max_pairs is None or len(pairs) <= max_pairs:
        return list(pairs)
    groups: dict = defaultdict(list)
    for pair in pairs:
        groups[stratum(pair)].append(pair)
    rng = random.Random(seed)
    take = quotas({k: len(v) for k, v in groups.items()}, max_pairs)
    chosen = []
    for key, members in groups.items():
        chosen += rng.sample(members, take[key])
    rng.shuffle(chosen)
    return chosen


def validation_size(n_pairs: int, requested: int) -> int:
    """The validation slice: ``requested`` pairs, but never more than a tenth of the pool."""
    return min(requested, n_pairs // 10)


def hold_out_validation(pairs: list[Pair], n_validation: int, seed: int) -> tuple[list[Pair], list[Pair], int]:
    """Split ``pairs`` into (training pairs, validation pairs, training pairs dropped for overlap)."""
    validation = stratified_sample(pairs, n_validation, seed + 1) if n_validation else []
    chosen = set(map(id, validation))
    texts = {normalise_name(t) for p in validation for t in (p.anchor, p.positive)}
    anchors = {(p.source, p.concepts[0]) for p in validation}
    train, dropped = [], 0
    for pair in pairs:
        if id(pair) in chosen:
            continue
        if (pair.source, pair.concepts[0]) in anchors or normalise_name(pair.anchor) in texts \
                or normalise_name(pair.positive) in texts:
            dropped += 1
            continue
        train.append(pair)
    return train, validation, dropped
