"""UMAP of large levels: a faiss k-nearest-neighbour graph handed to umap-learn, numba compiled once.

umap-learn spends much of a large layout in its own approximate neighbour search
(NN-descent, pynndescent). :func:`knn_graph` builds the same graph with faiss instead: an
exact inner-product search for up to :data:`EXACT_MAX` points (brute force is exact and, with
BLAS, fast at that size), an inverted-file index (IVF, many lists probed) beyond. The graph
goes to umap-learn through ``precomputed_knn`` (:func:`umap_layout`), which then skips its
search and only lays the graph out. Measured on this 2-core CPU (docs/scale.md), umap-learn's
time goes to the layout's epochs, not to NN-descent, so the faiss graph does not make it
faster: the Projection page keeps plain umap-learn and uses only the compilation cache below;
:func:`umap_layout` is for an exact neighbour graph, or for machines where the search dominates.

Compilation: umap-learn compiles its numba functions on first use in every process (10-40 s
on a loaded 2-core machine). :func:`enable_numba_cache` switches on numba's on-disk cache for
them (umap-learn marks only a few ``cache=True``), so the compiled code is written once per
install and loaded by later processes; :func:`start_warm_up` compiles (or loads) it in a
background thread, so an app that calls it at start pays nothing when the first UMAP is asked for.
"""

from __future__ import annotations

import logging
import threading
import time
import warnings

import numpy as np

logger = logging.getLogger(__name__)

# Beyond this many points an IVF index replaces the exact search: exact costs n^2 * dim
# multiply-adds (20k points: 17 s on this loaded 2-core machine, so 100k would take minutes)
EXACT_MAX = 50_000
# umap-learn's modules and those of pynndescent (its NN-descent search, most of it not cache=True)
_UMAP_MODULES = ("umap.umap_", "umap.layouts", "umap.utils", "umap.spectral", "umap.distances", "umap.sparse",
                 "pynndescent.pynndescent_", "pynndescent.utils", "pynndescent.rp_trees", "pynndescent.graph_utils",
                 "pynndescent.sparse", "pynndescent.distances")
_cache_enabled = False
_warm_up: threading.Thread | None = None
_warm_lock = threading.Lock()


def _unit_rows(vectors: np.ndarray) -> np.ndarray:
    vectors = np.ascontiguousarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return np.ascontiguousarray(vectors / np.where(norms > 0, norms, 1.0), dtype=np.float32)


