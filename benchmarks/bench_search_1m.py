"""Search and memory at a million names (issue 16): cache read, top-10 search, recall, peak memory.

One run measures, side by side and with the load average next to each figure:

- **cache read**: a 1M x 384 float32 vector block read whole with ``np.load`` (how blocks were
  read before) against ``VectorCache.get_block`` (memory-mapped), both with and without
  touching every row afterwards (an index build or a full scan reads them all);
- **search**: the ``ivf`` kind's build time (and reading it back from ``BIOVIZ_HOME/indexes``),
  ``nprobe`` chosen on a *validation* query set (the smallest whose recall@10 reaches
  ``--choose-recall``), then per-query latency and recall@10 against exact search on a separate
  *test* query set; the ``exact`` kind's latency at the same size for the ratio; HNSW built on
  a ``--hnsw-n`` subset (a 1M build takes tens of minutes on two cores);
- **memory**: a fresh process opens the level and two 1M-name spaces with their indexes the
  way the Neighbours page holds them (``ui/cache.py``: view, ``NeighbourIndex.from_view`` per
  model, the name search, one ranking with the other model's ranks) and reports its peak RSS;
  once building the second model's index, once with both indexes read from disk.

Vectors: seeded synthetic clustered unit vectors (``--dim`` 384, minilm's size; a hierarchy of
300 themes > 30,000 topics > concepts > ~7 names each), indexed under the real names of the
1M-name level (``benchmarks/large_level.py``) when ``--level`` exists. ``--vectors char-tfidf``
searches the level's real char-tfidf vectors (256 dimensions) instead.

    python benchmarks/large_level.py --out .bioviz/large_level.tsv
    nice -n 5 python benchmarks/bench_search_1m.py --level .bioviz/large_level.tsv
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

TOUCH_CHUNK = 100_000


def load() -> list[float]:
    return [round(x, 1) for x in os.getloadavg()]


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')} load {load()[0]}] {message}", file=sys.stderr, flush=True)


def unit(a: np.ndarray) -> np.ndarray:
    return (a / np.maximum(np.linalg.norm(a, axis=1, keepdims=True), 1e-12)).astype(np.float32)


def clustered_vectors(n: int, dim: int, seed: int) -> np.ndarray:
    """Seeded unit vectors in a hierarchy: themes > topics > concepts > names (~7 per concept)."""
    rng = np.random.default_rng(seed)

    def around(parents: np.ndarray, count: int, spread: float) -> np.ndarray:
        picks = parents[rng.integers(0, len(parents), count)]
        return unit(picks + spread * unit(rng.standard_normal((count, dim), dtype=np.float32)))

    themes = unit(rng.standard_normal((300, dim), dtype=np.float32))
    topics = around(themes, 30_000, 1.0)
    concepts = around(topics, max(1, n // 7), 0.7)
    out = np.empty((n, dim), dtype=np.float32)
    for start in range(0, n, TOUCH_CHUNK):  # in chunks: the noise would double the memory
        out[start:start + TOUCH_CHUNK] = around(concepts, min(TOUCH_CHUNK, n - start), 0.5)
    return out


def level_names(args) -> tuple[list[str], object]:
    """The 1M-name level's view (names, classes) when ``--level`` exists, else numbered names."""
    if args.level and Path(args.level).is_file():
        from bioviz.ontology import level_view, load_source

        view = level_view(load_source(args.level), depth=1)
        return list(view.names), view
    return [f"name {i}" for i in range(args.n)], None


def model_key(args, seed: int) -> str:
    return f"synthetic-{args.dim}-seed{seed}"


def ensure_blocks(args, names: list[str]) -> None:
    from bioviz.models.vector_cache import VectorCache

    cache = VectorCache()
    for seed in (0, 1):
        if not cache.has_block(model_key(args, seed), names):
            log(f"writing the synthetic block of seed {seed}")
            cache.put_block(model_key(args, seed), names, clustered_vectors(len(names), args.dim, seed))


