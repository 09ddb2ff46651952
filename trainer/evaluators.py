"""Class-retrieval mAP as a sentence-transformers evaluator: the validation figure of every training path.

The head loop scores its own encodings (:meth:`ClassRetrievalEvaluator.score`, one pass of
the head serves the figure and the next epoch's negatives); fine-tuning calls the evaluator on
the model (:meth:`ClassRetrievalEvaluator.__call__`), as sentence-transformers' trainer would.
Importing this module imports sentence-transformers (seconds): training code imports it
when a run starts.
"""

from __future__ import annotations

import numpy as np
from sentence_transformers.sentence_transformer.evaluation import SentenceEvaluator

from bioviz.evaluation.metrics import class_retrieval_map


def encode_unit(model, texts: list[str]) -> np.ndarray:
    """Unit vectors of ``texts`` under a SentenceTransformer, quietly, as every figure encodes them."""
    return model.encode(texts, batch_size=128, convert_to_numpy=True, normalize_embeddings=True,
                        show_progress_bar=False)


class ClassRetrievalEvaluator(SentenceEvaluator):
    """Class-retrieval mAP (higher-level-semantics §4.3) of one split part's names.

    Validation and test names rank the training names; zero-shot names rank each other (each
    name's own row left out). The primary metric is ``mAP``, higher is better.

    Parameters
    ----------
    data : trainer.data.TrainingData
        View (names, labels) and split.
    part : {"validation", "test", "zero_shot"}

    Attributes
    ----------
    rows : numpy.ndarray
        The view rows scored: the training rows then the part's (zero-shot: the part's only).
    """

    def __init__(self, data, part: str = "validation"):
        super().__init__()
        if part not in ("validation", "test", "zero_shot"):
            raise ValueError(f"unknown split part {part!r}")
        self.primary_metric, self.greater_is_better = "mAP", True
        self.part = part
        split = data.split
        self.queries = getattr(split, part)
        self.n_corpus = 0 if part == "zero_shot" else len(split.train)
        self.rows = self.queries if part == "zero_shot" else np.concatenate([split.train, self.queries])
        self.labels = data.view.labels[self.rows]
        self.names = data.view.names

    def __len__(self) -> int:
        """How many names the part holds (0: there is no figure)."""
        return len(self.queries)

    def score(self, vectors: np.ndarray) -> float:
        """The mAP from unit vectors of :attr:`rows`, in that order (NaN when the part is empty)."""
        if not len(self.queries):
            return float("nan")
        if self.part == "zero_shot":
            return float(class_retrieval_map(vectors, self.labels, vectors, self.labels, exclude_self=True))
        n = self.n_corpus
        return float(class_retrieval_map(vectors[n:], self.labels[n:], vectors[:n], self.labels[:n]))

    def __call__(self, model, output_path: str | None = None, epoch: int = -1, steps: int = -1) -> dict[str, float]:
        """Encode the part's (and the training) names with ``model`` and score them: ``{"mAP": value}``."""
        if not len(self.queries):  # nothing to encode
            return {self.primary_metric: float("nan")}
        vectors = encode_unit(model, [self.names[i] for i in self.rows])
        return {self.primary_metric: self.score(vectors)}
