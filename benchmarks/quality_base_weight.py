"""What the base weight costs and buys: every weight of the same trained heads, side by side.

For each encoder and split seed, one head is trained; then, for every weight ``w`` the
trainer's automatic choice considered (``trainer.base_mix.BASE_WEIGHTS``, with the
validation figures it recorded), the mixed model ``(1 - w) f(u) / s + w u`` is scored:
validation mAP and validation retention (what the choice sees), test mAP and the
MayoSRS/UMNSRS Spearman changes against the base (what it never sees). The medians per
weight, and the weights each ``--retention`` threshold would choose with their medians,
show the trade-off the ``min_retention`` setting controls. Nothing is written to disk but
the embedding cache under BIOVIZ_HOME.

Usage::

    BIOVIZ_HOME=/tmp/q python benchmarks/quality_base_weight.py --source hpo --root HP:0000118 \
        --depth 1 --encoders dan hierarchical --seeds 0 1 2 3 4 --workers 2 \
        [--retention 0.8 0.85 0.9] [--set identity_start=true] [--rows hpo.json]
    python benchmarks/quality_base_weight.py --derive hpo.json icd10.json

``--derive`` applies the validation-only rule of ``trainer.base_mix.derive_min_retention``
(per run, the retention at the knee of its validation mAP/retention curve; the median over
runs, rounded to 0.05) to the rows saved with ``--rows``: it reads only each run's
validation candidates, never the test or benchmark columns.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from anywhere, without installing

from quality_train import BENCHMARKS, add_level_options, parse_assignments, run_tasks  # noqa: E402


def score_weights(config) -> dict:
    """Train a head once, then score every candidate weight the trainer considered (one row each)."""
    from bioviz.evaluation.benchmarks import load_benchmark, score_benchmark
    from bioviz.models.registry import embed
    from trainer.base_mix import mix
    from trainer.data import prepare
    from trainer.encoders import BaseMix
    from trainer.loop import Trainer, encode_in_chunks, retrieval_figures

    data = prepare(config)
    result = Trainer(config, data).run()
    head = result.head.head if isinstance(result.head, BaseMix) else result.head  # the head as trained
    choice = result.metrics["base_mix"]  # every candidate's validation figures, and the scale
    scale = choice["scale"]
    outputs = encode_in_chunks(head, torch.from_numpy(np.require(data.vectors, requirements="W"))).numpy()
    benchmarks = {name: load_benchmark(name) for name in BENCHMARKS}
    base = {name: embed(b.terms, config.input_model).vectors for name, b in benchmarks.items()}
    head_out = {name: encode_in_chunks(head, torch.from_numpy(v)).numpy() for name, v in base.items()}

    def rho(name: str, vectors: np.ndarray) -> float:
        bench = benchmarks[name]
        return float(score_benchmark(bench, dict(zip(bench.terms, vectors)), n_boot=10)["spearman"])

    base_rel = {name: round(rho(name, base[name]), 4) for name in BENCHMARKS}
    weights = []
    for candidate in choice["candidates"]:
        w = candidate["weight"]
        test = retrieval_figures(mix(outputs, data.vectors, w, scale), data)["test"]["mAP"]
        weights.append({**candidate, "test_mAP": None if test is None else round(test, 4),
                        **{f"{name}_change": round(rho(name, mix(head_out[name], base[name], w, scale))
                                                   - base_rel[name], 4) for name in BENCHMARKS}})
    return {"encoder": config.encoder, "seed": config.seed, "epochs": len(result.history), "scale": round(scale, 4),
            "base_test_mAP": round(result.metrics["baseline"]["test"]["mAP"], 4), "base_rel": base_rel,
            "weights": weights}


def _task(task: dict) -> dict:
    from trainer.config import TrainConfig, validate

    torch.set_num_threads(task["threads"])
    return score_weights(validate(TrainConfig(**task["config"])))


def _medians(rows: list[dict]) -> dict:
    keys = ("test_mAP", "val_mAP", "val_retention", *(f"{b}_change" for b in BENCHMARKS))
    return {k: round(statistics.median(r[k] for r in rows), 4) for k in keys if all(r.get(k) is not None for r in rows)}


def summarise(seeds: list[dict], retentions) -> dict:
    """Medians per weight, and per retention threshold the weights chosen on validation."""
    from trainer.base_mix import decide

    per_weight = [{"weight": seeds[0]["weights"][i]["weight"], **_medians([s["weights"][i] for s in seeds])}
                  for i in range(len(seeds[0]["weights"]))]
    per_threshold = []
    for threshold in retentions:
        chosen = []
        for s in seeds:
            w, _ = decide(s["weights"], threshold)
            chosen.append(next(c for c in s["weights"] if c["weight"] == w))
        per_threshold.append({"min_retention": threshold, "weights": [c["weight"] for c in chosen], **_medians(chosen)})
    return {"seeds": len(seeds), "base_test_mAP": statistics.median(s["base_test_mAP"] for s in seeds),
            "per_weight": per_weight, "per_threshold": per_threshold}


def derive(paths) -> dict:
    """The validation-only min_retention over every run saved in ``paths`` (``--rows`` files)."""
    from trainer.base_mix import derive_min_retention

    rows = [row for path in paths for row in json.loads(Path(path).read_text(encoding="utf-8"))]
    # Only the validation columns reach the rule.
    runs = [[{k: c[k] for k in ("weight", "val_mAP", "val_retention")} for c in row["weights"]] for row in rows]
    result = derive_min_retention(runs)
    result["runs"] = [{"level": row.get("level"), "encoder": row["encoder"], "seed": row["seed"], "knee": knee}
                      for row, knee in zip(rows, result.pop("knees"))]
    return result


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--derive", nargs="+", metavar="ROWS_JSON", help="apply the threshold rule to saved rows")
    parser.add_argument("--rows", help="save every run's rows (for --derive)")
    if "--derive" in (argv if argv is not None else sys.argv[1:]):
        print(json.dumps(derive(parser.parse_known_args(argv)[0].derive)))
        return 0
    add_level_options(parser, ["dan"])
    parser.add_argument("--retention", nargs="+", type=float, default=[0.8, 0.85, 0.9],
                        help="min_retention thresholds to report the validation choice for")
    args = parser.parse_args(argv)
    unknown = set(args.encoders) - {"residual", "dan", "cca", "hierarchical"}
    if unknown:
        parser.error(f"no base weight for {', '.join(sorted(unknown))}: choose head encoders")
    fixed = parse_assignments(args.set, several=False)
    tasks = [{"config": {"source": args.source, "root": args.root, "depth": args.depth, "shots": args.shots,
                         "encoder": encoder, "base": args.base, "seed": seed, **fixed, "base_weight": None},
              "threads": args.threads} for encoder in args.encoders for seed in args.seeds]
    rows = run_tasks(_task, tasks, args.workers)
    level = f"{args.source}:{args.root or ''}:{args.depth}"
    if args.rows:
        Path(args.rows).write_text(json.dumps([{**r, "level": level} for r in rows]), encoding="utf-8")
    for encoder in args.encoders:
        mine = sorted((r for r in rows if r["encoder"] == encoder), key=lambda r: r["seed"])
        print(json.dumps({"summary": {"encoder": encoder, "source": args.source, "root": args.root,
                                      "depth": args.depth, "fixed": fixed, **summarise(mine, args.retention)}}),
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
