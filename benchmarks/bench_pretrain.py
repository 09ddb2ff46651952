"""A small measured pretraining run: each objective alone and combined, before/after figures.

For each objective set, pretrain the base (one epoch, ``--max-pairs`` pairs sampled per
source and objective) and report, side by side with the base model, the held-out validation
pair retrieval (top-1 accuracy, MRR: what a run may be chosen on) and the Spearman
correlation on MayoSRS / UMNSRS-sim / UMNSRS-rel (reported only: nothing is chosen on them),
with the share of benchmark terms that appear verbatim in the training pairs. Prints one
JSON line per run and a table; ``--json FILE`` keeps them all.

Usage::

    BIOVIZ_HOME=/tmp/pt python benchmarks/bench_pretrain.py --sources hpo --max-pairs 3000 \
        --sets synonyms definitions hierarchy synonyms+definitions+hierarchy --out-dir /tmp/pt-runs
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from anywhere, without installing

BENCHMARKS = ("mayosrs", "umnsrs-sim", "umnsrs-rel")


def relatedness(model) -> dict:
    """Spearman per benchmark of a SentenceTransformer."""
    from bioviz.evaluation.benchmarks import load_benchmark, score_benchmark

    out = {}
    for name in BENCHMARKS:
        bench = load_benchmark(name)
        vectors = model.encode(bench.terms, batch_size=128, normalize_embeddings=True, convert_to_numpy=True,
                               show_progress_bar=False)
        out[name] = round(float(score_benchmark(bench, dict(zip(bench.terms, vectors)), n_boot=10)["spearman"]), 4)
    return out


def benchmark_terms() -> set[str]:
    """Every term of the three benchmarks, normalised."""
    from bioviz.evaluation.benchmarks import load_benchmark
    from bioviz.ontology.model import normalise_name

    return {normalise_name(t) for name in BENCHMARKS for t in load_benchmark(name).terms}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sources", nargs="+", default=["hpo"])
    parser.add_argument("--sets", nargs="+", default=["synonyms", "definitions", "synonyms+definitions"],
                        help="objective sets, objectives joined by +")
    parser.add_argument("--max-pairs", type=int, default=3000)
    parser.add_argument("--validation-pairs", type=int, default=500)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--base", default="minilm")
    parser.add_argument("--max-seq-length", type=int, default=None, help="tokens per text while training")
    parser.add_argument("--exclude-level", action="append", default=[])
    parser.add_argument("--hard-negatives", nargs="+", default=["none"], choices=["none", "siblings"],
                        help="run each objective set with each of these (side by side)")
    parser.add_argument("--out-dir", default="/tmp/bench-pretrain")
    parser.add_argument("--keep", action="store_true", help="keep the pretrained models")
    parser.add_argument("--json", help="write every run's figures to this file")
    args = parser.parse_args()

    import torch

    from bioviz.models.encoders import load_sentence_transformer
    from bioviz.ontology.model import normalise_name
    from trainer.pretrain.command import ProgressPrinter
    from trainer.pretrain.config import PretrainConfig, validate
    from trainer.pretrain.fit import pretrain

    torch.set_num_threads(max(1, torch.get_num_threads()))
    terms = benchmark_terms()
    started = time.perf_counter()
    base = {"set": "base", "model": args.base, "relatedness": relatedness(load_sentence_transformer(args.base))}
    base["seconds"] = round(time.perf_counter() - started, 1)
    print(json.dumps(base), flush=True)
    rows = [base]
    for objective_set, negatives in [(s, n) for s in args.sets for n in args.hard_negatives]:
        out = Path(args.out_dir) / f"{objective_set.replace('+', '_')}-{negatives}"
        shutil.rmtree(out, ignore_errors=True)
        config = validate(PretrainConfig(sources=args.sources, objectives=objective_set.split("+"), base=args.base,
                                         max_pairs=args.max_pairs, validation_pairs=args.validation_pairs,
                                         batch_size=args.batch_size, epochs=args.epochs, save_steps=10**9,
                                         exclude_levels=args.exclude_level, max_seq_length=args.max_seq_length,
                                         hard_negatives=negatives))
        result = pretrain(config, out, callbacks=[ProgressPrinter()])
        from trainer.pretrain.fit import prepare

        seen = {normalise_name(t) for p in prepare(config).train for t in (p.anchor, p.positive)}
        row = {"set": objective_set if negatives == "none" else f"{objective_set} (sibling negatives)",
               "hard_negatives": result["pairs"].get("hard_negatives", {}),
               "pairs": result["pairs"]["objectives"], "kinds": result["pairs"]["kinds"],
               "excluded": result["excluded"]["total"], "steps": result["steps"], "device": result["device"],
               "training_s": round(result["seconds"]["training"], 1),
               "max_seq_length": args.max_seq_length, "sources": args.sources, "validation": result["validation"],
               "relatedness": relatedness(load_sentence_transformer(str(out), device="cpu")),
               "benchmark_terms_in_pairs": f"{len(terms & seen)}/{len(terms)}"}
        print(json.dumps(row), flush=True)
        rows.append(row)
        if not args.keep:
            shutil.rmtree(out, ignore_errors=True)
    print(f"\n{'set':34} {'pairs':>6} {'train s':>8} {'val acc':>15} {'val MRR':>15} "
          + " ".join(f"{b:>10}" for b in BENCHMARKS))
    for row in rows:
        pairs = sum(row.get("pairs", {}).values())
        val = row.get("validation", {})

        def pair_of(key):
            if not val:
                return ""
            return f"{val['before'][key]:.3f}->{val['after'][key]:.3f}"

        print(f"{row['set']:34} {pairs:>6} {row.get('training_s', ''):>8} {pair_of('accuracy'):>15} "
              f"{pair_of('mrr'):>15} " + " ".join(f"{row['relatedness'][b]:>10}" for b in BENCHMARKS))
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
