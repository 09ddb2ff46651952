"""Quality of trained encoders against their base, median over split seeds.

For each seed: draw the split, train, and measure, side by side for the base vectors and
the trained ones, the test class-retrieval mAP (higher-level-semantics §4.3) and the
Spearman correlation on the relatedness benchmarks (MayoSRS, UMNSRS sim/rel). Nothing is
written to disk but the embedding cache under BIOVIZ_HOME.

Usage::

    BIOVIZ_HOME=/tmp/q python benchmarks/quality_train.py --source icd10 --depth 1 \
        --encoders residual --seeds 0 1 2 3 4 [--hidden 9600] [--threads 1]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

import torch

BENCHMARKS = ("mayosrs", "umnsrs-sim", "umnsrs-rel")


def relatedness(encode, names: list[str]) -> dict:
    """Spearman per benchmark for an ``encode(texts) -> unit rows`` function."""
    from bioviz.benchmarks import load_benchmark, score_benchmark

    out = {}
    for name in BENCHMARKS:
        try:
            bench = load_benchmark(name)
        except Exception as error:  # noqa: BLE001 - report, don't stop the other figures
            out[name] = f"unavailable: {error}"
            continue
        vectors = encode(bench.terms)
        out[name] = round(float(score_benchmark(bench, dict(zip(bench.terms, vectors)), n_boot=10)["spearman"]), 4)
    return out


def run_one(config, with_relatedness: bool) -> dict:
    from bioviz.embeddings import embed
    from trainer.data import prepare
    from trainer.loop import Trainer

    data = prepare(config)
    started = time.perf_counter()
    result = Trainer(config, data).run()
    row = {
        "encoder": config.encoder,
        "seed": config.seed,
        "epochs": len(result.history),
        "best_epoch": result.best_epoch,
        "train_s": round(time.perf_counter() - started, 1),
        "base_test_mAP": round(result.metrics["baseline"]["test"]["mAP"], 4),
        "trained_test_mAP": round(result.metrics["trained"]["test"]["mAP"], 4),
    }
    if "cca_projection" in result.metrics:
        row["cca_only_test_mAP"] = round(result.metrics["cca_projection"]["test"]["mAP"], 4)
    if with_relatedness:
        def base_encode(texts):
            return embed(texts, config.input_model).vectors

        if result.head is not None:
            def trained_encode(texts):
                with torch.no_grad():
                    out = result.head(torch.from_numpy(base_encode(texts)))
                return torch.nn.functional.normalize(out, dim=1).numpy()
        else:
            def trained_encode(texts):
                return result.model.encode(list(texts), normalize_embeddings=True, convert_to_numpy=True,
                                           show_progress_bar=False)
        row["base_rel"] = relatedness(base_encode, [])
        row["trained_rel"] = relatedness(trained_encode, [])
        if result.projection is not None:
            def projected_encode(texts):
                with torch.no_grad():
                    out = result.projection(torch.from_numpy(base_encode(texts)))
                return torch.nn.functional.normalize(out, dim=1).numpy()

            row["cca_only_rel"] = relatedness(projected_encode, [])
    return row


def main(argv=None) -> int:
    from trainer.config import TrainConfig, validate

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--source", default="icd10")
    parser.add_argument("--root")
    parser.add_argument("--depth", type=int, default=1)
    parser.add_argument("--shots", type=int, default=15)
    parser.add_argument("--encoders", nargs="+", default=["residual"])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2, 3, 4])
    parser.add_argument("--hidden", type=int, default=9600)
    parser.add_argument("--epochs", type=int)
    parser.add_argument("--base", default="minilm")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (the machine is shared)")
    parser.add_argument("--no-relatedness", action="store_true")
    parser.add_argument("--definition-scope", default="train", help="definitions: train or all")
    parser.add_argument("--max-pairs", type=int, default=20000)
    parser.add_argument("--batch-size", type=int)
    parser.add_argument("--finetune", action="store_true", help="hierarchical: fine-tune the transformer")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    rows = []
    for encoder in args.encoders:
        for seed in args.seeds:
            config = validate(TrainConfig(source=args.source, root=args.root, depth=args.depth, shots=args.shots,
                                          encoder=encoder, base=args.base, seed=seed, hidden=args.hidden,
                                          epochs=args.epochs, definition_scope=args.definition_scope,
                                          max_pairs=args.max_pairs, batch_size=args.batch_size,
                                          finetune=args.finetune), check_data=False)
            row = run_one(config, not args.no_relatedness)
            rows.append(row)
            print(json.dumps(row), flush=True)
    print("# medians over seeds", file=sys.stderr)
    for encoder in args.encoders:
        mine = [r for r in rows if r["encoder"] == encoder]
        summary = {
            "encoder": encoder, "source": args.source, "root": args.root, "depth": args.depth, "seeds": len(mine),
            "base_test_mAP": statistics.median(r["base_test_mAP"] for r in mine),
            "trained_test_mAP": statistics.median(r["trained_test_mAP"] for r in mine),
            "median_gain": statistics.median(r["trained_test_mAP"] - r["base_test_mAP"] for r in mine),
        }
        if mine and "cca_only_test_mAP" in mine[0]:
            summary["cca_only_test_mAP"] = statistics.median(r["cca_only_test_mAP"] for r in mine)
        if not args.no_relatedness:
            for name in BENCHMARKS:
                values = [(r["base_rel"][name], r["trained_rel"][name]) for r in mine
                          if isinstance(r["base_rel"][name], float)]
                if values:
                    summary[f"{name}_base"] = statistics.median(v[0] for v in values)
                    summary[f"{name}_trained"] = statistics.median(v[1] for v in values)
        print(json.dumps({"summary": summary}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
