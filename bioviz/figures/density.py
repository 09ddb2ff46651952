"""Where each class sits on a 2-D map: its density, the region holding most of its names, its peak.

An ontology-labelled map draws, for every class, the contour of the smallest region holding
half of its names and writes the class's name (from the ontology) at the peak of its
density, so a screenshot explains itself without a legend of 23 entries. Densities are
histograms on one grid shared by all classes, smoothed with a Gaussian
(``scipy.ndimage.gaussian_filter``): one pass over the points, so 100k names take a few
tens of milliseconds and need no sampling.

Also the axis ranges that fit the bulk of a layout, so a few far outliers do not squeeze the
cloud into a corner of the panel.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.ndimage import gaussian_filter


def bulk_range(values: np.ndarray, quantiles: tuple[float, float] = (1.0, 99.0), reach: float = 0.25,
               pad: float = 0.04) -> tuple[float, float]:
    """An axis range that fits the bulk of ``values`` and leaves far outliers out.

    Values further than ``reach`` times the ``quantiles`` span beyond those quantiles are
    outliers; the range covers every other value plus ``pad`` of its span on each side. A
    small cluster just beside the cloud stays in; a point ten spans away does not.

    >>> values = np.r_[np.linspace(0, 10, 1000), 200.0]
    >>> [round(v, 1) for v in bulk_range(values)]
    [-0.4, 10.4]
    """
    values = np.asarray(values, dtype=float)
    values = values[np.isfinite(values)]
    if not len(values):
        return (-1.0, 1.0)
    low, high = np.percentile(values, quantiles)
    span = max(high - low, 1e-9)
    kept = values[(values >= low - reach * span) & (values <= high + reach * span)]
    lo, hi = float(kept.min()), float(kept.max())
    margin = max(hi - lo, 1e-6) * pad
    return lo - margin, hi + margin


@dataclass(frozen=True)
class ClassDensity:
    """One class's smoothed density on the map.

    Attributes
    ----------
    class_index : int
        Index into the level view's classes.
    peak : (float, float)
        Map coordinates of the density's maximum: where the class's name goes.
    x, y : numpy.ndarray
        Grid cell centres of ``z``'s columns and rows (a crop around the class).
    z : numpy.ndarray
        Density (names per cell, smoothed) on the crop.
    level : float
        The density above which half of the class's names lie (the contour to draw).
    points : int
        Names of the class on the map.
    """

    class_index: int
    peak: tuple[float, float]
    x: np.ndarray
    y: np.ndarray
    z: np.ndarray
    level: float
    points: int


def class_densities(coords: np.ndarray, labels: np.ndarray, x_range: tuple[float, float],
                    y_range: tuple[float, float], *, bins: int = 80, smooth: float = 1.5, mass: float = 0.5,
                    min_points: int = 10) -> list[ClassDensity]:
    """The density of every class with at least ``min_points`` names inside the ranges.

    Parameters
    ----------
    coords : numpy.ndarray
        ``(n, 2)`` map coordinates.
    labels : numpy.ndarray
        Class index of each point.
    x_range, y_range : (float, float)
        The drawn area; points outside it (outliers) are left out.
    bins : int
        Grid cells along the longer side (square cells).
    smooth : float
        Gaussian smoothing, in cells.
    mass : float
        Share of a class's names inside its contour.
    min_points : int
        Classes with fewer names on the map get no density (their peak would be a single name).

    Returns
    -------
    list of ClassDensity
        Largest classes first.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> coords = np.r_[rng.normal((0, 0), 0.5, (500, 2)), rng.normal((5, 5), 0.5, (300, 2))]
    >>> labels = np.r_[np.zeros(500, int), np.ones(300, int)]
    >>> [(d.class_index, [round(v) for v in d.peak]) for d in class_densities(coords, labels, (-2, 7), (-2, 7))]
    [(0, [0, 0]), (1, [5, 5])]
    """
    coords = np.asarray(coords, dtype=float)
    labels = np.asarray(labels, dtype=np.int64)
    (x0, x1), (y0, y1) = x_range, y_range
    cell = max(x1 - x0, y1 - y0) / bins
    nx, ny = max(1, int(np.ceil((x1 - x0) / cell))), max(1, int(np.ceil((y1 - y0) / cell)))
    inside = ((coords[:, 0] >= x0) & (coords[:, 0] <= x1) & (coords[:, 1] >= y0) & (coords[:, 1] <= y1))
    ix = np.clip(((coords[inside, 0] - x0) / cell).astype(np.int64), 0, nx - 1)
    iy = np.clip(((coords[inside, 1] - y0) / cell).astype(np.int64), 0, ny - 1)
    classes, local = np.unique(labels[inside], return_inverse=True)
    counts = np.bincount(local * ny * nx + iy * nx + ix, minlength=len(classes) * ny * nx)
    counts = counts.reshape(len(classes), ny, nx).astype(float)
    xs, ys = x0 + (np.arange(nx) + 0.5) * cell, y0 + (np.arange(ny) + 0.5) * cell
    out = []
    for k, class_index in enumerate(classes):
        total = counts[k].sum()
        if total < min_points:
            continue
        density = gaussian_filter(counts[k], smooth, mode="constant")
        row, col = np.unravel_index(int(np.argmax(density)), density.shape)
        ordered = np.sort(density.ravel())[::-1]
        cumulative = np.cumsum(ordered) / ordered.sum()
        level = float(ordered[min(int(np.searchsorted(cumulative, mass)), len(ordered) - 1)])
        # Crop to the cells the contour can pass through (plus one), so the figure carries a
        # small grid per class rather than the whole map.
        rows, cols = np.nonzero(density >= level / 2)
        r0, r1 = max(rows.min() - 1, 0), min(rows.max() + 2, ny)
        c0, c1 = max(cols.min() - 1, 0), min(cols.max() + 2, nx)
        out.append(ClassDensity(int(class_index), (float(xs[col]), float(ys[row])), xs[c0:c1], ys[r0:r1],
                                density[r0:r1, c0:c1], level, int(total)))
    return sorted(out, key=lambda d: -d.points)
