"""UMAP of large levels: landmarks laid out by umap-learn, the rest placed by faiss; numba compiled once.

Large views (issue 16): :func:`landmark_layout` fits umap-learn on a sample of landmark points
(class-stratified by the caller) and places every other point at the membership-weighted mean
of its nearest landmarks' coordinates (faiss search; the weights umap-learn's own ``transform``
starts from), reporting progress through the landmark fit's epochs and the placement's chunks.
On this 2-core CPU umap-learn's time goes to the layout's epochs, which grow with the points
laid out: fitting a fixed number of landmarks bounds them (docs/scale.md "UMAP").
:func:`umap_method` says which path a view of ``n`` points takes (part of the projection cache
key): cuML's UMAP when cuML and a CUDA device are present (:func:`cuml_layout`), landmarks above
:data:`LANDMARK_THRESHOLD` points, plain umap-learn (:func:`plain_layout`) below.

Compilation: umap-learn compiles its numba functions on first use in every process (10-40 s
on a loaded 2-core machine). :func:`enable_numba_cache` switches on numba's on-disk cache for
them (umap-learn marks only a few ``cache=True``), so the compiled code is written once per
install and loaded by later processes; :func:`start_warm_up` compiles (or loads) it in a
background thread (the app starts it: :mod:`bioviz.warmup`), so the first UMAP asked for
finds it compiled.
"""

from __future__ import annotations

import functools
import importlib
import logging
import threading
import time

from typing import Callable

import numpy as np

from bioviz.models.encoding_estimate import time_left

logger = logging.getLogger(__name__)

# Views above this many points take the landmark path (:func:`landmark_layout`); chosen from
# benchmarks/bench_umap.py (docs/scale.md "UMAP"): below it plain umap-learn takes well under a minute
LANDMARK_THRESHOLD = 50_000
# Landmarks fitted by umap-learn: chosen by trustworthiness on a validation sample (docs/scale.md)
LANDMARKS = 20_000
PLACE_K = 15  # nearest landmarks that place a point (umap-learn's n_neighbors)
PLACE_CHUNK = 16_384  # points placed per faiss search (one progress step each)
# Up to this many landmarks, the placement's search is exact; beyond, an IVF index
PLACE_EXACT_MAX = 5_000
# The placement's IVF index probes 1/64 of its lists: 4x faster than 1/16 and the same 15
# nearest landmarks (recall 1.0 on 2,000 checked points, 20k landmarks; docs/scale.md)
PLACE_PROBE_DIVISOR = 64
# Seconds per unit of each step of the landmark path, measured on this 2-core machine (load
# average 11-14): per landmark for the neighbour graph, per landmark and epoch for the layout,
# per placed point. Only their ratios matter: they share out the progress bar, so that the
# time left it shows holds from the first step on (1M points: most of it is the placement).
_COST = {"graph": 5.5e-4, "epoch": 6.75e-6, "place": 1.3e-4}
_EPOCH_PROGRESS = "bioviz_epoch_progress"  # tqdm_kwds key our hook on umap-learn's epoch loop takes out
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