def touch(array: np.ndarray) -> float:
    """Read every row (as an index build does); returns a checksum so nothing is optimised away."""
    return float(sum(float(array[s:s + TOUCH_CHUNK].sum()) for s in range(0, len(array), TOUCH_CHUNK)))


def cache_read(args, names: list[str]) -> dict:
    """Whole-file ``np.load`` (before) against the memory-mapped ``get_block`` (now), alternated."""
    from bioviz.models.vector_cache import VectorCache

    cache = VectorCache()
    key = model_key(args, 0)
    path = cache._block_path(key, names)
    out: dict = {"block_bytes": path.stat().st_size, "load_before": load()}
    best: dict[str, float] = {}
    for _ in range(2):  # alternate, keep each one's best: the machine's load varies
        for what in ("np_load", "mmap_open", "mmap_touch"):
            started = time.perf_counter()
            if what == "np_load":
                block = np.load(path, allow_pickle=False)
            else:
                block = cache.get_block(key, names)  # includes hashing the 1M names for the key
                if what == "mmap_touch":
                    touch(block)
            seconds = time.perf_counter() - started
            best[what] = min(seconds, best.get(what, np.inf))
            del block
    out.update({f"{k}_seconds": round(v, 3) for k, v in best.items()})
    out["np_load_over_mmap_open"] = round(best["np_load"] / best["mmap_open"], 1)
    out["load_after"] = load()
    return out


def exact_top(vectors: np.ndarray, queries: np.ndarray, k: int) -> np.ndarray:
    """Exact top-k rows by inner product (chunked matrix products)."""
    best_scores = np.full((len(queries), 0), -np.inf, dtype=np.float32)
    best_rows = np.zeros((len(queries), 0), dtype=np.int64)
    for start in range(0, len(vectors), TOUCH_CHUNK):
        scores = queries @ np.asarray(vectors[start:start + TOUCH_CHUNK]).T
        top = np.argpartition(-scores, k - 1, axis=1)[:, :k]
        best_scores = np.hstack([best_scores, np.take_along_axis(scores, top, 1)])
        best_rows = np.hstack([best_rows, top + start])
        keep = np.argsort(-best_scores, axis=1, kind="stable")[:, :k]
        best_scores, best_rows = np.take_along_axis(best_scores, keep, 1), np.take_along_axis(best_rows, keep, 1)
    return best_rows


def recall_at(index, queries: np.ndarray, truth: np.ndarray, k: int) -> float:
    got = index.search(queries, k=k)
    return float(np.mean([len({h.row for h in hits} & set(want.tolist())) / k for hits, want in zip(got, truth)]))


def latency_ms(index, queries: np.ndarray, k: int, cpu: bool = False) -> float:
    """Median milliseconds of one single-query search (what a page does per query).

    ``cpu``: the process's CPU time instead of wall time; on a loaded machine (load average
    well above the 2 cores) wall time includes waiting for a core.
    """
    clock = time.process_time if cpu else time.perf_counter
    index.search(queries[0], k=k)
    times = []
    for query in queries:
        started = clock()
        index.search(query, k=k)
        times.append(clock() - started)
    return float(np.median(times) * 1000)


def query_sets(vectors: np.ndarray, args) -> tuple[np.ndarray, np.ndarray]:
    """Validation and test queries: distinct indexed rows moved a little (cosine ~0.9), as typed names are."""
    rng = np.random.default_rng(42)
    rows = rng.permutation(len(vectors))[:args.validation + args.queries]
    base = np.asarray(vectors[np.sort(rows)])
    queries = unit(base + 0.5 * unit(rng.standard_normal(base.shape, dtype=np.float32)))
    queries = queries[rng.permutation(len(queries))]
    return queries[:args.validation], queries[args.validation:]


