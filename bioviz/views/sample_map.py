"""A sample map of a level while it encodes: PCA of a class-stratified sample of the names encoded so far.

The Projection page's UMAP needs every name's vector; a first encoding of a large level takes
minutes. Meanwhile the names already stored (:meth:`bioviz.models.encoding_session.EncodingSession.partial`)
are a growing, unbiased sample of the level, and a PCA of a few thousand of them takes well under a
second: cheap enough to redo on every poll of the page's fragment, which UMAP (tens of seconds) is not.
The map is marked (:attr:`SampleMap.marker`) until every name is encoded, then the page draws its
usual layout.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from bioviz.models.encoding_session import PartialVectors
from bioviz.views.projection import pca_coordinates, stratified_sample

SAMPLE_CAP = 5_000  # points of a sample map: a PCA of 5,000 x 768 takes about 0.1 s, redone every poll


@dataclass(frozen=True)
class SampleMap:
    """2-D coordinates of a sample of the names encoded so far.

    Attributes
    ----------
    rows : numpy.ndarray
        ``int64`` rows of the level's names (sorted), at most the cap.
    coords : numpy.ndarray
        ``(len(rows), 2)`` float32 PCA coordinates, aligned with ``rows``.
    names_encoded, total : int
        Distinct names encoded so far, of all of the level's.
    """

    rows: np.ndarray
    coords: np.ndarray
    names_encoded: int
    total: int

    @property
    def complete(self) -> bool:
        """True once every name is encoded (the usual layout can then be computed)."""
        return self.names_encoded >= self.total

    @property
    def marker(self) -> str:
        """``sample map: 12,800 of 110,233 names encoded, refining`` (or ``complete: ...``).

        >>> SampleMap(np.zeros(0, np.int64), np.zeros((0, 2), np.float32), 12_800, 110_233).marker
        'sample map: 12,800 of 110,233 names encoded, refining'
        """
        if self.complete:
            return f"complete: all {self.total:,} names encoded"
        return f"sample map: {self.names_encoded:,} of {self.total:,} names encoded, refining"


def sample_map(partial: PartialVectors, labels: np.ndarray, *, cap: int = SAMPLE_CAP, seed: int = 0) -> SampleMap:
    """PCA coordinates of at most ``cap`` of the names encoded so far, drawn per class.

    Parameters
    ----------
    partial : PartialVectors
        The level's vectors stored so far (rows of the level's names, unit vectors).
    labels : numpy.ndarray
        Class index of every name of the level (``LevelView.labels``).
    cap : int
        Most points drawn: the sample is class-stratified
        (:func:`~bioviz.views.projection.stratified_sample`), so every class encoded so far shows.
    seed : int
        Seed of the sample and of the PCA: the same stored rows give the same map.

    Returns
    -------
    SampleMap
        Rows sorted ascending; no rows (and no PCA) while nothing is encoded.
    """
    # Sorted first: PartialVectors.rows follow the order rows were read in, which differs between
    # two reads of the same rows; sorting makes the sample depend on the rows alone.
    order = np.argsort(partial.rows, kind="stable")
    rows = np.asarray(partial.rows, dtype=np.int64)[order]
    vectors = np.asarray(partial.vectors, dtype=np.float32)[order]
    if len(rows) == 0:
        return SampleMap(rows, np.zeros((0, 2), dtype=np.float32), 0, partial.total)
    picked = stratified_sample(np.asarray(labels)[rows], cap, seed)
    coords = pca_coordinates(vectors[picked], 2, seed)
    return SampleMap(rows[picked], coords, partial.done, partial.total)
