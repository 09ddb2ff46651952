"""BioLORD-style fine-tuning (biolord-definitions §3): names pulled towards their definitions.

Pairs are ``(name, definition)``; where a concept has no definition, a description is
generated from the hierarchy with BioLORD's template ``[more generic concept] which
[relationship] [related concept]`` restricted to IS-A: ``"<parent> which has subtype
<child>"`` when the concept has children, else ``"a kind of <parent>"``. The base
sentence-transformer is trained with sentence-transformers' own
:class:`MultipleNegativesRankingLoss` (InfoNCE with in-batch negatives) and
:class:`SentenceTransformerTrainer` (AdamW, linear warm-up schedule), batches without
duplicate texts.
"""

from __future__ import annotations

import logging
import random

import numpy as np

from bioviz.errors import BiovizError
from trainer.data import TrainingData
from trainer.events import CancelFlag, Emit, TrainResult
from trainer.finetune import fit_sentence_transformer

logger = logging.getLogger(__name__)


def describe(ontology, concept_id: str, rng: random.Random) -> str | None:
    """A generated description of a concept from its IS-A neighbours (None at a top concept)."""
    graph = ontology.graph
    parents = sorted(p for p in graph.predecessors(concept_id) if p in ontology.concepts)
    if not parents:
        return None
    parent = ontology.concepts[rng.choice(parents)]
    generic = rng.choice(parent.names)
    children = sorted(c for c in graph.successors(concept_id) if c in ontology.concepts)
    if children:
        child = ontology.concepts[rng.choice(children)]
        return f"{generic} which has subtype {rng.choice(child.names)}"
    return f"a kind of {generic}"


def definition_pairs(data: TrainingData, scope: str = "train", max_pairs: int = 20000,
                     seed: int = 0) -> tuple[list[str], list[str], dict]:
    """``(names, definitions)`` for the rows a run may learn from.

    Parameters
    ----------
    data : TrainingData
    scope : str
        ``train``: the split's training names; ``all``: every name of the view except
        validation, test and zero-shot names (those stay unseen).
    max_pairs : int
        Random subset above this many pairs (seeded).

    Returns
    -------
    (names, texts, counts)
        Paired lists and ``{"definitions": n, "descriptions": n, "skipped": n}``.
    """
    split = data.split
    if scope == "train":
        rows = split.train
    else:
        held = set(split.validation.tolist()) | set(split.test.tolist()) | set(split.zero_shot.tolist())
        rows = np.array([r for r in range(len(data.view.names)) if r not in held], dtype=np.int64)
    rng = random.Random(seed)
    names, texts = [], []
    counts = {"definitions": 0, "descriptions": 0, "skipped": 0}
    for row in rows.tolist():
        concept = data.ontology.concepts.get(data.view.name_concepts[row])
        if concept is None:
            counts["skipped"] += 1
            continue
        text = concept.definition or describe(data.ontology, concept.id, rng)
        if not text:
            counts["skipped"] += 1
            continue
        counts["definitions" if concept.definition else "descriptions"] += 1
        names.append(data.view.names[row])
        texts.append(text)
    if len(names) > max_pairs:
        keep = sorted(rng.sample(range(len(names)), max_pairs))
        names, texts = [names[i] for i in keep], [texts[i] for i in keep]
    return names, texts, counts


def fine_tune(c, data: TrainingData, *, device, emit: Emit, cancel: CancelFlag) -> TrainResult:
    """Fine-tune the base model of config ``c`` on definition pairs (InfoNCE, in-batch negatives).

    ``device``, ``emit`` and ``cancel`` as for :func:`trainer.finetune.fit_sentence_transformer`.
    """
    from sentence_transformers.base.sampler import BatchSamplers
    from sentence_transformers.sentence_transformer.losses import MultipleNegativesRankingLoss

    names, texts, counts = definition_pairs(data, c.definition_scope, c.max_pairs, c.seed)
    if len(names) < 2:
        raise BiovizError("definitions: fewer than two (name, definition) pairs in the training names")
    logger.info("definitions: %d pairs (%s)", len(names), counts)
    result = fit_sentence_transformer(
        c, data, device=device, emit=emit, cancel=cancel, columns={"anchor": names, "positive": texts},
        make_loss=MultipleNegativesRankingLoss, loss_name="contrastive", batch_sampler=BatchSamplers.NO_DUPLICATES,
    )
    result.metrics["pairs"] = {"pairs": len(names), **counts}
    return result
