"""What a training run reads: the level view, its split, and the input model's vectors."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

import numpy as np

from bioviz.ontology import Ontology, Split, level_view, load_source, make_split, synonym_view
from bioviz.ontology.levels import LevelView
from trainer.config import TrainConfig

logger = logging.getLogger(__name__)


def load_ontology(config: TrainConfig) -> Ontology:
    """The source named in ``config`` (through bioviz's parsed-source cache)."""
    return load_source(config.source, **(config.source_options or {}))


def load_view(config: TrainConfig, ontology: Ontology | None = None) -> LevelView:
    """The level view (or synonym-set view) ``config`` trains on."""
    ontology = ontology or load_ontology(config)
    if config.synonyms:
        return synonym_view(ontology, root=config.root, keep_ambiguous=config.keep_ambiguous)
    return level_view(ontology, depth=config.depth, root=config.root, keep_ambiguous=config.keep_ambiguous)


@dataclass
class TrainingData:
    """Inputs of one run.

    Attributes
    ----------
    ontology : Ontology
    view : LevelView
    split : Split
    vectors : numpy.ndarray
        ``(len(view.names), dim)`` L2-normalised input vectors (base model or ``init`` run).
    input_label, input_fingerprint : str
        Readable name and content hash of the input model.
    embedding_s : float
        Seconds spent obtaining ``vectors`` (cache hits included).
    """

    ontology: Ontology
    view: LevelView
    split: Split
    vectors: np.ndarray
    input_label: str
    input_fingerprint: str
    embedding_s: float

    @property
    def dim(self) -> int:
        """Dimensionality of the input vectors."""
        return int(self.vectors.shape[1])

    def parents(self) -> dict[str, list[str]]:
        """``concept -> parent ids`` for the view's concepts (HiPrBERT categories)."""
        if self.ontology is None:  # synthetic data (benchmarks): no hierarchy beyond the classes
            return {}
        graph = self.ontology.graph
        return {c: sorted(graph.predecessors(c)) for c in set(self.view.name_concepts) if c in graph}


def prepare(config: TrainConfig, progress=None) -> TrainingData:
    """Load the source, cut the level, draw the split and embed every name of the view.

    Parameters
    ----------
    config : TrainConfig
        A validated configuration.
    progress : callable, optional
        ``progress(done, total)`` while names are embedded.
    """
    from bioviz.models.embeddings import encode_cached, load_encoder

    ontology = load_ontology(config)
    view = load_view(config, ontology)
    split = make_split(view, shots=config.shots, seed=config.effective_split_seed,
                       test_per_class=config.test_per_class, zero_shot_classes=config.zero_shot_classes)
    started = time.perf_counter()
    encoder = load_encoder(config.input_model)
    vectors, _ = encode_cached(encoder, view.names, progress=progress)
    embedding_s = time.perf_counter() - started
    logger.info("embedded %d names with %s in %.1fs", len(view.names), encoder.label, embedding_s)
    return TrainingData(ontology, view, split, np.ascontiguousarray(vectors, dtype=np.float32),
                        encoder.label, encoder.fingerprint, embedding_s)
