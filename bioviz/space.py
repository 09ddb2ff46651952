"""A Space: names, their L2-normalised vectors, and what produced them.

Every comparison in bioviz is between two Spaces over the same names (a baseline model and
a trained run, say).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


def l2_normalise(vectors: np.ndarray) -> np.ndarray:
    """Return float32 rows scaled to unit length (zero rows stay zero)."""
    vectors = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.maximum(norms, 1e-12)


@dataclass(frozen=True)
class Space:
    """Names with unit-length float32 vectors.

    Attributes
    ----------
    names : tuple of str
        The encoded texts, in row order.
    vectors : numpy.ndarray
        ``(len(names), dim)`` float32, rows of unit length.
    model_id : str
        Identifier of what produced the vectors (a model label or a run id), for titles.
    """

    names: tuple[str, ...]
    vectors: np.ndarray
    model_id: str

    def __post_init__(self) -> None:
        if len(self.names) != len(self.vectors):
            raise ValueError(f"{len(self.names)} names but {len(self.vectors)} vectors")

    def __len__(self) -> int:
        return len(self.names)

    @property
    def dim(self) -> int:
        """Dimensionality of the vectors."""
        return int(self.vectors.shape[1]) if self.vectors.ndim == 2 else 0

    def subset(self, rows) -> "Space":
        """A Space over the given row indices (same order as ``rows``)."""
        rows = np.asarray(rows, dtype=np.int64)
        return Space(tuple(self.names[i] for i in rows), self.vectors[rows], self.model_id)