def search(args, names: list[str], view) -> dict:
    import faiss

    from bioviz.models.vector_cache import VectorCache
    from bioviz.search.index import NeighbourIndex
    from bioviz.space import Space

    if args.vectors == "char-tfidf":
        from bioviz.search.neighbours import level_space

        log("char-tfidf vectors of the level (encoded once, then read from the cache)")
        space, info = level_space(view, "char-tfidf")
        out: dict = {"vectors": f"char-tfidf of the level ({info['encoded']:,} names encoded in {info['seconds']} s)"}
    else:
        space = Space(tuple(names), VectorCache().get_block(model_key(args, 0), names), "synthetic")
        out = {"vectors": f"synthetic clustered, seed 0, {args.dim} dimensions"}
    faiss.omp_set_num_threads(args.threads)
    k = args.k
    out.update({"names": len(space), "dim": space.dim, "validation_queries": args.validation,
                "test_queries": args.queries, "threads": args.threads})
    validation, test = query_sets(space.vectors, args)
    log("exact reference top-10")
    started = time.perf_counter()
    truth_val, truth_test = exact_top(space.vectors, validation, k), exact_top(space.vectors, test, k)
    out["exact_reference_seconds"] = round(time.perf_counter() - started, 1)

    def progress(done: int, total: int) -> None:
        if done == 0 or done == total or (done // 50_000) % 4 == 0:
            log(f"ivf build: {done:,}/{total:,} rows added")

    out["ivf_build_load_before"] = load()
    faiss.omp_set_num_threads(2)  # building uses both cores, as the app does
    started = time.perf_counter()
    ivf = NeighbourIndex(space, kind="ivf", persist=True, progress=progress)
    out["ivf_build_seconds"] = round(time.perf_counter() - started, 1)
    out["ivf_from_disk"] = ivf.from_disk
    out["ivf_settings"] = ivf.settings
    out["ivf_build_load_after"] = load()
    started = time.perf_counter()
    again = NeighbourIndex(space, kind="ivf", persist=True)
    out["ivf_read_from_disk_seconds"] = round(time.perf_counter() - started, 2)
    assert again.from_disk
    del again
    from bioviz.search import index_store

    out["ivf_index_bytes"] = index_store.index_path("ivf", index_store.vectors_fingerprint(space.vectors),
                                                    ivf.settings).stat().st_size
    faiss.omp_set_num_threads(args.threads)
    sweep = {}
    for nprobe in args.nprobes:
        ivf.index.nprobe = nprobe
        sweep[nprobe] = {"validation_recall@10": round(recall_at(ivf, validation, truth_val, k), 4),
                         "ms_per_query": round(latency_ms(ivf, validation[:50], k), 3), "load": load()[0]}
    out["ivf_validation_sweep"] = sweep
    chosen = next((p for p in args.nprobes if sweep[p]["validation_recall@10"] >= args.choose_recall),
                  args.nprobes[-1])
    ivf.index.nprobe = chosen
    out["ivf_chosen_nprobe"] = chosen
    log(f"nprobe {chosen} chosen on the validation set; measuring on the test set")
    exact = None
    if not args.skip_exact:
        exact = NeighbourIndex(space, kind="exact")
    best: dict[str, float] = {}
    for _ in range(2):  # alternate the kinds, keep each one's best median
        best["ivf"] = min(latency_ms(ivf, test, k), best.get("ivf", np.inf))
        best["ivf_cpu"] = min(latency_ms(ivf, test, k, cpu=True), best.get("ivf_cpu", np.inf))
        if exact is not None:
            best["exact"] = min(latency_ms(exact, test[:20], k), best.get("exact", np.inf))
    out["ivf_test_ms_per_query"] = round(best["ivf"], 3)
    out["ivf_test_cpu_ms_per_query"] = round(best["ivf_cpu"], 3)
    out["ivf_test_recall@10"] = round(recall_at(ivf, test, truth_test, k), 4)
    if exact is not None:
        out["exact_ms_per_query"] = round(best["exact"], 2)
        out["exact_over_ivf"] = round(best["exact"] / best["ivf"], 1)
    out["search_load_after"] = load()
    if args.hnsw_n:
        del exact
        out["hnsw"] = hnsw_subset(args, space, k)
    return out


def hnsw_subset(args, space, k: int) -> dict:
    """HNSW on the first ``--hnsw-n`` rows: build time, and recall/latency per efSearch."""
    import faiss

    from bioviz.search.index import NeighbourIndex

    sub = space.subset(np.arange(min(args.hnsw_n, len(space))))
    validation, test = query_sets(sub.vectors, argparse.Namespace(validation=args.validation, queries=args.queries))
    truth_val, truth_test = exact_top(sub.vectors, validation, k), exact_top(sub.vectors, test, k)
    faiss.omp_set_num_threads(2)
    out: dict = {"names": len(sub), "load_before": load()}
    started = time.perf_counter()
    hnsw = NeighbourIndex(sub, kind="hnsw", persist=False)
    out["build_seconds"] = round(time.perf_counter() - started, 1)
    out["build_1m_extrapolated_minutes_at_least"] = round(out["build_seconds"] * 1_000_000 / len(sub) / 60, 1)
    faiss.omp_set_num_threads(args.threads)
    sweep = {}
    for ef in (32, 64, 128, 256):
        hnsw.index.hnsw.efSearch = ef
        sweep[ef] = {"validation_recall@10": round(recall_at(hnsw, validation, truth_val, k), 4),
                     "ms_per_query": round(latency_ms(hnsw, validation[:50], k), 3)}
    out["validation_sweep"] = sweep
    chosen = next((ef for ef in sweep if sweep[ef]["validation_recall@10"] >= args.choose_recall), 256)
    hnsw.index.hnsw.efSearch = chosen
    out["chosen_ef_search"] = chosen
    out["test_recall@10"] = round(recall_at(hnsw, test, truth_test, k), 4)
    out["test_ms_per_query"] = round(latency_ms(hnsw, test, k), 3)
    out["test_cpu_ms_per_query"] = round(latency_ms(hnsw, test, k, cpu=True), 3)
    out["load_after"] = load()
    return out


def rss_mb() -> float:
    """Peak resident set of this process so far, in MB.

    ``VmHWM`` from /proc: ``ru_maxrss`` would not do, Linux carries it over from the parent
    across fork and exec, so a child of this (large) benchmark would report the parent's peak.
    """
    status = Path("/proc/self/status")
    if status.is_file():
        for line in status.read_text().splitlines():
            if line.startswith("VmHWM:"):
                return round(int(line.split()[1]) / 1024, 1)  # kB
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)  # KiB on Linux