def _index(vectors: np.ndarray, exact_max: int):
    """A faiss inner-product index over unit ``vectors``: flat (exact) or IVF."""
    import faiss  # imported here: only projections of large levels need it

    n, dim = vectors.shape
    if n <= exact_max:
        index = faiss.IndexFlatIP(dim)
        index.add(vectors)
        return index
    # about 4*sqrt(n) lists, trained on a sample of 40 points per list (faiss asks for 39), a
    # sixteenth of them probed: each query scans about 6% of the rows
    lists = int(4 * np.sqrt(n))
    quantizer = faiss.IndexFlatIP(dim)
    index = faiss.IndexIVFFlat(quantizer, dim, lists, faiss.METRIC_INNER_PRODUCT)
    rng = np.random.default_rng(0)
    index.train(vectors[rng.choice(n, size=min(n, 40 * lists), replace=False)])
    index.add(vectors)
    index.nprobe = max(1, lists // 16)
    return index


def knn_graph(vectors: np.ndarray, k: int, exact_max: int = EXACT_MAX) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` nearest neighbours of every row under cosine distance, each row first in its own list.

    Parameters
    ----------
    vectors : numpy.ndarray
        ``(n, dim)``; rows are normalised here (cosine).
    k : int
        Neighbours per row, the row itself included (umap-learn's convention).
    exact_max : int
        Up to this many rows the search is exact; beyond, an IVF index (approximate).

    Returns
    -------
    (indices, distances)
        ``(n, k)`` int64 row indices, nearest first, and float32 cosine distances (1 - cosine,
        0 for the row itself). Rows with fewer than ``k`` others get ``-1`` and ``inf``.
    """
    vectors = _unit_rows(vectors)
    n = len(vectors)
    index = _index(vectors, exact_max)
    scores, indices = index.search(vectors, k)
    indices = indices.astype(np.int64)
    distances = np.maximum(0.0, 1.0 - scores).astype(np.float32)
    distances[indices < 0] = np.inf
    # umap-learn expects each row to be its own nearest neighbour; an exact duplicate (or an
    # approximate search) can put another row first, or miss the row itself
    rows = np.arange(n)
    for row in np.flatnonzero(indices[:, 0] != rows):
        others = indices[row] != row
        keep_i, keep_d = indices[row][others][: k - 1], distances[row][others][: k - 1]
        indices[row] = np.concatenate([[row], keep_i])
        distances[row] = np.concatenate([[0.0], keep_d])
    distances[:, 0] = 0.0
    return indices, distances


def enable_numba_cache() -> None:
    """Switch on numba's on-disk cache for umap-learn's compiled functions (once per process).

    Must run before a function is first compiled in the process to take effect for it; later
    processes then load the compiled code instead of compiling it again. Harmless when numba
    cannot write its cache (it falls back to compiling, as before).
    """
    global _cache_enabled
    if _cache_enabled:
        return
    import importlib

    from numba.core.dispatcher import Dispatcher

    enabled = 0
    for name in _UMAP_MODULES:
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        for value in vars(module).values():
            # only functions defined in that module (re-exported ones are handled where they live)
            if isinstance(value, Dispatcher) and value.py_func.__module__ == name and not value.signatures:
                try:
                    value.enable_caching()
                    enabled += 1
                except (RuntimeError, TypeError, OSError) as error:  # e.g. no cache locator for the file
                    logger.debug("numba cache not enabled for %s: %s", value.py_func.__name__, error)
    _cache_enabled = True
    logger.info("numba on-disk cache enabled for %d umap-learn functions", enabled)


def umap_layout(vectors: np.ndarray, n_neighbors: int = 15, n_components: int = 2, min_dist: float = 0.1,
                seed: int = 0, init: str = "pca", exact_max: int = EXACT_MAX) -> np.ndarray:
    """UMAP (cosine) of ``vectors`` laid out from a faiss neighbour graph.

    The same settings as a plain ``umap.UMAP(metric="cosine")`` call; only the neighbour
    search differs (exact up to ``exact_max`` points, where NN-descent is approximate).

    Parameters
    ----------
    vectors : numpy.ndarray
        ``(n, dim)`` with ``n > n_neighbors``.
    n_neighbors, n_components, min_dist, seed, init
        As in ``umap.UMAP``.
    exact_max : int
        See :func:`knn_graph`.

    Returns
    -------
    numpy.ndarray
        ``(n, n_components)`` float32.
    """
    enable_numba_cache()
    import umap  # imported here: importing umap-learn costs seconds

    vectors = np.asarray(vectors, dtype=np.float32)
    started = time.perf_counter()
    indices, distances = knn_graph(vectors, n_neighbors, exact_max)
    logger.info("faiss %d-NN graph of %d points in %.1fs", n_neighbors, len(vectors), time.perf_counter() - started)
    reducer = umap.UMAP(n_neighbors=n_neighbors, n_components=n_components, min_dist=min_dist, metric="cosine",
                        init=init, random_state=seed, n_jobs=1, precomputed_knn=(indices, distances))
    with warnings.catch_warnings():
        # "no NNDescent object: transform unavailable" - bioviz never transforms new points
        warnings.filterwarnings("ignore", message=".*knn_search_index.*")
        return np.asarray(reducer.fit_transform(vectors), dtype=np.float32)


def warm_up(points: int = 4200) -> float:
    """Compile (or load from numba's cache) the code a UMAP layout needs; returns the seconds spent.

    Runs the Projection page's plain umap-learn path (cosine, PCA initialisation, fixed seed)
    on ``points`` random points: above umap-learn's exact-search size (4,096) so that its
    NN-descent code is compiled too; and the faiss path of :func:`umap_layout` on a few.
    """
    enable_numba_cache()
    import umap

    started = time.perf_counter()
    rng = np.random.default_rng(0)
    vectors = rng.normal(size=(points, 16)).astype(np.float32)
    umap.UMAP(n_neighbors=15, metric="cosine", init="pca", random_state=0, n_jobs=1,
              n_epochs=10).fit_transform(vectors)  # a few epochs compile the layout as well as 500
    umap_layout(vectors[:300], n_neighbors=10, seed=0)
    seconds = time.perf_counter() - started
    logger.info("UMAP warm-up in %.1fs", seconds)
    return seconds


def start_warm_up() -> threading.Thread:
    """Run :func:`warm_up` in a background daemon thread, once per process (later calls return it).

    For the app's start: the first UMAP a user asks for then finds the code compiled. Errors
    are logged, never raised (the layout would compile on demand as before).
    """
    global _warm_up

    def run() -> None:
        try:
            warm_up()
        except Exception:  # noqa: BLE001 - a warm-up must never take the app down
            logger.warning("UMAP warm-up failed; the first layout will compile on demand", exc_info=True)

    with _warm_lock:
        if _warm_up is None:
            _warm_up = threading.Thread(target=run, name="umap-warm-up", daemon=True)
            _warm_up.start()
        return _warm_up
