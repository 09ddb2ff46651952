"""Quality of trained encoders against their base, median over split seeds.

For each seed: draw the split, train, and measure, side by side for the base vectors and
the trained ones, the test class-retrieval mAP (higher-level-semantics §4.3) and the
Spearman correlation on the relatedness benchmarks (MayoSRS, UMNSRS sim/rel). Nothing is
written to disk but the embedding cache under BIOVIZ_HOME.

Hyperparameters are chosen the way the papers choose them, on the validation split and
never on the benchmark pairs: ``--grid hidden=768,1536,9600`` trains every combination
for every seed, and for each encoder the combination with the best mean validation
criterion (the run's own stopping criterion: validation loss for the few-shot encoders,
validation mAP for level training; ``--select`` overrides it) is reported as selected.

Usage::

    BIOVIZ_HOME=/tmp/q python benchmarks/quality_train.py --source icd10 --depth 1 \
        --encoders residual --seeds 0 1 2 3 4 [--set hidden=9600] [--grid patience=1,10] \
        [--threads 1] [--workers 1]
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from anywhere, without installing

BENCHMARKS = ("mayosrs", "umnsrs-sim", "umnsrs-rel")


def relatedness(encode) -> dict:
    """Spearman per benchmark for an ``encode(texts) -> unit rows`` function."""
    from bioviz.evaluation.benchmarks import load_benchmark, score_benchmark

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


def best_validation(result) -> dict:
    """Validation figures of the model the row reports, which the selection compares.

    The restored (best) epoch's figures, and, when the head was mixed with its input
    (:mod:`trainer.base_mix`), the chosen weight's validation mAP and retention in place of
    the head's own (kept as ``head_val_*``); the validation loss is always the head's.
    """
    if not result.history:
        return {}
    record = next((r for r in result.history if r["epoch"] == result.best_epoch), result.history[-1])
    out = {"val_mAP": record.get("val_mAP"), "val_loss": record.get("val_loss"),
           "val_retention": record.get("val_retention")}
    mixing = result.metrics.get("base_mix") or {}
    chosen = next((c for c in mixing.get("candidates", []) if c["weight"] == mixing.get("weight")), None)
    if chosen is not None:
        out.update({"head_val_mAP": out["val_mAP"], "head_val_retention": out["val_retention"],
                    "val_mAP": chosen["val_mAP"], "val_retention": chosen["val_retention"]})
    return out


def run_one(config, with_relatedness: bool) -> dict:
    from bioviz.models.registry import embed
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
        "base_val_mAP": round(result.metrics["baseline"]["validation"]["mAP"], 4),
        **best_validation(result),
    }
    if "cca_projection" in result.metrics:
        row["cca_only_test_mAP"] = round(result.metrics["cca_projection"]["test"]["mAP"], 4)
    if "base_mix" in result.metrics:  # the input weight, fixed or chosen on validation (trainer.base_mix)
        row["base_weight"] = result.metrics["base_mix"]["weight"]
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
        row["base_rel"] = relatedness(base_encode)
        row["trained_rel"] = relatedness(trained_encode)
        if result.projection is not None:
            def projected_encode(texts):
                with torch.no_grad():
                    out = result.projection(torch.from_numpy(base_encode(texts)))
                return torch.nn.functional.normalize(out, dim=1).numpy()

            row["cca_only_rel"] = relatedness(projected_encode)
    return row


def parse_value(text: str):
    """``"9600"`` -> 9600, ``"0.5"`` -> 0.5, ``"true"`` -> True, ``"none"`` -> None, else the text."""
    lowered = text.strip().lower()
    if lowered in ("none", "null"):
        return None
    if lowered in ("true", "false"):
        return lowered == "true"
    try:
        return json.loads(text)
    except ValueError:
        return text


def parse_assignments(items: list[str], several: bool) -> dict:
    """``["hidden=768,1536"]`` -> ``{"hidden": [768, 1536]}`` (one value each unless ``several``)."""
    out = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep:
            raise SystemExit(f"error: expected KEY=VALUE, got {item!r}")
        key = key.strip().replace("-", "_")
        out[key] = [parse_value(v) for v in value.split(",")] if several else parse_value(value)
    return out


def _task(task: dict) -> dict:
    """One (config, seed) training in a worker process."""
    from trainer.config import TrainConfig, validate

    torch.set_num_threads(task["threads"])
    config = validate(TrainConfig(**task["config"]))
    row = run_one(config, task["relatedness"])
    row["overrides"] = task["overrides"]
    return row


def selection_value(rows: list[dict], select: str) -> float:
    """Mean validation criterion of a grid point (higher is better: losses are negated).

    ``balanced`` is the validation mAP gain over the base times the validation retention
    (:class:`bioviz.evaluation.metrics.CrossClassRetention`): zero for a head that learns nothing and
    for one that scrambles everything between classes, so neither extreme of a grid wins.
    """
    if select == "balanced":
        rows = [{**r, "balanced": (r["val_mAP"] - r["base_val_mAP"]) * r["val_retention"]} for r in rows
                if isinstance(r.get("val_mAP"), (int, float)) and isinstance(r.get("val_retention"), (int, float))]
    mean = _mean(rows, {"loss": "val_loss", "mAP": "val_mAP"}.get(select, select))
    if mean is None:
        return float("-inf")
    return -mean if select == "loss" else mean


def _mean(rows: list[dict], key: str) -> float | None:
    """Mean of ``key`` over the rows that report it (None when none does)."""
    values = [r[key] for r in rows if isinstance(r.get(key), (int, float)) and math.isfinite(r[key])]
    return round(statistics.fmean(values), 4) if values else None


def summarise(rows: list[dict], with_relatedness: bool) -> dict:
    """Medians over seeds of one grid point."""
    summary = {
        "seeds": len(rows),
        "base_test_mAP": statistics.median(r["base_test_mAP"] for r in rows),
        "trained_test_mAP": statistics.median(r["trained_test_mAP"] for r in rows),
        "median_gain": round(statistics.median(r["trained_test_mAP"] - r["base_test_mAP"] for r in rows), 4),
        **{f"mean_{key}": _mean(rows, key) for key in ("val_mAP", "val_loss", "val_retention")},
    }
    if rows and "base_weight" in rows[0]:
        summary["base_weights"] = [r["base_weight"] for r in rows]
    if rows and "cca_only_test_mAP" in rows[0]:
        summary["cca_only_test_mAP"] = statistics.median(r["cca_only_test_mAP"] for r in rows)
    if with_relatedness:
        for name in BENCHMARKS:
            values = [(r["base_rel"][name], r["trained_rel"][name]) for r in rows
                      if isinstance(r["base_rel"][name], float)]
            if values:
                base = statistics.median(v[0] for v in values)
                trained = statistics.median(v[1] for v in values)
                summary[f"{name}_base"] = base
                summary[f"{name}_trained"] = trained
                summary[f"{name}_change"] = round(trained - base, 4)
    return summary


def add_level_options(parser: argparse.ArgumentParser, encoders: list[str]) -> None:
    """The options every quality script shares: the level, the encoders, seeds, base, fixed settings, workers."""
    parser.add_argument("--source", default="icd10")
    parser.add_argument("--root")
    parser.add_argument("--depth", type=int, default=1)
    parser.add_argument("--shots", type=int, default=15)
    parser.add_argument("--encoders", nargs="+", default=encoders)
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2, 3, 4])
    parser.add_argument("--base", default="minilm")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="any TrainConfig field, e.g. --set hidden=9600 --set epochs=20")
    parser.add_argument("--threads", type=int, default=1, help="torch threads per training (the machine is shared)")
    parser.add_argument("--workers", type=int, default=1, help="trainings at once (separate processes)")


def run_tasks(task_function, tasks: list[dict], workers: int) -> list[dict]:
    """Run ``task_function`` on every task (in ``workers`` processes), printing each row as it lands."""
    rows = []
    if workers > 1:
        import multiprocessing

        # Parsed sources and vectors are cached on disk: warm them once before forking out.
        from trainer.config import TrainConfig, validate
        from trainer.data import prepare

        prepare(validate(TrainConfig(**tasks[0]["config"])))
        with multiprocessing.get_context("spawn").Pool(workers) as pool:
            for row in pool.imap_unordered(task_function, tasks):
                rows.append(row)
                print(json.dumps(row), flush=True)
    else:
        for task in tasks:
            rows.append(task_function(task))
            print(json.dumps(rows[-1]), flush=True)
    return rows


def main(argv=None) -> int:
    from trainer.config import paper_defaults

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_level_options(parser, ["residual"])
    parser.add_argument("--grid", action="append", default=[], metavar="KEY=V1,V2",
                        help="train every combination; the best mean validation criterion is selected")
    parser.add_argument("--select", choices=("auto", "loss", "mAP", "balanced"), default="auto",
                        help="validation criterion for the selection (auto: the encoder's stopping criterion; "
                             "balanced: validation mAP gain x cross-class retention of the base's similarities)")
    parser.add_argument("--no-relatedness", action="store_true")
    args = parser.parse_args(argv)
    fixed = parse_assignments(args.set, several=False)
    grid = parse_assignments(args.grid, several=True)
    points = [dict(zip(grid, values)) for values in itertools.product(*grid.values())] or [{}]

    tasks = []
    for encoder in args.encoders:
        for overrides in points:
            for seed in args.seeds:
                config = {"source": args.source, "root": args.root, "depth": args.depth, "shots": args.shots,
                          "encoder": encoder, "base": args.base, "seed": seed, **fixed, **overrides}
                tasks.append({"config": config, "overrides": overrides, "threads": args.threads,
                              "relatedness": not args.no_relatedness})
    rows = run_tasks(_task, tasks, args.workers)

    print("# medians over seeds", file=sys.stderr)
    for encoder in args.encoders:
        stop_on = fixed.get("stop_on") or paper_defaults(encoder)["stop_on"]
        select = args.select if args.select != "auto" else stop_on
        scored, scored_balanced = [], []
        for overrides in points:
            mine = [r for r in rows if r["encoder"] == encoder and r["overrides"] == overrides]
            summary = {"encoder": encoder, "source": args.source, "root": args.root, "depth": args.depth,
                       "fixed": fixed, "overrides": overrides, **summarise(mine, not args.no_relatedness)}
            scored.append((selection_value(mine, select), summary))
            scored_balanced.append((selection_value(mine, "balanced"), summary))
            print(json.dumps({"summary": summary}), flush=True)
        if len(points) > 1:
            value, best = max(scored, key=lambda item: item[0])
            print(json.dumps({"selected": {"by": f"validation {select}", **best}}), flush=True)
            if select != "balanced":  # the trade-off choice, side by side
                value, best = max(scored_balanced, key=lambda item: item[0])
                print(json.dumps({"selected": {"by": "validation balanced", **best}}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
