"""Choose term coding's defaults on the development files: ranking, hybrid weight, granularity re-ranking.

Scores one model on ``hpo_coding_dev`` and ``gsc_plus_dev`` (``../shared/benchmarks``, never
copied into the project; HPO synonym sets under HP:0000118, as ``python -m bioviz code`` and
the Code terms page code them) under every candidate setting, side by side from the same
vectors: the dense ranking, the hybrid ranking at weights 0.25/0.5/0.75/1.0, and each of those
with the ``ancestor`` re-ranker at margins 0.01/0.02/0.05 (:mod:`bioviz.search.rerank`), and
with ``--cross-encoder DIR`` the cross-encoder re-ranker at several weights under dense and
hybrid w=1 (its settings are the least simple).
Figures: acc@1 per file and pooled (653 mentions less the rows coded outside the level), with
95 % bootstrap intervals, and the paired difference of each setting against the simplest
(dense, no re-ranking).

The rule (docs/models.md): the setting with the highest pooled acc@1; where a simpler setting's
pooled acc@1 lies within that setting's interval, the simplest such setting is the default.
Simpler means fewer moving parts, in the order the settings are listed: dense, then hybrid by
weight, each without and then with re-ranking.
Rows go to ``benchmarks/results/coding_defaults_<model>.json``.

Usage::

    BIOVIZ_HOME=/tmp/sel python benchmarks/coding_defaults.py --model med-minilm
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run from anywhere, without installing
# The model as trained (fp32), whatever this machine's default backend: candidates are compared
# with each other, and int8 is judged on its own by benchmarks/int8_judged.py.
os.environ.setdefault("BIOVIZ_BACKEND", "torch")
sys.path.insert(0, str(ROOT / "benchmarks"))

from bioviz.evaluation.metrics import bootstrap_mean_ci  # noqa: E402
from bioviz.evaluation.normalisation import EXAMPLE_LEVEL, gold_ranks, load_gold  # noqa: E402
from bioviz.evaluation.paired import paired_mean_delta  # noqa: E402
from bioviz.evaluation.selection import CODING_FILES  # noqa: E402
from bioviz.models.model_spec import ModelSpec  # noqa: E402
from bioviz.search.hybrid import Ranking, SparseNames  # noqa: E402
from bioviz.search.neighbours import candidate_index  # noqa: E402
from bioviz.search.rerank import Reranker  # noqa: E402
from bioviz.search.term_coding import encode_terms, resolve_terms  # noqa: E402
from select_model import DEV_DIR, within_level  # noqa: E402

RANKINGS = (Ranking("dense"), *(Ranking("hybrid", w) for w in (0.25, 0.5, 0.75, 1.0)))
RERANKERS = (Reranker(), *(Reranker("ancestor", m) for m in (0.01, 0.02, 0.05)))
RESULTS = ROOT / "benchmarks" / "results"
N_BOOT = 1000


CROSS_WEIGHTS = (0.05, 0.1, 0.2, 0.5, 10.0)  # 10: the cross-encoder decides the window's order alone


def settings(cross_encoder: str | None = None) -> list[tuple[Ranking, Reranker]]:
    """Every candidate, simplest first; with a cross-encoder, its weights under dense and hybrid w=1 last."""
    found = [(ranking, reranker) for ranking in RANKINGS for reranker in RERANKERS]
    if cross_encoder:
        found += [(ranking, Reranker("cross-encoder", model=cross_encoder, weight=w))
                  for ranking in (RANKINGS[0], RANKINGS[-1]) for w in CROSS_WEIGHTS]
    return found


def hits(model: ModelSpec, dev_dir: Path, cross_encoder: str | None = None) -> tuple[dict, dict]:
    """Per setting, per file, 1.0 where the gold concept comes first; and the rows left out per file."""
    ontology = EXAMPLE_LEVEL.ontology()
    view = EXAMPLE_LEVEL.load(ontology)
    index = candidate_index(view, model)
    sparse = SparseNames.build(view.names, index.space.names)
    out: dict = {}
    dropped = {}
    for name in CODING_FILES:
        gold, dropped[name] = within_level(load_gold(dev_dir / f"{name}.tsv"), view)
        vectors = encode_terms([i.text for i in resolve_terms(gold.mentions, view, ontology)], model)
        for ranking, reranker in settings(cross_encoder):
            ranks = gold_ranks(gold, view, index, vectors, ranking=ranking, ontology=ontology, sparse=sparse,
                               reranker=reranker)
            out.setdefault((ranking.label, reranker.label), {})[name] = (ranks == 1).astype(float)
    return out, dropped


def rows_of(found: dict) -> list[dict]:
    """One row per setting: acc@1 per file and pooled with intervals, and the paired difference to the first."""
    rows = []
    simplest = None
    for (ranking, reranker), per_file in found.items():
        pooled = np.concatenate([per_file[n] for n in CODING_FILES])
        simplest = pooled if simplest is None else simplest
        delta, ci, _ = paired_mean_delta(simplest, pooled, n_boot=N_BOOT)
        row = {"ranking": ranking, "reranker": reranker, "pooled": float(pooled.mean()),
               "pooled_ci": bootstrap_mean_ci(pooled, N_BOOT), "n": len(pooled),
               "delta_vs_simplest": delta, "delta_ci": list(ci) if ci else None}
        for name in CODING_FILES:
            row[name] = float(per_file[name].mean())
            row[f"{name}_ci"] = bootstrap_mean_ci(per_file[name], N_BOOT)
        rows.append(row)
    return rows


def choose(rows: list[dict]) -> dict:
    """The simplest row whose pooled acc@1 lies within the best row's interval."""
    best = max(rows, key=lambda r: r["pooled"])
    return next(r for r in rows if r["pooled"] >= best["pooled_ci"][0])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="med-minilm")
    parser.add_argument("--dev-dir", type=Path, default=DEV_DIR)
    parser.add_argument("--cross-encoder", metavar="DIR", help="also score this cross-encoder re-ranker "
                                                               "(python -m trainer reranker) at several weights")
    args = parser.parse_args(argv)
    started = time.process_time()
    found, dropped = hits(ModelSpec.parse(args.model), args.dev_dir, args.cross_encoder)
    rows = rows_of(found)
    chosen = choose(rows)
    print(f"{'ranking':<16}{'re-ranking':<24}" + "".join(f"{n:>26}" for n in CODING_FILES)
          + f"{'pooled':>26}{'vs dense':>26}")
    for r in rows:
        cells = "".join(f"{r[n]:.3f} [{r[n + '_ci'][0]:.2f}, {r[n + '_ci'][1]:.2f}]".rjust(26) for n in CODING_FILES)
        delta = f"{r['delta_vs_simplest']:+.3f} [{r['delta_ci'][0]:+.3f}, {r['delta_ci'][1]:+.3f}]"
        pooled = f"{r['pooled']:.3f} [{r['pooled_ci'][0]:.2f}, {r['pooled_ci'][1]:.2f}]"
        print(f"{r['ranking']:<16}{r['reranker']:<24}{cells}{pooled:>26}{delta:>26}")
    print(f"chosen (simplest within the best's interval): {chosen['ranking']}, re-ranking {chosen['reranker']}")
    RESULTS.mkdir(exist_ok=True)
    stem = re.sub(r'[^A-Za-z0-9.-]+', '-', Path(args.model).name) + ("-cross" if args.cross_encoder else "")
    out = RESULTS / f"coding_defaults_{stem}.json"
    out.write_text(json.dumps({"model": args.model, "rows_outside_level": dropped, "n_boot": N_BOOT,
                               "rule": "simplest setting within the best pooled acc@1's 95% interval",
                               "chosen": [chosen["ranking"], chosen["reranker"]],
                               "cpu_seconds": round(time.process_time() - started),
                               "rows": rows}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
