"""2D/3D projections of Spaces: PCA at once, UMAP (cosine) when it is done, aligned pairs.

A comparison shows two Spaces over the same names. Each is projected on its own (UMAP with
the cosine metric, or PCA as the instant preview) and the second layout is rotated, scaled
and shifted onto the first with an orthogonal Procrustes fit, so the same names sit in
comparable places. Large views are capped with a class-stratified sample so every class
stays visible. Coordinates are cached on disk under ``BIOVIZ_HOME/projections`` as .npz,
keyed by the space fingerprint, the rows and the parameters; a damaged file there is set aside
and recomputed, and a write the disk refuses is skipped (:mod:`bioviz.cache_files`).
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
import weakref
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Callable

import numpy as np
from scipy.linalg import orthogonal_procrustes

from bioviz.errors import BiovizError
from bioviz.cache_files import read_cache, write_cache
from bioviz.paths import home
from bioviz.space import Space
from bioviz.views import fast_umap

logger = logging.getLogger(__name__)

CACHE_SCHEMA = 1  # bump when the way coordinates are computed changes
METHODS = ("pca", "umap")
Progress = Callable[[int, int, str], None]  # progress(done, total, message)


@dataclass(frozen=True)
class ProjectionParams:
    """Settings of one projection; part of the cache key.

    Attributes
    ----------
    method : str
        ``"umap"`` or ``"pca"``.
    n_components : int
        2 or 3.
    n_neighbors : int
        UMAP neighbourhood size (larger = more global structure).
    min_dist : float
        UMAP minimum distance between embedded points (smaller = tighter clusters).
    max_points : int
        Point cap; larger views are sampled per class (see :func:`stratified_sample`).
    seed : int
        Seed of the sample and of UMAP's optimisation (fixed seed = reproducible layout).
    """

    method: str = "umap"
    n_components: int = 2
    n_neighbors: int = 15
    min_dist: float = 0.1
    max_points: int = 20_000
    seed: int = 0

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise BiovizError(f"unknown projection method {self.method!r}: use one of {', '.join(METHODS)}")
        if self.n_components not in (2, 3):
            raise BiovizError(f"projections are 2D or 3D (got {self.n_components} components)")
        if self.n_neighbors < 2:
            raise BiovizError(f"n_neighbors must be at least 2 (got {self.n_neighbors})")
        if not 0.0 <= self.min_dist <= 1.0:
            raise BiovizError(f"min_dist must be between 0 and 1 (got {self.min_dist})")
        if self.max_points < 10:
            raise BiovizError(f"the point cap must be at least 10 (got {self.max_points})")

    def caption(self) -> str:
        """One line for figure captions."""
        if self.method == "pca":
            return f"PCA {self.n_components}D · cap {self.max_points:,} points · seed {self.seed}"
        return (f"UMAP {self.n_components}D (cosine) · n_neighbors {self.n_neighbors} · min_dist {self.min_dist:g}"
                f" · cap {self.max_points:,} points · seed {self.seed}")


def stratified_sample(labels: np.ndarray, cap: int, seed: int = 0) -> np.ndarray:
    """Row indices of at most ``cap`` rows, drawn per class so that every class is shown.

    Each class gets a share proportional to its size, but at least ``min(size, floor)``
    rows where ``floor`` is an even split of a tenth of the cap, so small classes do not
    vanish next to large ones.

    Parameters
    ----------
    labels : numpy.ndarray
        Class index of every row.
    cap : int
        Maximum number of rows returned.
    seed : int
        Seed of the draw.

    Returns
    -------
    numpy.ndarray
        Sorted ``int64`` row indices (all rows when there are at most ``cap``).
    """
    labels = np.asarray(labels)
    n = len(labels)
    if n <= cap:
        return np.arange(n, dtype=np.int64)
    classes, counts = np.unique(labels, return_counts=True)
    floor = max(1, cap // (10 * len(classes)))
    quota = np.minimum(counts, np.maximum(floor, np.floor(counts * cap / n).astype(np.int64)))
    # The floors may push the total over the cap: take the excess from the largest quotas.
    while quota.sum() > cap:
        quota[np.argmax(quota)] -= 1
    # Rounding down leaves some of the cap unused: give it to classes with rows left.
    spare = cap - int(quota.sum())
    room = counts - quota
    for i in np.argsort(-room):
        if spare <= 0:
            break
        extra = min(int(room[i]), spare)
        quota[i] += extra
        spare -= extra
    rng = np.random.default_rng(seed)
    rows = [rng.choice(np.flatnonzero(labels == c), size=int(q), replace=False) for c, q in zip(classes, quota)]
    return np.sort(np.concatenate(rows)).astype(np.int64)


_FINGERPRINTS: dict[int, tuple[weakref.ref, str]] = {}


def space_fingerprint(space: Space) -> str:
    """A short hash of a Space's names and vectors (cache key part).

    Not of its ``model_id``: that is a display label (a run's name, which the user can
    change), and the same vectors give the same coordinates whatever they are called.

    Memoised per Space object (Spaces are immutable, and pages reuse the same cached object
    on every rerun), so checking the projection cache does not rehash 20k vectors each time.
    """
    entry = _FINGERPRINTS.get(id(space))
    if entry is not None and entry[0]() is space:
        return entry[1]
    digest = hashlib.sha256()
    digest.update("\x1f".join(space.names).encode())
    digest.update(np.ascontiguousarray(space.vectors, dtype=np.float32).tobytes())
    value = digest.hexdigest()[:20]
    if len(_FINGERPRINTS) > 256:  # drop entries of Spaces that no longer exist
        for key in [k for k, (ref, _) in _FINGERPRINTS.items() if ref() is None]:
            del _FINGERPRINTS[key]
    _FINGERPRINTS[id(space)] = (weakref.ref(space), value)
    return value


def _rows_fingerprint(rows: np.ndarray) -> str:
    return hashlib.sha256(np.asarray(rows, dtype=np.int64).tobytes()).hexdigest()[:12]


def cache_path(space: Space, rows: np.ndarray, params: ProjectionParams) -> Path:
    """Where the coordinates of ``space[rows]`` under ``params`` are cached."""
    key = {"schema": CACHE_SCHEMA, "space": space_fingerprint(space), "rows": _rows_fingerprint(rows),
           "params": asdict(params)}
    method = umap_method(params, len(rows))
    if method is not None and method["name"] != "plain":  # plain umap-learn keeps the keys it always had
        key["umap_method"] = method
    payload = json.dumps(key, sort_keys=True)
    # the folder is created by the first write (bioviz.cache_files), which a full disk may refuse
    return home() / "projections" / f"{hashlib.sha256(payload.encode()).hexdigest()[:24]}.npz"


def pca_coordinates(vectors: np.ndarray, n_components: int = 2, seed: int = 0) -> np.ndarray:
    """PCA of ``vectors`` to ``n_components`` dimensions (float32), padded with zeros if needed."""
    from sklearn.decomposition import PCA  # imported here: scikit-learn takes seconds to import

    vectors = np.asarray(vectors, dtype=np.float32)
    k = min(n_components, vectors.shape[0], vectors.shape[1])
    coords = PCA(n_components=k, random_state=seed).fit_transform(vectors) if k > 0 else np.zeros((len(vectors), 0))
    if coords.shape[1] < n_components:  # fewer points or dimensions than components
        coords = np.hstack([coords, np.zeros((len(vectors), n_components - coords.shape[1]))])
    return coords.astype(np.float32)


def umap_coordinates(vectors: np.ndarray, params: ProjectionParams) -> np.ndarray:
    """UMAP (cosine metric) of ``vectors`` under ``params`` by plain umap-learn; PCA when there are too few points.

    UMAP needs more points than neighbours; for tiny inputs the neighbourhood is shrunk,
    and below 5 points PCA is returned (a layout of 4 points has no neighbourhoods).
    """
    vectors = np.asarray(vectors, dtype=np.float32)
    if len(vectors) < 5:
        return pca_coordinates(vectors, params.n_components, params.seed)
    # PCA initialisation (plain_layout): faster than spectral on large views, never fails on
    # disconnected neighbour graphs, and keeps the layout close to the PCA preview.
    return fast_umap.plain_layout(vectors, n_neighbors=params.n_neighbors, n_components=params.n_components,
                                  min_dist=params.min_dist, seed=params.seed)


def umap_method(params: ProjectionParams, n_points: int) -> dict | None:
    """The UMAP path (:func:`bioviz.views.fast_umap.umap_method`) ``params`` take for ``n_points``; None for PCA."""
    if params.method != "umap":
        return None
    return fast_umap.umap_method(n_points)


def _large_umap(vectors: np.ndarray, labels: np.ndarray | None, params: ProjectionParams, method: dict,
                progress: Progress | None) -> np.ndarray:
    """The cuML or landmark path of :func:`project` (``method`` from :func:`umap_method`)."""
    if method["name"] == "cuml":
        return fast_umap.cuml_layout(vectors, n_neighbors=params.n_neighbors, n_components=params.n_components,
                                     min_dist=params.min_dist, seed=params.seed)
    # landmarks stratified by class like the point cap, so every class is laid out by umap-learn itself
    strata = np.zeros(len(vectors), dtype=np.int64) if labels is None else labels
    landmarks = stratified_sample(strata, method["landmarks"], params.seed)
    return fast_umap.landmark_layout(vectors, landmarks, n_neighbors=params.n_neighbors,
                                     n_components=params.n_components, min_dist=params.min_dist,
                                     seed=params.seed, place_k=method["place_k"], progress=progress)


def project(space: Space, params: ProjectionParams, *, rows: np.ndarray | None = None, use_cache: bool = True,
            labels: np.ndarray | None = None, progress: Progress | None = None) -> np.ndarray:
    """Coordinates of ``space`` (or of ``space[rows]``) under ``params``, through the disk cache.

    UMAP of a view above :data:`bioviz.views.fast_umap.LANDMARK_THRESHOLD` points takes the
    landmark path (or cuML's on a GPU): see :func:`umap_method`.

    Parameters
    ----------
    space : Space
    params : ProjectionParams
    rows : numpy.ndarray, optional
        Row indices to project (all rows when omitted).
    use_cache : bool
        Read and write ``BIOVIZ_HOME/projections``.
    labels : numpy.ndarray, optional
        Class of every row of ``space``: the landmark path samples its landmarks per class.
    progress : callable, optional
        ``progress(done, total, message)`` while the layout computes (the message says the time
        left on the landmark path); called with ``done == total`` at the end.

    Returns
    -------
    numpy.ndarray
        ``(len(rows), n_components)`` float32.
    """
    rows = np.arange(len(space), dtype=np.int64) if rows is None else np.asarray(rows, dtype=np.int64)
    path = cache_path(space, rows, params) if use_cache else None
    if path is not None:
        coords = read_cache(path, lambda file: _read_coords(file, (len(rows), params.n_components)))
        if coords is not None:
            return coords
    started = time.perf_counter()
    vectors = space.vectors[rows]
    method = umap_method(params, len(rows))
    if method is None:
        coords = pca_coordinates(vectors, params.n_components, params.seed)
    elif method["name"] == "landmarks":
        labels = None if labels is None else np.asarray(labels)[rows]
        coords = _large_umap(vectors, labels, params, method, progress)  # reports its own steps
    else:
        if progress is not None:
            progress(0, 1, "cuML on the GPU" if method["name"] == "cuml" else "umap-learn")
        coords = (umap_coordinates(vectors, params) if method["name"] == "plain"
                  else _large_umap(vectors, None, params, method, None))
        if progress is not None:
            progress(1, 1, "done")
    logger.info("%s of %d names (%s) in %.1fs", params.method, len(rows), space.model_id, time.perf_counter() - started)
    if path is not None:
        write_cache(path, lambda handle: np.savez(handle, coords=coords), suffix=".npz")
    return coords


def project_sample(space: Space, labels: np.ndarray, params: ProjectionParams, *, use_cache: bool = True,
                   progress: Progress | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``(rows, coords)``: the class-stratified sample of ``params``' point cap, projected under ``params``.

    The rows are those :func:`project_pair` draws for the same ``labels`` and ``params``, so
    two spaces projected one at a time align row for row (:func:`align_pair`).

    Parameters
    ----------
    space : Space
    labels : numpy.ndarray
        Class index of every row of ``space``.
    params : ProjectionParams
    use_cache : bool
        Read and write ``BIOVIZ_HOME/projections``.
    progress : callable, optional
        ``progress(done, total, message)`` as :func:`project`'s, each message led by the
        number of names projected (``"20,000 names: ..."``).
    """
    rows = stratified_sample(labels, params.max_points, params.seed)
    step = None if progress is None else (
        lambda done, total, message: progress(done, total, f"{len(rows):,} names: {message}"))
    return rows, project(space, params, rows=rows, use_cache=use_cache, labels=labels, progress=step)


def _read_coords(path: Path, shape: tuple[int, int]) -> np.ndarray:
    """Cached coordinates; ValueError when the file holds anything but finite floats of ``shape``."""
    with np.load(path, allow_pickle=False) as data:
        coords = data["coords"]
    if coords.shape != shape or coords.dtype.kind != "f" or not np.isfinite(coords).all():
        raise ValueError(f"{coords.dtype} coordinates of shape {coords.shape}, expected {shape}")
    return coords


def procrustes_align(reference: np.ndarray, moving: np.ndarray) -> tuple[np.ndarray, float]:
    """Rotate/reflect, scale and shift ``moving`` onto ``reference`` (same rows, same order).

    Uses :func:`scipy.linalg.orthogonal_procrustes` on centred, unit-norm copies; the
    result is placed in the reference's frame at the reference's centre and RMS radius
    (not the fit's shrinking scale), so both panels share axes ranges and keep their size.

    Returns
    -------
    (aligned, disparity)
        The moved coordinates and the residual sum of squares of the normalised fit
        (0 = identical shapes, 1 = unrelated).
    """
    reference = np.asarray(reference, dtype=np.float64)
    moving = np.asarray(moving, dtype=np.float64)
    if reference.shape != moving.shape:
        raise ValueError(f"shapes differ: {reference.shape} vs {moving.shape}")
    ref_centre, mov_centre = reference.mean(axis=0), moving.mean(axis=0)
    ref0, mov0 = reference - ref_centre, moving - mov_centre
    ref_norm, mov_norm = np.linalg.norm(ref0), np.linalg.norm(mov0)
    if ref_norm == 0 or mov_norm == 0:
        return moving.astype(np.float32), 1.0
    ref0, mov0 = ref0 / ref_norm, mov0 / mov_norm
    rotation, scale = orthogonal_procrustes(mov0, ref0)
    disparity = float(np.sum((ref0 - mov0 @ rotation * scale) ** 2))
    # Rotated, not shrunk: the least-squares scale falls towards 0 as the layouts differ
    # (0.3 at disparity 0.9), which drew an unrelated layout as a small blob. At the
    # reference's RMS radius both panels keep the same size whatever the disparity.
    return (mov0 @ rotation * ref_norm + ref_centre).astype(np.float32), disparity


@dataclass(frozen=True)
class ProjectionPair:
    """Aligned coordinates of two Spaces over the same sampled rows.

    Attributes
    ----------
    rows : numpy.ndarray
        Row indices (into the level view's names) of the plotted points.
    coords_a, coords_b : numpy.ndarray
        Coordinates of the baseline and of the compared space (aligned to ``coords_a``).
    disparity : float
        Procrustes residual after alignment (0 = same layout).
    params : ProjectionParams
    seconds : float
        Time spent computing (near 0 when everything came from the cache).
    """

    rows: np.ndarray
    coords_a: np.ndarray
    coords_b: np.ndarray
    disparity: float
    params: ProjectionParams
    seconds: float


def project_pair(
    space_a: Space,
    space_b: Space,
    labels: np.ndarray,
    params: ProjectionParams,
    *,
    progress: Callable[[float, str], None] | None = None,
    use_cache: bool = True,
) -> ProjectionPair:
    """Project two Spaces over the same names and align the second to the first.

    Parameters
    ----------
    space_a, space_b : Space
        Baseline and compared space; their names must match row for row.
    labels : numpy.ndarray
        Class index per row (for the stratified point cap).
    params : ProjectionParams
    progress : callable, optional
        ``progress(fraction, message)`` before each projection and through its steps (fractions never go back).
    use_cache : bool
        Use the on-disk coordinate cache.

    Raises
    ------
    BiovizError
        If the spaces do not hold the same names.
    """
    if space_a.names != space_b.names:
        raise BiovizError(f"the two spaces hold different names ({len(space_a)} vs {len(space_b)}): "
                          "embed the same level view with both models")
    if len(labels) != len(space_a):
        raise BiovizError(f"{len(labels)} labels for {len(space_a)} names")
    started = time.perf_counter()
    rows = stratified_sample(labels, params.max_points, params.seed)
    report = progress or (lambda fraction, message: None)
    what = "UMAP" if params.method == "umap" else "PCA"
    coords = []
    for index, space in enumerate((space_a, space_b)):
        title = f"{what} of {len(rows):,} names · {space.model_id}"
        report(index / 2, title)
        # the landmark path reports its steps: each space fills its half of the bar
        step = (lambda done, total, message, index=index, title=title:
                report((index + done / total) / 2, f"{title}: {message}"))
        coords.append(project(space, params, rows=rows, use_cache=use_cache, labels=labels, progress=step))
    coords_a, coords_b = coords
    report(1.0, "aligned")
    return align_pair(rows, coords_a, coords_b, params, seconds=time.perf_counter() - started)


def align_pair(rows: np.ndarray, coords_a: np.ndarray, coords_b: np.ndarray, params: ProjectionParams, *,
               seconds: float = 0.0) -> ProjectionPair:
    """A :class:`ProjectionPair` from two projections of the same rows, ``b`` aligned to ``a``."""
    aligned, disparity = procrustes_align(coords_a, coords_b)
    return ProjectionPair(np.asarray(rows, dtype=np.int64), coords_a, aligned, disparity, params, seconds)


def preview_params(params: ProjectionParams) -> ProjectionParams:
    """The PCA settings shown at once while ``params`` (UMAP) computes."""
    return replace(params, method="pca")


def pair_is_cached(space_a: Space, space_b: Space, labels: np.ndarray, params: ProjectionParams) -> bool:
    """True when :func:`project_pair` would read both projections from the disk cache.

    Pages use it to skip the PCA preview when the UMAP layout is already known.
    """
    rows = stratified_sample(labels, params.max_points, params.seed)
    return all(cache_path(space, rows, params).exists() for space in (space_a, space_b))
