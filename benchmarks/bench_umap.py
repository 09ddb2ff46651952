"""UMAP of large views: plain umap-learn vs the landmark path, side by side in one run.

Both layouts use the same vectors and settings (cosine, n_neighbors 15, min_dist 0.1, PCA
initialisation, seed 0: what the Projection page uses). After a warm-up that compiles numba's
code (so neither pays compilation):

- ``--sizes N ...``: plain umap-learn, then the landmark path (:func:`bioviz.views.fast_umap.landmark_layout`)
  for each ``--landmarks`` count, on the same ``N`` vectors. Quality: sklearn's trustworthiness
  (15 neighbours, cosine) of every layout on two random samples of ``--sample`` points: a
  *validation* sample (seed 2), on which the landmark count is chosen, and the *reported*
  sample (seed 1). Target: landmarks >= 2.5x plain at 100k, trustworthiness within 0.01.
- ``--large N``: the landmark path only (the landmark count of the library, ``LANDMARKS``), its
  progress trace (the time left it showed against the time it really took), and its
  trustworthiness on a sample against a plain-umap baseline: plain umap-learn on a random
  subset of ``--baseline`` points that holds the scored sample, scored on the same sample.
  Target: 1M points under 10 minutes.

Vectors: unit vectors around ``--clusters`` random centres (384 dimensions, like minilm), with
cluster spreads drawn at random (seeded), so the neighbour graph has real structure; or
``--vectors FILE.npy`` (e.g. a cached level's vectors). Labels for the class-stratified
landmark sample are the clusters (the synthetic case) or none (a file: a uniform sample).
The load average is printed with every row: the machine is shared.

    nice -n 5 python benchmarks/bench_umap.py --sizes 100000 --landmarks 10000 20000 30000
    nice -n 5 python benchmarks/bench_umap.py --large 1000000
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


def clustered_vectors(n: int, dim: int = 384, clusters: int = 200, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """``n`` unit vectors around ``clusters`` random centres with random spreads (float32), and their clusters."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(clusters, dim)).astype(np.float32)
    spread = rng.uniform(0.3, 1.2, size=clusters).astype(np.float32)
    label = rng.integers(0, clusters, size=n)
    vectors = np.empty((n, dim), dtype=np.float32)
    for start in range(0, n, 100_000):  # in slices: a million 384-d float64 draws would need 3 GB at once
        part = slice(start, min(n, start + 100_000))
        noise = rng.standard_normal(size=(part.stop - part.start, dim), dtype=np.float32)
        vectors[part] = centres[label[part]] + noise * spread[label[part], None]
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors, label


def load() -> float:
    return round(os.getloadavg()[0], 1)


def trust(vectors: np.ndarray, coords: np.ndarray, sample: np.ndarray) -> float:
    from sklearn.manifold import trustworthiness

    return round(float(trustworthiness(vectors[sample], coords[sample], n_neighbors=15, metric="cosine")), 4)


def landmarks_of(labels: np.ndarray | None, n: int, count: int) -> np.ndarray:
    from bioviz.views.projection import stratified_sample

    return stratified_sample(np.zeros(n, dtype=np.int64) if labels is None else labels, count, 0)


def compare(vectors: np.ndarray, labels: np.ndarray | None, counts: list[int], sample_size: int) -> dict:
    """Plain umap-learn vs the landmark path with each landmark count, on the same vectors."""
    from bioviz.views.fast_umap import landmark_layout, plain_layout

    n = len(vectors)
    samples = {name: np.random.default_rng(seed).choice(n, size=min(sample_size, n), replace=False)
               for name, seed in (("reported", 1), ("validation", 2))}
    row = {"points": n, "load_average_1m": [load()]}
    started = time.perf_counter()
    plain = plain_layout(vectors, n_neighbors=15, n_components=2, min_dist=0.1, seed=0)
    row["plain_seconds"] = round(time.perf_counter() - started, 1)
    row["trust_plain"] = {name: trust(vectors, plain, sample) for name, sample in samples.items()}
    row["load_average_1m"].append(load())
    print(json.dumps(row), file=sys.stderr, flush=True)
    row["landmarks"] = []
    for count in counts:
        started = time.perf_counter()
        coords = landmark_layout(vectors, landmarks_of(labels, n, count), n_neighbors=15, n_components=2, min_dist=0.1,
                                 seed=0)
        seconds = time.perf_counter() - started
        scores = {name: trust(vectors, coords, sample) for name, sample in samples.items()}
        row["landmarks"].append({"landmarks": count, "seconds": round(seconds, 1),
                                 "speed_ratio": round(row["plain_seconds"] / seconds, 2), "trust": scores,
                                 "trust_delta": {k: round(v - row["trust_plain"][k], 4) for k, v in scores.items()},
                                 "load_average_1m": load()})
        print(json.dumps(row["landmarks"][-1]), file=sys.stderr, flush=True)
    return row


