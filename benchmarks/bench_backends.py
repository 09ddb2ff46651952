"""Encoding backends: bare sentence-transformers fp32 vs bioviz's onnx-int8, speed and drift.

Speed: the same names (a seeded sample of ICD-10-CM names, so name lengths are
representative) go through a bare ``SentenceTransformer.encode`` (fp32, torch) and through
the onnx-int8 encoder (:mod:`bioviz.models.quantized`), interleaved slice by slice in
alternating order (the shared machine's load drifts from second to second); totals over all
slices are compared, in wall-clock and in CPU seconds (CPU seconds are less disturbed by other
processes). Target: int8 >= 2.5x fp32.

Drift (onnx-int8 may become a default only if both hold):
- relatedness: Spearman's rho on MayoSRS, UMNSRS-sim and UMNSRS-rel within 0.005 of fp32;
- retrieval: mean top-10 overlap >= 0.95 of ``--queries`` ICD-10-CM names ranked against the
  ``--corpus`` other sampled ICD-10-CM names (exact cosine search in each space).

    python benchmarks/bench_backends.py                           # 1,000 queries, 20k corpus
    python benchmarks/bench_backends.py --queries 200 --corpus 2000   # a quick look

Runs in a temporary BIOVIZ_HOME (the int8 export is made there) unless ``--home`` is given.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def timed(fn):
    """(wall seconds, CPU seconds of this process, value)."""
    wall, cpu = time.perf_counter(), time.process_time()
    value = fn()
    return time.perf_counter() - wall, time.process_time() - cpu, value


def top_k(queries: np.ndarray, corpus: np.ndarray, k: int) -> np.ndarray:
    """Row indices of the ``k`` most cosine-similar corpus rows of each query (unit rows)."""
    scores = queries @ corpus.T
    part = np.argpartition(-scores, k, axis=1)[:, :k]
    return np.take_along_axis(part, np.argsort(-np.take_along_axis(scores, part, axis=1), axis=1), axis=1)


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="minilm")
    parser.add_argument("--queries", type=int, default=1000)
    parser.add_argument("--corpus", type=int, default=20_000)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--slice", type=int, default=256, help="names per interleaved slice")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--home", default=None, help="BIOVIZ_HOME to use (default: a temporary directory)")
    args = parser.parse_args(argv)
    os.environ["BIOVIZ_HOME"] = args.home or tempfile.mkdtemp(prefix="bench-backends-")

    from bioviz.evaluation.benchmarks import BUNDLED, load_benchmark, score_benchmark
    from bioviz.models.registry import load_encoder
    from bioviz.models.quantized import ensure_export
    from bioviz.models.registry import backend_encoder
    from bioviz.ontology import level_view, load_source

    names = list(dict.fromkeys(level_view(load_source("icd10cm"), depth=1).names))
    rng = np.random.default_rng(args.seed)
    sample = [names[i] for i in rng.choice(len(names), size=min(len(names), args.queries + args.corpus),
                                               replace=False)]
    torch_encoder = load_encoder(args.model, backend="torch")
    bare = torch_encoder.model  # the bare SentenceTransformer, fp32
    int8 = backend_encoder(args.model, "onnx-int8")
    export_s = timed(lambda: ensure_export(int8.base))[0]

    def run_bare(texts):
        return bare.encode(texts, batch_size=args.batch_size, convert_to_numpy=True, normalize_embeddings=True,
                           show_progress_bar=False)

    def run_int8(texts):
        return int8.encode(texts, batch_size=args.batch_size)

    run_bare(sample[:64]), run_int8(sample[:64])  # warm-up: lazy initialisation, allocations
    totals = {"fp32": [0.0, 0.0], "int8": [0.0, 0.0]}
    parts = {"fp32": [], "int8": []}
    slices = [sample[i:i + args.slice] for i in range(0, len(sample), args.slice)]
    started = time.perf_counter()
    for i, part in enumerate(slices):
        order = [("fp32", run_bare), ("int8", run_int8)]
        for name, run in order if i % 2 == 0 else order[::-1]:
            wall, cpu, vectors = timed(lambda run=run, part=part: run(part))
            totals[name][0] += wall
            totals[name][1] += cpu
            parts[name].append(np.asarray(vectors, dtype=np.float32))
        if i % 10 == 0:
            print(f"{i + 1}/{len(slices)} slices, {time.perf_counter() - started:.0f}s", file=sys.stderr)
    fp32_vectors, int8_vectors = (np.concatenate(parts[name]) for name in ("fp32", "int8"))
    cosine = (fp32_vectors * int8_vectors).sum(axis=1)

    queries = slice(0, args.queries)
    corpus = slice(args.queries, None)
    top_fp32 = top_k(fp32_vectors[queries], fp32_vectors[corpus], 10)
    top_int8 = top_k(int8_vectors[queries], int8_vectors[corpus], 10)
    overlap = float(np.mean([len(set(a) & set(b)) / 10 for a, b in zip(top_fp32, top_int8)]))

    relatedness = {}
    for key in BUNDLED:
        benchmark = load_benchmark(key)
        terms = benchmark.terms
        rho = {name: score_benchmark(benchmark, dict(zip(terms, run(terms))), n_boot=10)["spearman"]
               for name, run in (("fp32", run_bare), ("int8", run_int8))}
        relatedness[benchmark.label] = {"fp32": round(rho["fp32"], 4), "int8": round(rho["int8"], 4),
                                        "delta": round(rho["int8"] - rho["fp32"], 4)}

    n = len(sample)
    result = {
        "model": torch_encoder.label, "names": n, "batch_size": args.batch_size, "slice": args.slice,
        "load_average_1m": round(os.getloadavg()[0], 2), "cpus": os.cpu_count(),
        "export_seconds": round(export_s, 1),
        "fp32_names_per_second": round(n / totals["fp32"][0], 1),
        "int8_names_per_second": round(n / totals["int8"][0], 1),
        "speed_ratio_int8_over_fp32_wall": round(totals["fp32"][0] / totals["int8"][0], 2),
        "speed_ratio_int8_over_fp32_cpu": round(totals["fp32"][1] / totals["int8"][1], 2),
        "cosine_int8_vs_fp32": {"mean": round(float(cosine.mean()), 4), "min": round(float(cosine.min()), 4)},
        "relatedness_spearman": relatedness,
        "top10_overlap": round(overlap, 4), "queries": args.queries, "corpus": n - args.queries,
        "targets": {"speed_ratio": ">= 2.5", "spearman_delta": "within 0.005", "top10_overlap": ">= 0.95"},
    }
    result["drift_targets_hold"] = bool(overlap >= 0.95 and all(abs(r["delta"]) <= 0.005
                                                                  for r in relatedness.values()))
    print(json.dumps(result, indent=2))
    return result


if __name__ == "__main__":
    main()
