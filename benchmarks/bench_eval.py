"""Speed of the evaluations: every task for one model on ICD-10 chapters and HPO level 1.

Target (issue 7): all tasks for one model finish in under a minute on this CPU once the
embeddings are cached. The script warms the vector cache, then times ``evaluate`` with the
result cache off (so every figure is recomputed from cached vectors), and prints each
time as a ratio of the 60 s budget. It also times the vectorised ranking against a
straightforward per-query loop (argsort and AP per query in Python, as in
``sklearn.metrics.average_precision_score`` called once per query) on the same problem.

    BIOVIZ_HOME=/tmp/bench-home .venv/bin/python benchmarks/bench_eval.py [--models minilm char-tfidf]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout, not installed

BUDGET_S = 60.0


def naive_average_precisions(queries: np.ndarray, references: np.ndarray, q_labels, r_labels) -> np.ndarray:
    """One query at a time: score, sort, walk the ranking (the loop the library avoids)."""
    out = np.full(len(queries), np.nan)
    for i, q in enumerate(queries):
        scores = references @ q
        order = np.argsort(-scores, kind="stable")
        hits, precision_sum = 0, 0.0
        for rank, j in enumerate(order, start=1):
            if r_labels[j] == q_labels[i]:
                hits += 1
                precision_sum += hits / rank
        if hits:
            out[i] = precision_sum / hits
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=["minilm", "char-tfidf"])
    parser.add_argument("--levels", nargs="+", default=["icd10:1", "hpo:1"], help="SOURCE:DEPTH")
    parser.add_argument("--threads", type=int, default=1, help="torch threads while warming the cache")
    args = parser.parse_args()

    import torch

    torch.set_num_threads(args.threads)
    from bioviz.evaluation import metrics
    from bioviz.evaluation.run import TASKS, SplitSpec, evaluate, evaluate_benchmarks
    from bioviz.ontology import level_view, load_source
    from bioviz.evaluation.protocols import synonym_problems

    print(f"{'level':<10} {'model':<12} {'warm-up s':>10} {'all tasks s':>12} {'x budget':>9}  per task (s)")
    for level in args.levels:
        source, depth = level.split(":")
        ontology = load_source(source)
        view = level_view(ontology, depth=int(depth))
        split = SplitSpec().make(view)
        for model in args.models:
            started = time.perf_counter()
            evaluate(view, split, model, "all", ontology=ontology, use_cache=False)  # fills the vector cache
            evaluate_benchmarks(model, "all", use_cache=False)
            warm = time.perf_counter() - started
            started = time.perf_counter()
            results = evaluate(view, split, model, "all", ontology=ontology, use_cache=False)
            results += evaluate_benchmarks(model, "all", use_cache=False)
            elapsed = time.perf_counter() - started
            per_task = " ".join(f"{r.task}={r.seconds:.2f}" for r in results)
            print(f"{level:<10} {model:<12} {warm:>10.1f} {elapsed:>12.2f} {elapsed / BUDGET_S:>9.3f}  {per_task}")

        # Vectorised vs per-query loop on the synonym task's training names (each ranks all others).
        from bioviz.models.registry import embed

        problem = synonym_problems(view, split)["train"]
        space = embed(list(problem.queries), args.models[0])
        vectors = space.vectors
        started = time.perf_counter()
        fast = metrics.average_precisions(vectors, problem.query_labels, vectors, problem.reference_labels)
        fast_s = time.perf_counter() - started
        started = time.perf_counter()
        slow = naive_average_precisions(vectors, vectors, problem.query_labels, problem.reference_labels)
        slow_s = time.perf_counter() - started
        assert np.allclose(fast, slow, equal_nan=True), "the two rankings disagree"
        print(f"{level:<10} ranking {len(vectors)}x{len(vectors)}: vectorised {fast_s * 1000:.1f} ms, per-query loop "
              f"{slow_s * 1000:.1f} ms, speed-up x{slow_s / fast_s:.1f}")
    print(f"tasks: {', '.join(TASKS)} + 3 benchmarks; budget {BUDGET_S:.0f} s per model and level (ratio < 1 passes)")


if __name__ == "__main__":
    main()
