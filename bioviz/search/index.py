"""Nearest names by cosine similarity, with faiss.

Vectors in a :class:`~bioviz.space.Space` have unit length, so inner product is cosine
similarity. Search is exact by default; above :data:`APPROXIMATE_ABOVE` names it switches to
an inverted-file index (``ivf``), whose recall@10 against exact search is measured by
``benchmarks/bench_search_1m.py`` (docs/scale.md, "Search and memory at 1M"). Searches
restricted to one class use a small exact index over that class's rows, built on first use.

Exact search is memory-bound: one query reads every vector. The ``exact`` kind therefore
scans a float16 copy (``IndexScalarQuantizer``, half the bytes of ``IndexFlatIP``) for a few
more candidates than asked, re-scores them in float32, and proves the result exact with the
float16 rounding bound: no row outside the candidates can score above the k-th re-scored
hit. When the proof fails (near-ties at the cut-off), that query falls back to a full
float32 scan, so results always equal ``IndexFlatIP``'s (``flat`` kind).

The approximate kinds (``ivf``, ``hnsw``) also keep float16 codes only, and re-score their
candidates in float32 from the Space's own vectors: the scores shown are exact, and the index
holds half the bytes of the vectors instead of a second float32 copy (at a million names,
768 MB instead of 1.5 GB per model). Their build takes minutes at that size, so a built
approximate index is stored in ``BIOVIZ_HOME/indexes`` (:mod:`bioviz.search.index_store`)
and read back by the next process that indexes the same vectors with the same settings.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import asdict, dataclass

import numpy as np

from bioviz.errors import BiovizError
from bioviz.search import index_store
from bioviz.ontology.model import normalise_name
from bioviz.space import Space

logger = logging.getLogger(__name__)

# Exact search over 100k x 384 answers a query in a few ms on two cores; only well above
# that does an approximate index pay for its build time and lost recall.
APPROXIMATE_ABOVE = 250_000
KINDS = ("auto", "exact", "flat", "hnsw", "ivf")
# Extra candidates fetched from the float16 scan before re-scoring in float32.
_EXACT_PAD = 32
# IVF settings chosen on validation query sets at 1M names (docs/scale.md, "Search and memory at
# 1M"): lists probed per query (8 reach recall@10 0.995 on synthetic vectors, real char-tfidf
# vectors with their near-tied variants need 64-128), and training rows per list (faiss warns
# below 39; more costs build time, not recall).
IVF_NPROBE = 64
IVF_TRAIN_PER_LIST = 50
# Approximate indexes of at least this many rows are stored on disk (their build takes minutes).
PERSIST_ABOVE = 100_000
# Rows added per call while building, so a progress bar can move (and a build be followed).
ADD_CHUNK = 50_000


def default_nlist(n: int) -> int:
    """Inverted lists for ``n`` rows: about 2·√n (2,000 at a million), at least 39 rows per list."""
    return max(1, min(int(2 * np.sqrt(n)), n // 39 or 1))


@dataclass(frozen=True)
class Neighbour:
    """One ranked hit.

    Attributes
    ----------
    rank : int
        1 = nearest.
    name : str
    concept_id : str or None
        Concept the name belongs to.
    class_id : str or None
        Class (concept level or synonym set) of the name.
    class_label : str or None
        Readable name of the class.
    score : float
        Cosine similarity to the query.
    row : int
        Row of the name in the indexed Space.
    """

    rank: int
    name: str
    concept_id: str | None
    class_id: str | None
    class_label: str | None
    score: float
    row: int

    def as_dict(self) -> dict:
        """Plain dict (for JSON and tables)."""
        return asdict(self)


def _as_list(values, n: int, what: str) -> list | None:
    if values is None:
        return None
    values = list(values)
    if len(values) != n:
        raise ValueError(f"{len(values)} {what} for {n} names")
    return values


class NeighbourIndex:
    """Top-k search over the rows of a Space.

    Parameters
    ----------
    space : Space
        Names and unit-length vectors to search.
    concept_ids : sequence of str, optional
        Concept of each row.
    classes : sequence of str, optional
        Class id of each row (what ``restrict_class`` selects on).
    class_labels : sequence of str, optional
        Readable class name of each row.
    kind : str
        ``exact`` (float16 scan + float32 re-scoring, results equal to ``flat``), ``flat``
        (plain ``IndexFlatIP``), ``ivf`` (inverted lists of float16 codes), ``hnsw`` (a graph
        over float16 codes), or ``auto`` (exact up to ``approximate_above`` rows, ``ivf``
        above). The approximate kinds re-score their candidates in float32.
    approximate_above : int
        Row count above which ``auto`` builds an approximate index.
    hnsw_m, ef_search : int
        HNSW graph degree and search breadth.
    nprobe : int
        IVF lists probed per query.
    nlist : int, optional
        IVF lists (:func:`default_nlist` by default).
    persist : bool, optional
        Read a built approximate index from ``BIOVIZ_HOME/indexes`` and store a new one there
        (:mod:`bioviz.search.index_store`); by default for approximate indexes of at least
        :data:`PERSIST_ABOVE` rows.
    progress : callable, optional
        ``progress(done, total)`` in rows added to the index, while it is built (or once,
        when it was read from disk): a page's progress bar.

    Attributes
    ----------
    from_disk : bool
        True when the index was read from ``BIOVIZ_HOME/indexes`` instead of built.

    Examples
    --------
    >>> index = NeighbourIndex.from_view(space, view)        # doctest: +SKIP
    >>> index.search(query_vector, k=10)[0].name             # doctest: +SKIP
    'urinary hesitancy'
    """

    def __init__(self, space: Space, concept_ids=None, classes=None, class_labels=None, kind: str = "auto",
                 approximate_above: int = APPROXIMATE_ABOVE, hnsw_m: int = 32, ef_search: int = 128,
                 nprobe: int = IVF_NPROBE, nlist: int | None = None, persist: bool | None = None,
                 progress=None) -> None:
        import faiss  # imported here: faiss takes a noticeable time to import; only building an index needs it

        if kind not in KINDS:
            raise BiovizError(f"unknown index kind {kind!r}: use one of {', '.join(KINDS)}")
        n = len(space)
        self.space = space
        # no copy for float32 C-ordered vectors (a memory-mapped block stays mapped)
        self.vectors = np.ascontiguousarray(space.vectors, dtype=np.float32)
        self.concept_ids = _as_list(concept_ids, n, "concept ids")
        self.classes = _as_list(classes, n, "classes")
        self.class_labels = _as_list(class_labels, n, "class labels")
        self.kind = ("ivf" if n > approximate_above else "exact") if kind == "auto" else kind
        self.approximate_above = approximate_above
        self.from_disk = False
        dim = space.dim or 1
        approximate = self.kind in ("hnsw", "ivf")
        if self.kind == "ivf":
            nlist = max(1, min(nlist or default_nlist(n), n or 1))
            self.settings = {"nlist": nlist, "train_per_list": IVF_TRAIN_PER_LIST, "codes": "fp16"}
        elif self.kind == "hnsw":
            self.settings = {"m": hnsw_m, "ef_construction": max(40, 2 * hnsw_m), "codes": "fp16"}
        else:
            self.settings = {}
        index = None
        path = None
        if approximate and n and (persist if persist is not None else n >= PERSIST_ABOVE):
            path = index_store.index_path(self.kind, index_store.vectors_fingerprint(self.vectors), self.settings)
            wanted = faiss.IndexIVFScalarQuantizer if self.kind == "ivf" else faiss.IndexHNSWSQ
            index = index_store.load_index(path, wanted, n, dim)
            self.from_disk = index is not None
        if index is None:
            index = self._build(faiss, dim, progress)
            if path is not None:
                index_store.save_index(path, index)
        elif progress is not None:
            progress(n, n)
        if self.kind == "ivf":
            index.nprobe = min(nprobe, index.nlist)
        elif self.kind == "hnsw":
            index.hnsw.efSearch = ef_search
        # Bound on the distance between a (unit) row and its float16 copy: rounding to
        # nearest changes each component by at most 2^-11 of itself, or 2^-24 below float16's
        # normal range. By Cauchy-Schwarz a query's float16 score is within this (times the
        # query's norm) of its float32 score; 1e-4 covers float32 summation in both scans.
        self._fp16_error = (2.0 ** -11 * 1.001 + np.sqrt(dim) * 2.0 ** -24) if self.kind == "exact" else 0.0
        self.index = index
        self._class_rows: dict[str, tuple[np.ndarray, object]] = {}  # class -> (rows, index or selector)
        self._rows_by_name: dict[str, list[int]] | None = None
        self._lock = threading.Lock()

    def _build(self, faiss, dim: int, progress):
        """A new faiss index of ``self.kind`` over ``self.vectors``, added in chunks (``progress`` after each)."""
        n = len(self.vectors)
        fp16 = faiss.ScalarQuantizer.QT_fp16
        if self.kind == "ivf":
            nlist = self.settings["nlist"]
            index = faiss.IndexIVFScalarQuantizer(faiss.IndexFlatIP(dim), dim, nlist, fp16,
                                                  faiss.METRIC_INNER_PRODUCT)
            # k-means on a seeded sample: the lists' centres need tens of rows each, not all rows
            sample = min(n, IVF_TRAIN_PER_LIST * nlist)
            rows = np.sort(np.random.default_rng(0).choice(n, sample, replace=False)) if sample < n else slice(None)
            index.train(np.ascontiguousarray(self.vectors[rows]))
        elif self.kind == "hnsw":
            index = faiss.IndexHNSWSQ(dim, fp16, self.settings["m"], faiss.METRIC_INNER_PRODUCT)
            index.hnsw.efConstruction = self.settings["ef_construction"]
            index.train(self.vectors[:1])  # float16 codes need no statistics
        elif self.kind == "exact":
            index = faiss.IndexScalarQuantizer(dim, fp16, faiss.METRIC_INNER_PRODUCT)
        else:
            index = faiss.IndexFlatIP(dim)
        if progress is not None:
            progress(0, n)
        for start in range(0, n, ADD_CHUNK):
            index.add(np.ascontiguousarray(self.vectors[start:start + ADD_CHUNK]))
            if progress is not None:
                progress(min(n, start + ADD_CHUNK), n)
        return index

    @classmethod
    def from_view(cls, space: Space, view, **kwargs) -> NeighbourIndex:
        """Index a Space over a level view's names, with its concepts and classes.

        Parameters
        ----------
        space : Space
            Vectors of ``view.names`` in the same order.
        view : bioviz.ontology.levels.LevelView
        """
        if len(space) != len(view.names):
            raise ValueError(f"space has {len(space)} names, view {len(view.names)}")
        classes = [view.classes[i] for i in view.labels]
        labels = [view.class_labels[i] for i in view.labels]
        return cls(space, concept_ids=view.name_concepts, classes=classes, class_labels=labels, **kwargs)

    def __len__(self) -> int:
        return len(self.space)

    @property
    def code_bytes_per_row(self) -> int:
        """Bytes the faiss index keeps per row for its vectors (2·dim for float16 codes, 4·dim for float32).

        The graph (HNSW) and list ids (IVF) come on top; the Space's own float32 vectors are
        not counted (a memory-mapped block shares them with the page cache).
        """
        import faiss  # imported here, as in __init__

        storage = getattr(self.index, "storage", None)  # HNSW keeps its codes in a storage index
        return int(faiss.downcast_index(storage).code_size if storage is not None else self.index.code_size)

    def subset(self, rows, **kwargs) -> NeighbourIndex:
        """A new index over some rows only (e.g. a split's training names), metadata kept."""
        rows = np.asarray(rows, dtype=np.int64)

        def pick(values):
            return None if values is None else [values[i] for i in rows]

        return NeighbourIndex(self.space.subset(rows), concept_ids=pick(self.concept_ids), classes=pick(self.classes),
                              class_labels=pick(self.class_labels), **kwargs)

    def rows_named(self, text: str) -> list[int]:
        """Rows whose name equals ``text`` after normalisation (case, spacing)."""
        with self._lock:
            if self._rows_by_name is None:
                lookup: dict[str, list[int]] = {}
                for row, name in enumerate(self.space.names):
                    lookup.setdefault(normalise_name(name), []).append(row)
                self._rows_by_name = lookup
        return list(self._rows_by_name.get(normalise_name(text), []))

    def _class_index(self, class_id: str):
        """``(rows, searcher)`` of one class (built once).

        A class of up to ``approximate_above`` rows gets an exact index over a copy of its
        rows. A larger class of an approximate index is searched in that index with a bitmap
        of its rows (``searcher`` is the bitmap selector): a copy of half a million rows would
        cost 1.5 GB per model.
        """
        import faiss  # imported here, as in __init__

        if self.classes is None:
            raise BiovizError("this index has no classes to restrict to")
        with self._lock:
            if class_id not in self._class_rows:
                rows = np.array([i for i, c in enumerate(self.classes) if c == class_id], dtype=np.int64)
                if not len(rows):
                    raise BiovizError(f"unknown class {class_id!r}: no indexed name belongs to it")
                if self.kind in ("ivf", "hnsw") and len(rows) > self.approximate_above:
                    mask = np.zeros(len(self.vectors), dtype=bool)
                    mask[rows] = True
                    bitmap = np.packbits(mask, bitorder="little")  # faiss reads bit i of byte i // 8
                    selector = faiss.IDSelectorBitmap(len(mask), faiss.swig_ptr(bitmap))
                    selector.bitmap_array = bitmap  # faiss only points at the bits: keep them alive
                    self._class_rows[class_id] = (rows, selector)
                else:
                    index = faiss.IndexFlatIP(self.vectors.shape[1])
                    index.add(np.ascontiguousarray(self.vectors[rows]))
                    self._class_rows[class_id] = (rows, index)
            return self._class_rows[class_id]

    def _search_parameters(self, selector):
        """faiss search parameters restricting the approximate index to ``selector``'s rows."""
        import faiss  # imported here, as in __init__

        if self.kind == "ivf":
            return faiss.SearchParametersIVF(sel=selector, nprobe=self.index.nprobe)
        return faiss.SearchParametersHNSW(sel=selector, efSearch=self.index.hnsw.efSearch)

    def _hit(self, rank: int, row: int, score: float) -> Neighbour:
        return Neighbour(
            rank=rank,
            name=self.space.names[row],
            concept_id=self.concept_ids[row] if self.concept_ids is not None else None,
            class_id=self.classes[row] if self.classes is not None else None,
            class_label=self.class_labels[row] if self.class_labels is not None else None,
            score=float(score),
            row=int(row),
        )

    def search(self, query_vectors: np.ndarray, k: int = 10, restrict_class: str | None = None,
               exclude_rows=None):
        """The ``k`` nearest rows of one query or of each query in a batch.

        Parameters
        ----------
        query_vectors : numpy.ndarray
            ``(dim,)`` for one query, ``(n, dim)`` for a batch; unit length.
        k : int
            Hits per query.
        restrict_class : str, optional
            Only rows of this class id.
        exclude_rows : iterable of int, optional
            Rows never returned (e.g. the query's own name when it is indexed).

        Returns
        -------
        list of Neighbour, or list of lists
            Ranked hits (fewer than ``k`` when fewer rows qualify).
        """
        queries = np.asarray(query_vectors, dtype=np.float32)
        single = queries.ndim == 1
        queries = np.ascontiguousarray(queries.reshape(1, -1) if single else queries)
        if queries.shape[1] != self.vectors.shape[1]:
            raise BiovizError(f"query has {queries.shape[1]} dimensions, index {self.vectors.shape[1]}: "
                              "encode the query with the model that built the index")
        if k < 1:
            raise BiovizError(f"k must be at least 1 (got {k})")
        exclude = {int(r) for r in exclude_rows} if exclude_rows is not None else set()
        params = None
        if restrict_class is not None:
            rows, index = self._class_index(restrict_class)
            size = len(rows)
            if not hasattr(index, "ntotal"):  # a bitmap of the class's rows in the approximate index
                rows, index, params = None, self.index, self._search_parameters(index)
        else:
            rows, index, size = None, self.index, self.index.ntotal
        fetch = min(k + len(exclude), size)
        results: list[list[Neighbour]] = []
        if fetch == 0:
            results = [[] for _ in range(len(queries))]
        else:
            if rows is None and self.kind == "exact":
                scores, ids = self._exact_search(queries, fetch)
            elif rows is None and self.kind in ("ivf", "hnsw"):
                scores, ids = self._rescored_search(queries, fetch, params)
            else:
                scores, ids = index.search(queries, fetch)
            for q_scores, q_ids in zip(scores, ids):
                hits: list[Neighbour] = []
                for score, local in zip(q_scores, q_ids):
                    if local < 0:
                        continue  # fewer candidates than asked (approximate indexes)
                    row = int(rows[local]) if rows is not None else int(local)
                    if row in exclude:
                        continue
                    hits.append(self._hit(len(hits) + 1, row, score))
                    if len(hits) == k:
                        break
                results.append(hits)
        return results[0] if single else results

    def _exact_search(self, queries: np.ndarray, fetch: int) -> tuple[np.ndarray, np.ndarray]:
        """Exact top-``fetch`` by inner product: float16 candidates, float32 re-scoring, proof."""
        n = self.index.ntotal
        wide = min(n, fetch + _EXACT_PAD)
        approx, candidates = self.index.search(queries, wide)
        scores = np.full((len(queries), fetch), -np.inf, dtype=np.float32)
        ids = np.full((len(queries), fetch), -1, dtype=np.int64)
        for q, (query, found, found_approx) in enumerate(zip(queries, candidates, approx)):
            found = found[found >= 0]
            exact = self.vectors[found] @ query
            order = np.argsort(-exact, kind="stable")[:fetch]
            # Rows outside the candidates scored at most approx[-1] in float16, so at most
            # approx[-1] + error in float32: below the fetch-th exact score, they cannot enter.
            error = self._fp16_error * float(np.linalg.norm(query)) + 1e-4
            proven = wide == n or (len(order) == fetch and found_approx[-1] + error < exact[order[-1]])
            if not proven:
                full = self.vectors @ query
                top = np.argpartition(-full, fetch - 1)[:fetch]
                top = top[np.argsort(-full[top], kind="stable")]
                scores[q, :len(top)], ids[q, :len(top)] = full[top], top
                continue
            scores[q, :len(order)], ids[q, :len(order)] = exact[order], found[order]
        return scores, ids

    def _rescored_search(self, queries: np.ndarray, fetch: int, params=None) -> tuple[np.ndarray, np.ndarray]:
        """Approximate top-``fetch``: candidates from the float16 index, ranked by float32 scores.

        ``params``: faiss search parameters (a class's rows only).
        """
        wide = min(self.index.ntotal, fetch + _EXACT_PAD)
        _, candidates = self.index.search(queries, wide, params=params)
        scores = np.full((len(queries), fetch), -np.inf, dtype=np.float32)
        ids = np.full((len(queries), fetch), -1, dtype=np.int64)
        for q, (query, found) in enumerate(zip(queries, candidates)):
            found = np.sort(found[found >= 0])  # ascending rows: fewer page faults on a mapped block
            exact = self.vectors[found] @ query
            order = np.argsort(-exact, kind="stable")[:fetch]
            scores[q, :len(order)], ids[q, :len(order)] = exact[order], found[order]
        return scores, ids

    def ranks(self, query_vector: np.ndarray, rows, exclude_rows=None) -> np.ndarray:
        """Exact 1-based rank of each of ``rows`` for one query (over every indexed row).

        Used to show how far a name moved between two models: the rank a name has in
        the other model's full ranking, not only whether it is in that model's top k.
        """
        query = np.asarray(query_vector, dtype=np.float32).reshape(-1)
        scores = self.vectors @ query
        if exclude_rows is not None:
            scores = scores.copy()
            scores[np.asarray(list(exclude_rows), dtype=np.int64)] = -np.inf
        rows = np.asarray(list(rows), dtype=np.int64)
        # rank = 1 + number of rows scoring strictly higher: one comparison pass per row asked
        # for (a page asks for ten) instead of sorting a million scores
        return np.array([1 + int(np.count_nonzero(scores > scores[row])) for row in rows], dtype=np.int64)
