"""The encoder of a vectors file: each name's row of the file, never a vector made up for a name it lacks.

A name the file holds (exactly, or normalised: :func:`bioviz.models.vectors_file.match_key`)
gets its row; a name it lacks refuses the whole request in one line
(:class:`MissingVectors`), so a level's uncovered names are left out before they are asked
for (:mod:`bioviz.models.vectors_coverage`), never given a silent zero vector.
"""

from __future__ import annotations

import numpy as np

from bioviz.errors import ModelError, shown_list
from bioviz.models.encoders import Encoder, Progress
from bioviz.models.model_spec import ModelSpec
from bioviz.models.vectors_file import VectorsFile, open_vectors


class MissingVectors(ModelError):
    """Names a vectors file has no vector for (one line: how many, the first few)."""


class VectorsFileEncoder(Encoder):
    """Names -> rows of a vectors file (:class:`~bioviz.models.vectors_file.VectorsFile`), read from its memory map.

    Parameters
    ----------
    ref : ModelSpec
        A MODEL of kind ``vectors``.
    """

    def __init__(self, ref: ModelSpec) -> None:
        self.model_spec = ref
        self.spec = ref.spec
        self.label = ref.label
        self.path = ref.path  # the file: what a head run trained on it starts from (registry)
        self.file: VectorsFile = open_vectors(ref.path)
        self.fingerprint = self.file.fingerprint
        self.dim = self.file.dim

    def encode(self, texts, batch_size: int = 64, progress: Progress | None = None) -> np.ndarray:
        """The file's rows of ``texts`` (unit float32, a copy of just those rows).

        Raises
        ------
        MissingVectors
            Some texts have no vector in the file.
        """
        texts = list(texts)
        rows = self.file.rows(texts)
        missing = [t for t, row in zip(texts, rows) if row < 0]
        if missing:
            raise MissingVectors(f"{len(missing):,} names have no vector in {self.label} "
                                 f"(e.g. {shown_list(missing[:3])}); a vectors file answers only its own names")
        out = np.asarray(self.file.vectors[rows], dtype=np.float32)  # fancy indexing copies only these rows
        if progress is not None:
            progress(len(texts), len(texts))
        return out

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.label!r}, {len(self.file.names):,} names, dim={self.dim})"
