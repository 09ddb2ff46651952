"""What the base weight costs and buys: every weight of the same trained heads, side by side.

For each encoder and split seed, one head is trained as the papers define it
(``base_weight 0``); then, for every weight ``w`` the trainer's automatic choice considers
(``trainer.base_mix.BASE_WEIGHTS``), the mixed model ``(1 - w) f(u) / s + w u`` is scored:
validation mAP and validation retention (what the choice sees), test mAP and the
MayoSRS/UMNSRS Spearman changes against the base (what it never sees). The medians per
weight, and the weights each ``--retention`` threshold would choose with their medians,
show the trade-off the ``min_retention`` setting controls. Nothing is written to disk but
the embedding cache under BIOVIZ_HOME.

Usage::

    BIOVIZ_HOME=/tmp/q python benchmarks/quality_base_weight.py --source hpo --root HP:0000118 \
        --depth 1 --encoders dan hierarchical --seeds 0 1 2 3 4 --workers 2 \
        [--retention 0.8 0.85 0.9] [--set identity_start=true]
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

from quality_train import BENCHMARKS, add_level_options, parse_assignments, relatedness, run_tasks  # noqa: E402


def score_weights(config) -> dict:
    """Train the raw head once, then score every candidate weight (one row per weight)."""
    from bioviz.embeddings import embed
    from bioviz.metrics import CrossClassRetention, class_retrieval_map
    from trainer.base_mix import BASE_WEIGHTS, choose_base_weight, mix
    from trainer.data import prepare
    from trainer.loop import Trainer

    data = prepare(config)
    result = Trainer(config, data).run()
    split, labels, u = data.split, data.view.labels, data.vectors
    with torch.no_grad():
        f = result.head(torch.from_numpy(u)).numpy()
    rows = np.concatenate([split.train, split.validation])
    retention = CrossClassRetention(u[split.validation], labels[split.validation])
    choice = choose_base_weight(f[rows], u[rows], labels[rows], len(split.train), retention, 0.0)
    scale = choice["scale"]

    def base_encode(texts):
        return embed(texts, config.input_model).vectors

    base_rel = relatedness(base_encode)
    weights = []
    for candidate in choice["candidates"]:
        w = candidate["weight"]
        vectors = mix(f, u, w, scale)
        test = class_retrieval_map(vectors[split.test], labels[split.test], vectors[split.train], labels[split.train])

        def encode(texts, w=w):
            b = base_encode(texts)
            with torch.no_grad():
                out = result.head(torch.from_numpy(b)).numpy()
            return mix(out, b, w, scale)

        rel = relatedness(encode)
        weights.append({**candidate, "test_mAP": round(float(test), 4),
                        **{f"{name}_change": round(rel[name] - base_rel[name], 4) for name in BENCHMARKS
                           if isinstance(rel[name], float) and isinstance(base_rel[name], float)}})
    assert [w["weight"] for w in weights] == list(BASE_WEIGHTS)
    return {"encoder": config.encoder, "seed": config.seed, "epochs": len(result.history), "scale": round(scale, 4),
            "base_test_mAP": round(result.metrics["baseline"]["test"]["mAP"], 4), "base_rel": base_rel,
            "weights": weights}


def _task(task: dict) -> dict:
    from trainer.config import TrainConfig, validate

    torch.set_num_threads(task["threads"])
    return score_weights(validate(TrainConfig(**task["config"]), check_data=False))


def _medians(rows: list[dict]) -> dict:
    keys = ("test_mAP", "val_mAP", "val_retention", *(f"{b}_change" for b in BENCHMARKS))
    return {k: round(statistics.median(r[k] for r in rows), 4) for k in keys if all(r.get(k) is not None for r in rows)}


def summarise(seeds: list[dict], retentions) -> dict:
    """Medians per weight, and per retention threshold the weights chosen on validation."""
    from trainer.base_mix import best_weight

    per_weight = [{"weight": seeds[0]["weights"][i]["weight"], **_medians([s["weights"][i] for s in seeds])}
                  for i in range(len(seeds[0]["weights"]))]
    per_threshold = []
    for threshold in retentions:
        chosen = []
        for s in seeds:
            w = best_weight(s["weights"], threshold)
            chosen.append(next(c for c in s["weights"] if c["weight"] == w))
        per_threshold.append({"min_retention": threshold, "weights": [c["weight"] for c in chosen], **_medians(chosen)})
    return {"seeds": len(seeds), "base_test_mAP": statistics.median(s["base_test_mAP"] for s in seeds),
            "per_weight": per_weight, "per_threshold": per_threshold}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_level_options(parser, ["dan"])
    parser.add_argument("--retention", nargs="+", type=float, default=[0.8, 0.85, 0.9],
                        help="min_retention thresholds to report the validation choice for")
    args = parser.parse_args(argv)
    unknown = set(args.encoders) - {"residual", "dan", "cca", "hierarchical"}
    if unknown:
        parser.error(f"no base weight for {', '.join(sorted(unknown))}: choose head encoders")
    fixed = parse_assignments(args.set, several=False)
    tasks = [{"config": {"source": args.source, "root": args.root, "depth": args.depth, "shots": args.shots,
                         "encoder": encoder, "base": args.base, "seed": seed, **fixed, "base_weight": 0.0},
              "threads": args.threads} for encoder in args.encoders for seed in args.seeds]
    rows = run_tasks(_task, tasks, args.workers)
    for encoder in args.encoders:
        mine = sorted((r for r in rows if r["encoder"] == encoder), key=lambda r: r["seed"])
        print(json.dumps({"summary": {"encoder": encoder, "source": args.source, "root": args.root,
                                      "depth": args.depth, "fixed": fixed, **summarise(mine, args.retention)}}),
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