def _index(vectors: np.ndarray, exact_max: int, probe_divisor: int):
    """A faiss inner-product index over unit ``vectors``: flat (exact) or IVF (1/``probe_divisor`` of lists probed)."""
    import faiss  # imported here: only projections of large levels need it

    n, dim = vectors.shape
    if n <= exact_max:
        index = faiss.IndexFlatIP(dim)
        index.add(vectors)
        return index
    # about 4*sqrt(n) lists (fewer for small n: faiss asks for 39 training points per list),
    # trained on a sample of 40 points per list; 1/probe_divisor of them probed
    lists = max(1, min(int(4 * np.sqrt(n)), n // 39))
    quantizer = faiss.IndexFlatIP(dim)
    index = faiss.IndexIVFFlat(quantizer, dim, lists, faiss.METRIC_INNER_PRODUCT)
    rng = np.random.default_rng(0)
    index.train(vectors[rng.choice(n, size=min(n, 40 * lists), replace=False)])
    index.add(vectors)
    index.nprobe = max(1, lists // probe_divisor)
    return index


def enable_numba_cache() -> None:
    """Switch on numba's on-disk cache for umap-learn's compiled functions (once per process).

    Must run before a function is first compiled in the process to take effect for it; later
    processes then load the compiled code instead of compiling it again. Harmless when numba
    cannot write its cache (it falls back to compiling, as before).
    """
    global _cache_enabled
    if _cache_enabled:
        return
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


def warm_up(points: int = 4200) -> float:
    """Compile (or load from numba's cache) the code a UMAP layout needs; returns the seconds spent.

    Runs the Projection page's plain umap-learn path (cosine, PCA initialisation, fixed seed)
    on ``points`` random points: above umap-learn's exact-search size (4,096) so that its
    NN-descent code is compiled too; then the landmark path's placement (:func:`place_points`).
    """
    enable_numba_cache()
    import umap

    started = time.perf_counter()
    rng = np.random.default_rng(0)
    vectors = rng.normal(size=(points, 16)).astype(np.float32)
    coords = umap.UMAP(n_neighbors=15, metric="cosine", init="pca", random_state=0, n_jobs=1,
                       n_epochs=10).fit_transform(vectors)  # a few epochs compile the layout as well as 500
    place_points(vectors[300:600], vectors[:300], coords[:300])
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


Progress = Callable[[int, int, str], None]


def _install_epoch_hook() -> None:
    """Let ``tqdm_kwds`` carry a per-epoch callback into umap-learn's layout loop (once per process).

    umap-learn's optimisation loops iterate ``tqdm(range(n_epochs), **tqdm_kwds)`` and offer no
    other hook. The wrapper takes :data:`_EPOCH_PROGRESS` out of the keywords (tqdm refuses
    unknown ones) and calls it after every epoch; without it, it is tqdm itself. Stateless, so
    layouts running in other threads (the background warm-up) are unaffected.
    """
    import umap.layouts as layouts

    original = layouts.tqdm
    if getattr(original, "_bioviz_epoch_hook", False):
        return

    def epochs(iterable, *args, **kwargs):
        report = kwargs.pop(_EPOCH_PROGRESS, None)
        bar = original(iterable, *args, **kwargs)
        if report is None:
            return bar
        return _reporting(bar, len(iterable), report)

    epochs._bioviz_epoch_hook = True
    layouts.tqdm = epochs


def _reporting(bar, total: int, report: Callable[[int, int], None]):
    done = 0
    for item in bar:
        yield item
        done += 1
        report(done, total)  # after the epoch's work (the loop asks for the next item)


def plain_layout(vectors: np.ndarray, *, n_neighbors: int, n_components: int, min_dist: float, seed: int,
                on_epoch: Callable[[int, int], None] | None = None) -> np.ndarray:
    """umap-learn as the Projection page has always called it (cosine, PCA initialisation, fixed seed).

    ``on_epoch(done, n_epochs)`` is called after every optimisation epoch when given.
    ``n_neighbors`` shrinks to ``n - 1`` for tiny inputs.
    """
    enable_numba_cache()
    _install_epoch_hook()
    import umap

    n = len(vectors)
    reducer = umap.UMAP(n_neighbors=min(n_neighbors, n - 1), n_components=n_components, min_dist=min_dist,
                        metric="cosine", init="pca" if n > n_components + 1 else "random", random_state=seed,
                        n_jobs=1, tqdm_kwds={_EPOCH_PROGRESS: on_epoch} if on_epoch else None)
    return np.asarray(reducer.fit_transform(vectors), dtype=np.float32)


def place_points(vectors: np.ndarray, landmarks: np.ndarray, coords: np.ndarray, *, k: int = PLACE_K,
                 chunk: int = PLACE_CHUNK, exact_max: int = PLACE_EXACT_MAX,
                 on_chunk: Callable[[int, int], None] | None = None) -> np.ndarray:
    """Coordinates of ``vectors`` from their ``k`` nearest ``landmarks`` (cosine) laid out at ``coords``.

    Each point goes to the weighted mean of its nearest landmarks' coordinates, with umap-learn's
    fuzzy membership weights (``smooth_knn_dist``, local connectivity 0, as ``UMAP.transform``
    uses for new points): the nearest landmarks weigh most, far ones almost nothing.

    Parameters
    ----------
    vectors : numpy.ndarray
        ``(m, dim)`` points to place.
    landmarks : numpy.ndarray
        ``(L, dim)`` landmark vectors.
    coords : numpy.ndarray
        ``(L, n_components)`` their layout.
    k : int
        Landmarks per point (at most ``L``).
    chunk : int
        Points searched at a time; ``on_chunk(done, total)`` after each.
    exact_max : int
        Up to this many landmarks the search is exact, beyond it an IVF index (:func:`_index`).

    Returns
    -------
    numpy.ndarray
        ``(m, n_components)`` float32.
    """
    from umap.umap_ import smooth_knn_dist

    k = min(k, len(landmarks))
    index = _index(_unit_rows(landmarks), exact_max, PLACE_PROBE_DIVISOR)
    coords = np.asarray(coords, dtype=np.float64)
    placed = np.empty((len(vectors), coords.shape[1]), dtype=np.float32)
    for start in range(0, len(vectors), chunk):
        part = _unit_rows(vectors[start:start + chunk])
        scores, indices = index.search(part, k)
        found = indices >= 0  # an IVF search may come back short; missing neighbours weigh nothing
        distances = np.where(found, np.maximum(0.0, 1.0 - scores), np.inf).astype(np.float32)
        sigmas, rhos = smooth_knn_dist(np.where(found, distances, 2.0).astype(np.float32), float(k),
                                       local_connectivity=0.0)
        weights = np.exp(-np.maximum(0.0, distances - rhos[:, None]) / sigmas[:, None]) * found
        weights /= np.maximum(weights.sum(axis=1, keepdims=True), 1e-12)
        placed[start:start + len(part)] = np.einsum("ik,ikc->ic", weights, coords[np.where(found, indices, 0)])
        if on_chunk is not None:
            on_chunk(min(start + chunk, len(vectors)), len(vectors))
    return placed


def _step_shares(landmarks: int, placed: int) -> dict[str, float]:
    """Each step's share of the landmark path's expected time (:data:`_COST`)."""
    epochs = 500 if landmarks <= 10_000 else 200  # umap-learn's default epochs for that many points
    seconds = {"graph": _COST["graph"] * landmarks, "epochs": _COST["epoch"] * landmarks * epochs,
               "place": _COST["place"] * placed}
    whole = sum(seconds.values())
    return {step: value / whole for step, value in seconds.items()}


def landmark_layout(vectors: np.ndarray, landmark_rows: np.ndarray, *, n_neighbors: int = 15, n_components: int = 2,
                    min_dist: float = 0.1, seed: int = 0, place_k: int = PLACE_K,
                    progress: Progress | None = None) -> np.ndarray:
    """UMAP (cosine) of many points: umap-learn on the landmarks, every other point placed from them.

    Parameters
    ----------
    vectors : numpy.ndarray
        ``(n, dim)``.
    landmark_rows : numpy.ndarray
        Rows of ``vectors`` laid out by umap-learn (e.g. a class-stratified sample).
    n_neighbors, n_components, min_dist, seed
        As in ``umap.UMAP`` (the landmarks' fit); the same seed gives the same layout.
    place_k : int
        Nearest landmarks that place each other point (:func:`place_points`).
    progress : callable, optional
        ``progress(done, total, message)`` through the steps (neighbour graph, layout epochs,
        placement in chunks); ``done`` never goes back and ends at ``total``; the message
        carries the time left.

    Returns
    -------
    numpy.ndarray
        ``(n, n_components)`` float32; the landmarks keep their umap-learn coordinates.
    """
    vectors = np.asarray(vectors, dtype=np.float32)
    landmark_rows = np.asarray(landmark_rows, dtype=np.int64)
    n, total = len(vectors), 1000
    started = time.perf_counter()
    shown = [0]
    share = _step_shares(len(landmark_rows), n - len(np.unique(landmark_rows)))

    def report(done: float, message: str) -> None:
        if progress is None:
            return
        done = max(shown[0], min(total, int(done)))  # monotone, never past the end
        shown[0] = done
        left = time_left(time.perf_counter() - started, done, total)
        progress(done, total, f"{message} · {left}" if left else message)

    start_epochs = share["graph"] * total
    report(0, f"neighbour graph of {len(landmark_rows):,} landmarks")
    on_epoch = (lambda done, epochs: report(start_epochs + share["epochs"] * total * done / epochs,
                                            f"layout of {len(landmark_rows):,} landmarks: epoch {done} of {epochs}"))
    fitted = plain_layout(vectors[landmark_rows], n_neighbors=n_neighbors, n_components=n_components,
                          min_dist=min_dist, seed=seed, on_epoch=on_epoch)
    fit_s = time.perf_counter() - started
    coords = np.empty((n, n_components), dtype=np.float32)
    coords[landmark_rows] = fitted
    rest = np.setdiff1d(np.arange(n), landmark_rows)
    start_place = (share["graph"] + share["epochs"]) * total
    report(start_place, f"placing {len(rest):,} points")
    on_chunk = (lambda done, of: report(start_place + share["place"] * total * done / of,
                                        f"placing points: {done:,} of {of:,}"))
    if len(rest):
        coords[rest] = place_points(vectors[rest], vectors[landmark_rows], fitted, k=place_k, on_chunk=on_chunk)
    logger.info("landmark UMAP of %d points: %d landmarks fitted in %.1fs, %d placed in %.1fs", n,
                len(landmark_rows), fit_s, len(rest), time.perf_counter() - started - fit_s)
    report(total, f"UMAP of {n:,} points done")
    return coords


def _cuda_device() -> bool:
    """Whether a CUDA device is usable (numba's check: False without a driver)."""
    try:
        from numba import cuda

        return bool(cuda.is_available())
    except Exception:  # noqa: BLE001 - any failure to reach a driver means no GPU
        return False


def cuml_available() -> bool:
    """True when cuML imports and a CUDA device is present (then :func:`cuml_layout` is used)."""
    try:
        importlib.import_module("cuml.manifold")
    except ImportError:
        return False
    return _cuda_device()


def cuml_layout(vectors: np.ndarray, *, n_neighbors: int = 15, n_components: int = 2, min_dist: float = 0.1,
                seed: int = 0) -> np.ndarray:
    """UMAP (cosine) of ``vectors`` by cuML on the GPU; the same settings as the CPU paths."""
    from cuml.manifold import UMAP

    vectors = np.asarray(vectors, dtype=np.float32)
    reducer = UMAP(n_neighbors=min(n_neighbors, len(vectors) - 1), n_components=n_components, min_dist=min_dist,
                   metric="cosine", random_state=seed, output_type="numpy")
    return np.asarray(reducer.fit_transform(vectors), dtype=np.float32)


@functools.cache
def _cuml_present() -> bool:
    return cuml_available()


def umap_method(n_points: int) -> dict:
    """Which UMAP path a view of ``n_points`` takes, with the settings that shape its result.

    ``{"name": "cuml"}`` when cuML and a GPU are present, ``{"name": "landmarks", "landmarks":
    ..., "place_k": ...}`` above :data:`LANDMARK_THRESHOLD` points, else ``{"name": "plain"}``. Part
    of the projection cache key: coordinates of one path are never read back for another. Whether
    cuML is present is looked up once per process.
    """
    if _cuml_present():
        return {"name": "cuml"}
    if n_points > LANDMARK_THRESHOLD:
        return {"name": "landmarks", "landmarks": LANDMARKS, "place_k": PLACE_K}
    return {"name": "plain"}
