"""Hard negatives mined with the base model over every name of the sources (SapBERT-style).

SapBERT (Liu et al., NAACL 2021, *Self-Alignment Pretraining for Biomedical Entity
Representations*) trains on the names a model confuses most: for each anchor, the nearest
names of other concepts. ``--hard-negatives mined`` gives each sampled ``synonyms`` and
``hierarchy`` pair the nearest name, by the base model's cosine, among every name of the
sources' ontologies (:mod:`trainer.pretrain.name_pool`) that is

* not a name of the anchor's own concept, nor of any concept sharing a (normalised) name with
  the pair's texts; for a ``hierarchy`` pair (child, parent) not a name of an ancestor of the
  child either (another parent, a grandparent: not wrong answers), nor of anything under the
  parent (the child's siblings: HiPrBERT's order puts them nearer than the parent);
* below the positive by a margin: ``cos(anchor, candidate) < cos(anchor, positive) -
  0.05 · |cos(anchor, positive)|`` (NV-Retriever's TopK-PercPos 95 %, the setting
  sentence-transformers' ``util.mine_hard_negatives`` recommends), so an unlisted synonym the
  base already finds as close as the listed one is not taken as a negative;
* allowed by the leakage rule (the pool holds no held-out or validation name).

It is ``mine_hard_negatives``'s "top" strategy with ``range_max`` = :data:`CANDIDATES` and
``relative_margin`` = :data:`RELATIVE_MARGIN`, written here because that function excludes only
the pair's own positive text (not the anchor's concept, its other names or its ancestors) and
encodes everything itself: here the vectors come from bioviz's vector cache (a second run on the
same sources and base encodes nothing) and the search is faiss's exact inner product.
"""

from __future__ import annotations

import dataclasses
import time

import networkx as nx
import numpy as np

from bioviz.ontology.model import Ontology, normalise_name
from trainer.pretrain.name_pool import PoolName, base_vectors
from trainer.pretrain.pairs import Pair

MINED_OBJECTIVES = ("synonyms", "hierarchy")
CANDIDATES = 100  # nearest names looked at per anchor (mine_hard_negatives' range_max); 30 left 44 % of HPO without one
RELATIVE_MARGIN = 0.05  # a negative lies at least 5 % of the positive's cosine below it


def nearest(queries: np.ndarray, corpus: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """``(scores, indices)`` of the ``k`` rows of ``corpus`` with the largest inner product, per query."""
    import faiss  # imported here: only mining needs it

    index = faiss.IndexFlatIP(corpus.shape[1])
    index.add(np.ascontiguousarray(corpus, dtype=np.float32))
    return index.search(np.ascontiguousarray(queries, dtype=np.float32), min(k, len(corpus)))


def _forbidden(pair: Pair, ontology: Ontology) -> tuple[set, set]:
    """The ``(source, concept)`` keys and normalised names a negative of ``pair`` must avoid."""
    anchor = pair.concepts[0]
    concepts = {anchor, *pair.concepts}
    if pair.objective == "hierarchy":
        # Not another ancestor (no wrong answer), nor anything under the parent: the child's siblings
        # are nearer than its parent in HiPrBERT's order, so they are no negatives of (child, parent).
        parent = pair.concepts[1]
        concepts |= nx.ancestors(ontology.graph, anchor) | nx.descendants(ontology.graph, parent)
    names = {normalise_name(pair.anchor), normalise_name(pair.positive)}
    names |= {normalise_name(n) for c in concepts if c in ontology.concepts for n in ontology.concepts[c].names}
    return {(pair.source, c) for c in concepts}, names


def _choose(pair: Pair, ontology: Ontology, candidates, positive_score: float) -> tuple[PoolName | None, int]:
    """The nearest allowed candidate (or None) and how many the margin skipped."""
    concepts, names = _forbidden(pair, ontology)
    ceiling = positive_score - RELATIVE_MARGIN * abs(positive_score)
    skipped = 0
    for name, score in candidates:
        if name.concepts & concepts or normalise_name(name.text) in names:
            continue
        if score >= ceiling:
            skipped += 1
            continue
        return name, skipped
    return None, skipped


def _negative_concept(name: PoolName, source: str) -> str:
    """The candidate's concept in the pair's own source where it has one (the batch sampler keys it so)."""
    own = sorted(c for s, c in name.concepts if s == source)
    return own[0] if own else sorted(c for _, c in name.concepts)[0]


def mine_negatives(pairs: list[Pair], ontologies: dict[str, Ontology], pool: list[PoolName], *,
                   base: str) -> tuple[list[Pair], dict]:
    """Every eligible pair with its mined hard negative where one exists.

    Parameters
    ----------
    pairs : list of Pair
        Training pairs; ``synonyms`` and ``hierarchy`` ones get a negative.
    ontologies : dict
        ``source -> Ontology`` the pairs were extracted from.
    pool : list of PoolName
        The candidates (:func:`trainer.pretrain.name_pool.name_pool`, the leakage rule applied).
    base : str
        The MODEL whose cosine ranks the candidates.

    Returns
    -------
    (list of Pair, dict)
        The pairs, and what mining did (``pool_names``, ``anchors``, ``mined``,
        ``skipped_by_margin``, ``seconds``) for ``pretrain.json``.
    """
    started = time.perf_counter()
    chosen = [i for i, p in enumerate(pairs) if p.objective in MINED_OBJECTIVES and p.source in ontologies
              and p.concepts[0] in ontologies[p.source].concepts]
    record = {"pool_names": len(pool), "anchors": len(chosen), "mined": 0, "skipped_by_margin": 0,
              "candidates": CANDIDATES, "relative_margin": RELATIVE_MARGIN}
    if not chosen or not pool:
        return list(pairs), {**record, "seconds": time.perf_counter() - started}
    texts = list(dict.fromkeys([n.text for n in pool] + [t for i in chosen for t in (pairs[i].anchor,
                                                                                       pairs[i].positive)]))
    position = {t: k for k, t in enumerate(texts)}
    vectors = base_vectors(texts, base)
    encoded = time.perf_counter()
    anchors = vectors[[position[pairs[i].anchor] for i in chosen]]
    positives = vectors[[position[pairs[i].positive] for i in chosen]]
    scores, found = nearest(anchors, vectors[:len(pool)], CANDIDATES)
    out = list(pairs)
    for row, i in enumerate(chosen):
        pair = pairs[i]
        candidates = [(pool[k], float(s)) for k, s in zip(found[row], scores[row]) if k >= 0]
        name, skipped = _choose(pair, ontologies[pair.source], candidates, float(anchors[row] @ positives[row]))
        record["skipped_by_margin"] += skipped
        if name is not None:
            out[i] = dataclasses.replace(pair, negative=name.text, negative_concept=_negative_concept(name, pair.source))
            record["mined"] += 1
    done = time.perf_counter()
    return out, {**record, "encoding_seconds": encoded - started, "search_seconds": done - encoded,
                 "seconds": done - started}