def memory_child(args) -> dict:
    """In a fresh process: what the Neighbours page holds for two models on the 1M-name level."""
    started = time.perf_counter()
    steps: dict = {"imports_peak_rss_mb": None}
    from bioviz.models.vector_cache import VectorCache
    from bioviz.search.index import NeighbourIndex
    from bioviz.search.name_search import NameSearch
    from bioviz.search.neighbours import QueryInfo, rank_neighbours
    from bioviz.space import Space

    steps["imports_peak_rss_mb"] = rss_mb()
    names, view = level_names(args)
    steps["level_seconds"] = round(time.perf_counter() - started, 1)
    steps["level_peak_rss_mb"] = rss_mb()
    indexes = []
    for seed in (0, 1):
        t = time.perf_counter()
        vectors = VectorCache().get_block(model_key(args, seed), names)
        read = time.perf_counter() - t
        space = Space(tuple(names), vectors, f"model {seed}")
        t = time.perf_counter()
        if view is not None:
            index = NeighbourIndex.from_view(space, view, persist=True)
        else:
            index = NeighbourIndex(space, persist=True)
        steps[f"model{seed}"] = {"cache_read_seconds": round(read, 3), "index_seconds": round(time.perf_counter() - t, 1),
                                 "index_kind": index.kind, "index_from_disk": index.from_disk,
                                 "vectors_memory_mapped": np.may_share_memory(index.vectors, vectors) and isinstance(vectors, np.memmap), "peak_rss_mb": rss_mb()}
        indexes.append(index)
    t = time.perf_counter()
    search = NameSearch.from_view(view) if view is not None else None
    steps["name_search_seconds"] = round(time.perf_counter() - t, 1)
    steps["name_search_peak_rss_mb"] = rss_mb()
    t = time.perf_counter()
    query = QueryInfo(names[123])
    vectors = [index.vectors[123] for index in indexes]
    rows = rank_neighbours(indexes[0], vectors[0], query, k=10, other=(indexes[1], vectors[1]))
    steps["first_ranking_seconds"] = round(time.perf_counter() - t, 2)
    t = time.perf_counter()
    rank_neighbours(indexes[0], vectors[0], QueryInfo(names[456]), k=10, other=(indexes[1], vectors[1]))
    steps["next_ranking_seconds"] = round(time.perf_counter() - t, 3)
    steps["ranked"] = len(rows)
    steps["names_searchable"] = search is not None
    steps["peak_rss_mb"] = rss_mb()
    steps["total_seconds"] = round(time.perf_counter() - started, 1)
    steps["load"] = load()
    return steps


