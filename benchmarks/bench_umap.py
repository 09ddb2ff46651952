"""UMAP: plain umap-learn (NN-descent) vs a faiss neighbour graph passed as ``precomputed_knn``.

Both layouts use the same vectors and settings (cosine, n_neighbors 15, min_dist 0.1, PCA
initialisation, seed 0: what the Projection page uses). Each size is timed side by side in one
run, plain first and faiss second, after a warm-up that compiles numba's code (so neither
pays compilation). Quality: sklearn's trustworthiness (15 neighbours) of both layouts on the
same random sample of points. Targets: faiss >= 2.5x plain at 100k, trustworthiness within 0.01.

Vectors: unit vectors around ``--clusters`` random centres (384 dimensions, like minilm),
with cluster spreads drawn at random, so the neighbour graph has real structure; or
``--vectors FILE.npy`` (e.g. a cached level's vectors).

    python benchmarks/bench_umap.py --sizes 20000
    python benchmarks/bench_umap.py --sizes 20000 100000
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def clustered_vectors(n: int, dim: int = 384, clusters: int = 200, seed: int = 0) -> np.ndarray:
    """``n`` unit vectors around ``clusters`` random centres with random spreads (float32)."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(clusters, dim)).astype(np.float32)
    spread = rng.uniform(0.3, 1.2, size=clusters).astype(np.float32)
    label = rng.integers(0, clusters, size=n)
    vectors = centres[label] + rng.normal(size=(n, dim)).astype(np.float32) * spread[label, None]
    return (vectors / np.linalg.norm(vectors, axis=1, keepdims=True)).astype(np.float32)


def plain_umap(vectors: np.ndarray, seed: int = 0) -> np.ndarray:
    import umap

    reducer = umap.UMAP(n_neighbors=15, n_components=2, min_dist=0.1, metric="cosine", init="pca",
                        random_state=seed, n_jobs=1)
    return reducer.fit_transform(vectors)


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[20_000])
    parser.add_argument("--vectors", default=None, help="a .npy of vectors to sample from instead of synthetic ones")
    parser.add_argument("--sample", type=int, default=3000, help="points scored by trustworthiness")
    parser.add_argument("--clusters", type=int, default=200)
    args = parser.parse_args(argv)

    from sklearn.manifold import trustworthiness

    from bioviz.views.fast_umap import knn_graph, umap_layout, warm_up

    warm = time.perf_counter()
    warm_up()
    # NN-descent's code too: umap-learn searches exactly below 4,096 points, so warm up above that
    plain_umap(clustered_vectors(5000, clusters=20))
    warm_s = time.perf_counter() - warm
    source = np.load(args.vectors).astype(np.float32) if args.vectors else None
    rows = []
    for n in args.sizes:
        if source is not None:
            pick = np.random.default_rng(0).choice(len(source), size=min(n, len(source)), replace=False)
            vectors = source[pick]
        else:
            vectors = clustered_vectors(n, clusters=args.clusters)
        load_before = os.getloadavg()[0]
        started = time.perf_counter()
        plain = plain_umap(vectors)
        plain_s = time.perf_counter() - started
        started = time.perf_counter()
        knn_graph(vectors, 15)
        knn_s = time.perf_counter() - started
        started = time.perf_counter()
        fast = umap_layout(vectors, n_neighbors=15)
        fast_s = time.perf_counter() - started
        sample = np.random.default_rng(1).choice(len(vectors), size=min(args.sample, len(vectors)), replace=False)
        trust = {name: float(trustworthiness(vectors[sample], coords[sample], n_neighbors=15, metric="cosine"))
                 for name, coords in (("plain", plain), ("faiss", fast))}
        rows.append({"points": len(vectors), "plain_seconds": round(plain_s, 1), "faiss_seconds": round(fast_s, 1),
                     "of_which_faiss_knn_seconds": round(knn_s, 1), "speed_ratio": round(plain_s / fast_s, 2),
                     "trustworthiness_plain": round(trust["plain"], 4),
                     "trustworthiness_faiss": round(trust["faiss"], 4),
                     "trustworthiness_delta": round(trust["faiss"] - trust["plain"], 4),
                     "load_average_1m": [round(load_before, 1), round(os.getloadavg()[0], 1)]})
        print(json.dumps(rows[-1]), file=sys.stderr)
    result = {"warm_up_seconds": round(warm_s, 1), "cpus": os.cpu_count(), "rows": rows,
              "vectors": args.vectors or f"synthetic, {args.clusters} clusters, 384-d",
              "targets": {"speed_ratio_at_100k": ">= 2.5", "trustworthiness_delta": "within 0.01"}}
    print(json.dumps(result, indent=2))
    return result


if __name__ == "__main__":
    main()
