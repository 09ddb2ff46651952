"""A cross-encoder that reads a term and a candidate concept's name together: granularity's second opinion.

A bi-encoder scores a term and a name apart, so "seizures" sits almost as close to *Focal
seizure* as to *Seizure*: the extra word costs little in a pooled vector. A cross-encoder
attends across both texts and can learn that a candidate says more (or less) than the term.
bioviz's is trained by ``python -m trainer reranker`` on ontology pairs only: a name and its
synonym as a match; the same name and its concept's parent, child or sibling as non-matches
(docs/models.md, *Granularity re-ranking*).

:class:`CrossScorer` loads one such model (a sentence-transformers ``CrossEncoder``
directory) once per process and scores a term against its top candidates' names.
"""

from __future__ import annotations

import threading
from functools import lru_cache
from pathlib import Path

import numpy as np

from bioviz.errors import ModelError
from bioviz.models.load_errors import no_loading_bar

MAX_SEEN = 200_000  # scored pairs remembered (a few tens of MB)
MAX_LENGTH = 64  # tokens of a (term, name) pair: coding terms and concept names are short


class CrossScorer:
    """A cross-encoder's match probability for (term, candidate name) pairs.

    Parameters
    ----------
    directory : Path
        A sentence-transformers ``CrossEncoder`` directory (one output: a logit).
    """

    def __init__(self, directory: Path) -> None:
        from sentence_transformers import CrossEncoder  # here: only re-ranking needs it

        directory = Path(directory)
        if not (directory / "config.json").is_file():
            raise ModelError(f"{directory}: not a cross-encoder directory (no config.json)")
        try:
            with no_loading_bar():
                self.model = CrossEncoder(str(directory), device="cpu", max_length=MAX_LENGTH, local_files_only=True)
        except (OSError, ValueError) as exc:
            raise ModelError(f"{directory}: cannot load the cross-encoder ({exc})") from None
        self._lock = threading.Lock()  # one model, shared by a server's sessions: torch modules are not re-entrant
        # Pairs already scored: a term re-coded (another ranking, a page rerun) costs no forward pass.
        self._seen: dict[tuple[str, str], float] = {}

    def __call__(self, term: str, names: list[str]) -> np.ndarray:
        """Probability that each name names what ``term`` means (0..1), in the order given."""
        import torch

        with self._lock:
            new = list(dict.fromkeys(n for n in names if (term, n) not in self._seen))
            if new:  # logits, whatever activation the saved model names: the sigmoid is ours
                logits = self.model.predict([(term, n) for n in new], batch_size=32, show_progress_bar=False,
                                            activation_fn=torch.nn.Identity(), convert_to_numpy=True)
                if len(self._seen) > MAX_SEEN:
                    self._seen.clear()
                for n, logit in zip(new, np.asarray(logits, dtype=np.float64).reshape(-1)):
                    self._seen[(term, n)] = float(1.0 / (1.0 + np.exp(-logit)))
            return np.asarray([self._seen[(term, n)] for n in names], dtype=np.float32)


@lru_cache(maxsize=2)
def cross_scorer(directory: str) -> CrossScorer:
    """The process's :class:`CrossScorer` for ``directory`` (loaded once)."""
    return CrossScorer(Path(directory))