def memory(args, names: list[str]) -> dict:
    from bioviz.search.index import IVF_TRAIN_PER_LIST, default_nlist

    out = {}
    command = [sys.executable, __file__, "--memory-child", "--dim", str(args.dim), "--n", str(args.n)]
    if args.level:
        command += ["--level", args.level]
    from bioviz.models.vector_cache import VectorCache
    from bioviz.search import index_store

    block = VectorCache().get_block(model_key(args, 1), names)
    second = index_store.index_path("ivf", index_store.vectors_fingerprint(block), {
        "nlist": default_nlist(len(names)), "train_per_list": IVF_TRAIN_PER_LIST, "codes": "fp16"})
    del block
    for run in ("first_open", "reopen"):
        if run == "first_open" and second.exists():
            second.unlink()  # the second model's index is built in this run, read from disk in the next
        log(f"memory: {run} in a fresh process")
        done = subprocess.run(command, check=True, capture_output=True, text=True)
        out[run] = json.loads(done.stdout)
    return out


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--level", default=None, help="the 1M-name level table (benchmarks/large_level.py)")
    parser.add_argument("--n", type=int, default=1_000_000, help="names when no --level is given")
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--vectors", choices=("synthetic", "char-tfidf"), default="synthetic")
    parser.add_argument("--validation", type=int, default=200, help="queries that choose nprobe/efSearch")
    parser.add_argument("--queries", type=int, default=200, help="test queries that are reported")
    parser.add_argument("-k", type=int, default=10)
    parser.add_argument("--nprobes", type=lambda s: [int(x) for x in s.split(",")], default=[4, 8, 16, 32, 64])
    parser.add_argument("--choose-recall", type=float, default=0.995,
                        help="smallest setting whose validation recall@10 reaches this (margin over 0.99)")
    parser.add_argument("--hnsw-n", type=int, default=100_000, help="rows of the HNSW subset (0: skip)")
    parser.add_argument("--threads", type=int, default=1, help="faiss threads per query (1: a page's query)")
    parser.add_argument("--skip-exact", action="store_true")
    parser.add_argument("--skip", default="", help="comma-separated sections to skip: cache,search,memory")
    parser.add_argument("--memory-child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.memory_child:
        print(json.dumps(memory_child(args)))
        return {}
    skip = set(filter(None, args.skip.split(",")))
    result: dict = {"load_start": load()}
    log("level names")
    names, view = level_names(args)
    result["names"] = len(names)
    ensure_blocks(args, names)
    if "cache" not in skip:
        log("cache read")
        result["cache_read"] = cache_read(args, names)
    if "search" not in skip:
        result["search"] = search(args, names, view)
    if "memory" not in skip:
        result["memory"] = memory(args, names)
    result["load_end"] = load()
    result["targets"] = {"top-10 per query": "< 5 ms, recall@10 >= 0.99", "cache read": "< 3 s",
                         "peak memory, two 1M spaces": "< 8 GB"}
    print(json.dumps(result, indent=2))
    return result


if __name__ == "__main__":
    main()