def large(vectors: np.ndarray, labels: np.ndarray | None, sample_size: int, baseline: int) -> dict:
    """The landmark path alone on many points: time, progress trace with its ETAs, trustworthiness."""
    from bioviz.views.fast_umap import LANDMARKS, landmark_layout, plain_layout

    n = len(vectors)
    trace = []
    started = time.perf_counter()

    def progress(done: int, total: int, message: str) -> None:
        elapsed = time.perf_counter() - started
        if not trace or elapsed - trace[-1]["elapsed_s"] >= 5 or done == total:
            trace.append({"elapsed_s": round(elapsed, 1), "done": done, "total": total, "message": message})
            print(f"  {elapsed:7.1f}s {done:4d}/{total} {message}", file=sys.stderr, flush=True)

    load_before = load()
    coords = landmark_layout(vectors, landmarks_of(labels, n, LANDMARKS), n_neighbors=15, n_components=2, min_dist=0.1,
                             seed=0, progress=progress)
    seconds = time.perf_counter() - started
    rng = np.random.default_rng(1)
    subset = rng.choice(n, size=min(baseline, n), replace=False)
    sample = subset[:sample_size]  # the scored points lie in the baseline's subset
    started = time.perf_counter()
    plain = plain_layout(vectors[subset], n_neighbors=15, n_components=2, min_dist=0.1, seed=0)
    baseline_s = time.perf_counter() - started
    return {"points": n, "landmarks": LANDMARKS, "seconds": round(seconds, 1), "load_average_1m": [load_before, load()],
            "trust_landmarks": trust(vectors, coords, sample),
            "trust_plain_on_subset": trust(vectors[subset], plain, np.arange(len(sample))),
            "baseline_points": len(subset), "baseline_seconds": round(baseline_s, 1), "trace": trace}


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="*", default=[])
    parser.add_argument("--landmarks", type=int, nargs="+", default=[20_000], help="landmark counts compared")
    parser.add_argument("--large", type=int, default=None, help="points for the landmark path alone (e.g. 1000000)")
    parser.add_argument("--baseline", type=int, default=20_000, help="plain-umap subset for --large's trust baseline")
    parser.add_argument("--vectors", default=None, help="a .npy of vectors to sample from instead of synthetic ones")
    parser.add_argument("--sample", type=int, default=3000, help="points scored by trustworthiness")
    parser.add_argument("--clusters", type=int, default=200)
    args = parser.parse_args(argv)

    from bioviz.views.fast_umap import warm_up

    warm = time.perf_counter()
    warm_up()
    warm_s = time.perf_counter() - warm
    source = np.load(args.vectors, mmap_mode="r") if args.vectors else None

    def vectors_of(n: int) -> tuple[np.ndarray, np.ndarray | None]:
        if source is None:
            return clustered_vectors(n, clusters=args.clusters)
        pick = np.sort(np.random.default_rng(0).choice(len(source), size=min(n, len(source)), replace=False))
        return np.asarray(source[pick], dtype=np.float32), None

    result = {"warm_up_seconds": round(warm_s, 1), "cpus": os.cpu_count(),
              "vectors": args.vectors or f"synthetic, {args.clusters} clusters, 384-d unit vectors, seed 0",
              "targets": {"speed_ratio_at_100k": ">= 2.5", "trustworthiness_delta": "within 0.01",
                          "1M_seconds": "< 600"}}
    result["rows"] = [compare(*vectors_of(n), args.landmarks, args.sample) for n in args.sizes]
    if args.large:
        result["large"] = large(*vectors_of(args.large), args.sample, args.baseline)
    print(json.dumps(result, indent=2))
    return result


if __name__ == "__main__":
    main()
