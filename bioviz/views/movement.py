"""What training moved: each name's displacement between two aligned layouts, and whose neighbourhood changed.

Two measures per name, computed on the names a Projection draws (its class-stratified sample):

* the **displacement** of the name between the baseline layout and the compared layout
  aligned onto it (Procrustes, :func:`bioviz.views.projection.align_pair`), in units of the
  baseline layout's RMS radius, so numbers read the same whatever the layout's scale;
* its **same-class precision@k** under each model: the share of its ``k`` nearest names
  (cosine on the original vectors, not the 2-D layout) that belong to its own class. The
  change tells whether training pulled the name's class around it, and, read per split
  part, whether that held for names and classes the run never saw (zero-shot).

Nearest names come from an exact inner-product search (faiss ``IndexFlatIP``) among the
names measured: the layout's names, or a class-stratified sample of at most
:data:`MAX_NAMES` of them. The search costs names² x dimensions per model, so the sample keeps
a 20k-point layout's measure to a few seconds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
import pandas as pd

from bioviz.ontology.levels import LevelView
from bioviz.space import Space
from bioviz.views.projection import procrustes_align, stratified_sample

# Split parts, in the order tables and legends list them (the names bioviz.ontology.Split uses).
PARTS = ("train", "validation", "test", "zero-shot", "unused")
DEFAULT_K = 10
MAX_NAMES = 5_000  # names measured at most (a class-stratified sample of the layout's)
SEARCH_BLOCK = 1_024  # queries per faiss search, so progress can be reported between blocks


@dataclass(frozen=True)
class Movement:
    """Per-name movement between a baseline and a compared model, over the same sampled names.

    Attributes
    ----------
    rows : numpy.ndarray
        View rows of the names (the projection's sample), in the layout's order.
    displacement : numpy.ndarray
        Distance each name moved between the baseline layout and the aligned compared one,
        in units of the baseline layout's RMS radius.
    precision_a, precision_b : numpy.ndarray
        Same-class precision@k under the baseline and the compared model (NaN for a name
        whose class has no other sampled name).
    kept : numpy.ndarray
        Share of a name's ``k`` nearest names that are the same under both models.
    k : int
        Neighbours per name.
    """

    rows: np.ndarray
    displacement: np.ndarray
    precision_a: np.ndarray
    precision_b: np.ndarray
    kept: np.ndarray
    k: int

    @property
    def change(self) -> np.ndarray:
        """``precision_b - precision_a``: positive where training gathered the name's class around it."""
        return self.precision_b - self.precision_a


def layout_displacement(coords_a: np.ndarray, coords_b: np.ndarray) -> np.ndarray:
    """Distance of each point between two aligned layouts, over the RMS radius of ``coords_a``.

    >>> a = np.array([[0.0, 0.0], [2.0, 0.0]])
    >>> layout_displacement(a, a + [0.0, 1.0]).tolist()
    [1.0, 1.0]
    """
    coords_a = np.asarray(coords_a, dtype=np.float64)
    coords_b = np.asarray(coords_b, dtype=np.float64)
    if coords_a.shape != coords_b.shape:
        raise ValueError(f"shapes differ: {coords_a.shape} vs {coords_b.shape}")
    radius = np.sqrt(np.mean(np.sum((coords_a - coords_a.mean(axis=0)) ** 2, axis=1))) if len(coords_a) else 0.0
    return np.linalg.norm(coords_b - coords_a, axis=1) / (radius or 1.0)


def nearest_names(vectors: np.ndarray, k: int, progress: Callable[[int, int], None] | None = None) -> np.ndarray:
    """``(n, k)`` indices of each row's ``k`` nearest other rows by inner product (itself left out).

    Fewer than ``k + 1`` rows give ``n - 1`` columns. A duplicate of a row may rank above
    the row itself; the row is removed wherever it appears, else the last hit is dropped.
    ``progress(done, n)`` is called after each block of queries.
    """
    import faiss  # imported here: faiss takes a noticeable time to import

    vectors = np.ascontiguousarray(vectors, dtype=np.float32)
    n = len(vectors)
    k = min(k, n - 1)
    if k <= 0:
        return np.zeros((n, 0), dtype=np.int64)
    index = faiss.IndexFlatIP(vectors.shape[1])
    index.add(vectors)
    blocks = []
    for start in range(0, n, SEARCH_BLOCK):
        blocks.append(index.search(vectors[start:start + SEARCH_BLOCK], k + 1)[1])
        if progress is not None:
            progress(min(start + SEARCH_BLOCK, n), n)
    hits = np.vstack(blocks)
    not_self = hits != np.arange(n)[:, None]
    # A stable sort puts the hits that are not the row itself first, in rank order.
    order = np.argsort(~not_self, axis=1, kind="stable")
    return np.take_along_axis(hits, order, axis=1)[:, :k].astype(np.int64)


def same_class_precision(neighbours: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """Share of each row's neighbours in its own class, out of what its class allows.

    A row whose class has only ``m < k`` other names is scored out of ``m`` (all of them
    nearest is a perfect score); a class of one name gives NaN.

    >>> same_class_precision(np.array([[1, 2], [0, 2], [0, 1]]), np.array([0, 0, 1])).tolist()
    [1.0, 1.0, nan]
    """
    labels = np.asarray(labels)
    k = neighbours.shape[1]
    sizes = np.bincount(labels)[labels]
    reachable = np.minimum(k, sizes - 1).astype(np.float64)
    same = (labels[neighbours] == labels[:, None]).sum(axis=1) if k else np.zeros(len(labels))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(reachable > 0, same / np.where(reachable > 0, reachable, 1), np.nan)


def neighbours_kept(first: np.ndarray, second: np.ndarray) -> np.ndarray:
    """Share of each row's neighbours in ``first`` that are also among its neighbours in ``second``."""
    if first.shape[1] == 0:
        return np.ones(len(first))
    return np.array([len(np.intersect1d(a, b, assume_unique=True)) for a, b in zip(first, second)]) / first.shape[1]


def measure_movement(vectors_a: np.ndarray, vectors_b: np.ndarray, labels: np.ndarray, *, rows: np.ndarray,
                     coords_a: np.ndarray, coords_b: np.ndarray, k: int = DEFAULT_K, max_names: int = MAX_NAMES,
                     progress: Callable[[float, str], None] | None = None) -> Movement:
    """Displacement and neighbourhood change of the sampled names between two models.

    Parameters
    ----------
    vectors_a, vectors_b : numpy.ndarray
        Unit vectors of every name of the level view under each model (``Space.vectors``).
    labels : numpy.ndarray
        Class index per view row (``LevelView.labels``).
    rows : numpy.ndarray
        View rows of the layout's names (the projection's sample).
    coords_a, coords_b : numpy.ndarray
        Their layouts, ``coords_b`` aligned onto ``coords_a``.
    k : int
        Nearest names per name (among the measured ones).
    max_names : int
        More rows than this are measured on a class-stratified sample of them (seed 0).
    progress : callable, optional
        ``progress(fraction, message)`` while the two neighbour searches run.

    Returns
    -------
    Movement
        Over the measured rows (``Movement.rows``: all of ``rows``, or the sample).
    """
    rows = np.asarray(rows, dtype=np.int64)
    if len(vectors_a) != len(vectors_b):
        raise ValueError(f"the two models embed different name lists ({len(vectors_a)} vs {len(vectors_b)} names)")
    kept = stratified_sample(np.asarray(labels)[rows], max_names)
    rows, coords_a, coords_b = rows[kept], np.asarray(coords_a)[kept], np.asarray(coords_b)[kept]
    sample_labels = np.asarray(labels)[rows]
    near_a = nearest_names(np.asarray(vectors_a)[rows], k, _half(progress, 0, "baseline"))
    near_b = nearest_names(np.asarray(vectors_b)[rows], k, _half(progress, 1, "compared"))
    return Movement(rows, layout_displacement(coords_a, coords_b), same_class_precision(near_a, sample_labels),
                    same_class_precision(near_b, sample_labels), neighbours_kept(near_a, near_b), near_a.shape[1])


def training_movement(space_a: Space, space_b: Space, labels: np.ndarray, rows: np.ndarray, *, coords_a: np.ndarray,
                      coords_b: np.ndarray, k: int = DEFAULT_K, max_names: int = MAX_NAMES,
                      progress: Callable[[float, str], None] | None = None) -> tuple[Movement, np.ndarray, np.ndarray]:
    """What training moved between two projections of the same rows: ``b`` aligned onto ``a``, then measured.

    The alignment is the Projection figure's (:func:`bioviz.views.projection.align_pair`), so
    the arrows start and end where the figure draws the names.

    Parameters
    ----------
    space_a, space_b : Space
        Every name of the level view under the baseline and the compared model.
    labels : numpy.ndarray
        Class index per view row (``LevelView.labels``).
    rows : numpy.ndarray
        View rows of the layout's names (the projection's sample; unique).
    coords_a, coords_b : numpy.ndarray
        The two layouts of ``rows``, not aligned.
    k, max_names, progress
        As :func:`measure_movement`.

    Returns
    -------
    (Movement, numpy.ndarray, numpy.ndarray)
        The movement and the aligned coordinates of the measured names (``Movement.rows``)
        under each model.
    """
    rows = np.asarray(rows, dtype=np.int64)
    coords_a = np.asarray(coords_a)
    aligned, _ = procrustes_align(coords_a, coords_b)
    result = measure_movement(space_a.vectors, space_b.vectors, labels, rows=rows, coords_a=coords_a, coords_b=aligned,
                              k=k, max_names=max_names, progress=progress)
    order = np.argsort(rows, kind="stable")
    measured = order[np.searchsorted(rows, result.rows, sorter=order)]  # the measured rows' places in the layout
    return result, coords_a[measured], aligned[measured]


def _half(progress: Callable[[float, str], None] | None, half: int, which: str) -> Callable[[int, int], None] | None:
    """A ``progress(done, total)`` of one model's search, reported as half ``half`` of the whole."""
    if progress is None:
        return None
    return lambda done, total: progress((half + done / max(total, 1)) / 2, f"nearest names under the {which} model")


def movers_table(view: LevelView, movement: Movement, parts: np.ndarray | None = None) -> pd.DataFrame:
    """One row per name, the largest neighbourhood change first (then the largest displacement).

    Columns: ``name``, ``concept``, ``class``, ``class_label``, ``part`` (split part; ``unused``
    without a split), ``precision_a``, ``precision_b``, ``change``, ``kept`` (share of
    neighbours both models share) and ``displacement``. Also the movers table's CSV.
    """
    rows = movement.rows
    frame = pd.DataFrame({
        "name": [view.names[r] for r in rows],
        "concept": [view.name_concepts[r] for r in rows],
        "class": [view.classes[view.labels[r]] for r in rows],
        "class_label": [view.class_labels[view.labels[r]] for r in rows],
        "part": np.asarray(parts, dtype=object)[rows] if parts is not None else "unused",
        "precision_a": np.round(movement.precision_a, 4),
        "precision_b": np.round(movement.precision_b, 4),
        "change": np.round(movement.change, 4),
        "kept": np.round(movement.kept, 4),
        "displacement": np.round(movement.displacement, 4),
    })
    order = np.lexsort((-movement.displacement, -np.nan_to_num(np.abs(movement.change), nan=-1.0)))
    return frame.iloc[order].reset_index(drop=True)


def part_summary(table: pd.DataFrame) -> pd.DataFrame:
    """Means per split part of a :func:`movers_table`: does the change hold for unseen names and classes?

    Columns: ``part``, ``names``, ``precision_a``, ``precision_b``, ``change``, ``kept``,
    ``displacement``; parts in :data:`PARTS` order, absent parts left out.
    """
    columns = ["precision_a", "precision_b", "change", "kept", "displacement"]
    grouped = table.groupby("part", sort=False)
    summary = grouped[columns].mean().round(4)
    summary.insert(0, "names", grouped.size())
    order = [p for p in PARTS if p in summary.index] + [p for p in summary.index if p not in PARTS]
    return summary.loc[order].reset_index()


def arrow_rows(movement: Movement, labels: np.ndarray, class_index: int | None = None,
               count: int = 150) -> np.ndarray:
    """Positions (into ``movement.rows``) of the names to draw arrows for, the furthest moved first.

    ``class_index`` keeps only that class's names (else the top movers of the whole layout);
    at most ``count`` arrows, so the map stays legible.
    """
    candidates = np.arange(len(movement.rows))
    if class_index is not None:
        candidates = candidates[np.asarray(labels)[movement.rows] == class_index]
    order = np.argsort(-movement.displacement[candidates], kind="stable")
    return candidates[order[:max(0, int(count))]]
