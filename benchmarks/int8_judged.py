"""int8 judged: the onnx-int8 backend of a model vs its fp32 (torch) self, quality with intervals and speed.

Quality, on the development files (never copied into the repository; ``--dev`` is their folder):

- ``ehr_relb_dev.tsv``: Spearman's rho of cosine vs clinicians' relatedness, 95% bootstrap
  interval over pairs;
- ``hpo_coding_dev.tsv`` and ``gsc_plus_dev.tsv``: acc@1 of coding each mention among every
  concept under HP:0000118 (HPO synonym sets), dense and hybrid w=1 rankings, as ``python -m bioviz code FILE
  --source hpo --root HP:0000118 --synonyms`` ranks them (without synonym expansion, as
  ``benchmarks/coding_dev.py``), 95% bootstrap interval over mentions.

The rule (issue 33): int8 may become the CPU default for encoding levels only if every int8
figure lies inside fp32's 95% interval; the verdict names each figure that moved.

Speed: the names of ICD-10 chapters (or ``--speed-source``), encoded through each backend's
:meth:`~bioviz.models.encoders.Encoder.encode` in alternating slices (the shared machine's load
drifts), names/s in wall and CPU seconds side by side, and the ratio (target int8/fp32 >= 1.8).

    BIOVIZ_HOME=/tmp/int8-home python benchmarks/int8_judged.py --model med-minilm
    python benchmarks/int8_judged.py --model med-minilm --skip-coding --speed-names 2000   # a quick look

Vectors of the level's names are cached in ``BIOVIZ_HOME`` per backend (a rerun is quick);
``--out`` writes the figures as JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from anywhere, without installing
sys.path.insert(0, str(Path(__file__).resolve().parent))  # select_model: the protocol's level rows
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

BACKENDS = ("torch", "onnx-int8")
DEV = Path("/work/shared/benchmarks")


def relatedness(encoders: dict, path: Path, n_boot: int) -> dict:
    """Spearman and its interval per backend on a pair file."""
    from bioviz.evaluation.benchmarks import load_benchmark, score_benchmark  # after sys.path is set

    bench = load_benchmark(path)
    terms = list(dict.fromkeys(bench.terms))
    out = {}
    for backend, encoder in encoders.items():
        vectors = encoder.encode(terms, batch_size=64)
        scored = score_benchmark(bench, dict(zip(terms, vectors)), n_boot=n_boot)
        out[backend] = {"value": scored["spearman"], "ci": list(scored["ci"]["spearman"]), "n": scored["covered"]}
    return out


def coding(encoders: dict, paths: list[Path], n_boot: int) -> dict:
    """acc@1 (dense and hybrid) and its interval per backend on gold files of HPO ids.

    The same level, rows and rankings as the selection protocol (``benchmarks/select_model.py``):
    rows coded outside HP:0000118 are left out for both backends alike.
    """
    from bioviz.evaluation.normalisation import (EXAMPLE_LEVEL, check_gold_ids, gold_ranks,  # after sys.path
                                                 load_gold, paraphrased, rank_metrics)
    from bioviz.models.cached_encoding import encode_cached
    from bioviz.search.hybrid import HYBRID_WEIGHT, Ranking, SparseNames
    from bioviz.search.index import NeighbourIndex
    from bioviz.search.term_coding import resolve_terms
    from bioviz.space import Space
    from select_model import within_level

    ontology = EXAMPLE_LEVEL.ontology()
    view = EXAMPLE_LEVEL.load(ontology)
    golds = {}
    for path in paths:
        gold, _ = within_level(load_gold(path), view)
        check_gold_ids(gold, view)
        golds[path.stem] = (gold, paraphrased(gold, view, ontology),
                            [info.text for info in resolve_terms(gold.mentions, view, ontology)])
    sparse = None
    out: dict = {}
    for backend, encoder in encoders.items():
        started = time.perf_counter()
        names, stats = encode_cached(encoder, view.names, batch_size=64)
        index = NeighbourIndex.from_view(Space(tuple(view.names), names, encoder.label), view)
        print(f"{backend}: {len(view.names):,} names of {view.title}: {stats.encoded:,} encoded, "
              f"{time.perf_counter() - started:.0f} s", file=sys.stderr)
        sparse = sparse or SparseNames.build(view.names, index.space.names)
        for name, (gold, mask, texts) in golds.items():
            mentions = encoder.encode(texts, batch_size=64)
            for ranking in (Ranking("dense"), Ranking("hybrid", HYBRID_WEIGHT)):
                ranks = gold_ranks(gold, view, index, mentions, ranking=ranking, ontology=ontology, sparse=sparse)
                for subset, rows in (("all", slice(None)), ("paraphrased", mask)):
                    metrics, ci = rank_metrics(ranks[rows], n_boot=n_boot)
                    key = f"{name} acc@1 {ranking.label} ({subset})"
                    out.setdefault(key, {})[backend] = {"value": metrics["acc1"], "ci": list(ci["acc1"]),
                                                       "n": int(np.size(ranks[rows]))}
    return out


def speed(encoders: dict, names: list[str], *, slice_size: int, rounds: int) -> dict:
    """Names/s of each backend over ``names``, slices alternating in order round by round."""
    wall, cpu = dict.fromkeys(encoders, 0.0), dict.fromkeys(encoders, 0.0)
    for backend, encoder in encoders.items():  # load the weights and the export before timing
        encoder.encode(names[:8])
    for r in range(rounds):
        for i, start in enumerate(range(0, len(names), slice_size)):
            part = names[start:start + slice_size]
            for backend in (list(encoders) if (i + r) % 2 == 0 else list(encoders)[::-1]):
                w, c = time.perf_counter(), time.process_time()
                encoders[backend].encode(part, batch_size=64)
                wall[backend] += time.perf_counter() - w
                cpu[backend] += time.process_time() - c
    n = len(names) * rounds
    out = {b: {"names/s (wall)": round(n / wall[b], 1), "names/s (CPU)": round(n / cpu[b], 1)} for b in encoders}
    out["ratio int8/fp32 (wall)"] = round(wall["torch"] / wall["onnx-int8"], 2)
    out["ratio int8/fp32 (CPU)"] = round(cpu["torch"] / cpu["onnx-int8"], 2)
    return out


def verdict(figures: dict) -> list[str]:
    """The figures whose int8 value lies outside fp32's 95% interval (empty: int8 holds)."""
    moved = []
    for name, by_backend in figures.items():
        low, high = by_backend["torch"]["ci"]
        value = by_backend["onnx-int8"]["value"]
        if not low <= value <= high:
            moved.append(f"{name}: int8 {value:.4f} outside fp32's [{low:.4f}, {high:.4f}]")
    return moved


def print_table(figures: dict) -> None:
    """fp32 and int8 side by side, each with its interval, and the difference."""
    print(f"{'figure':<44} {'fp32 [95% CI]':<28} {'onnx-int8 [95% CI]':<28} delta")
    for name, b in figures.items():
        cells = [f"{b[k]['value']:.4f} [{b[k]['ci'][0]:.4f}, {b[k]['ci'][1]:.4f}]" for k in BACKENDS]
        print(f"{name:<44} {cells[0]:<28} {cells[1]:<28} {b['onnx-int8']['value'] - b['torch']['value']:+.4f}")


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="med-minilm")
    parser.add_argument("--dev", type=Path, default=DEV, help="folder of the development files")
    parser.add_argument("--n-boot", type=int, default=1000)
    parser.add_argument("--skip-coding", action="store_true", help="leave out the coding files (encodes ~39k names)")
    parser.add_argument("--speed-source", default="icd10")
    parser.add_argument("--speed-names", type=int, default=0, help="a seeded sample of this many names (0: all)")
    parser.add_argument("--slice", type=int, default=512, help="names per alternating slice")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)

    from bioviz.models.registry import backend_encoder  # after sys.path is set
    from bioviz.ontology import level_view, load_source

    encoders = {backend: backend_encoder(args.model, backend) for backend in BACKENDS}
    figures = {"ehr_relb_dev Spearman": relatedness(encoders, args.dev / "ehr_relb_dev.tsv", args.n_boot)}
    if not args.skip_coding:
        figures.update(coding(encoders, [args.dev / "hpo_coding_dev.tsv", args.dev / "gsc_plus_dev.tsv"], args.n_boot))
    names = list(dict.fromkeys(level_view(load_source(args.speed_source), depth=1).names))
    if args.speed_names:
        pick = np.random.default_rng(0).choice(len(names), size=min(args.speed_names, len(names)), replace=False)
        names = [names[i] for i in sorted(pick)]
    result = {"model": args.model, "figures": figures, "moved": verdict(figures),
              "skipped": ["hpo_coding_dev", "gsc_plus_dev"] if args.skip_coding else [],
              "speed": {"level": f"{args.speed_source} chapters", "names": len(names),
                        **speed(encoders, names, slice_size=args.slice, rounds=args.rounds)},
              "load": os.getloadavg()}
    print_table(figures)
    print(json.dumps({k: v for k, v in result.items() if k != "figures"}, indent=1))
    if result["moved"]:
        print("int8 does not hold: " + "; ".join(result["moved"]))
    elif args.skip_coding:  # the rule needs every figure: without the coding ones there is no verdict
        print("no verdict: the coding files were skipped; ehr_relb_dev inside fp32's interval")
    else:
        print("int8 holds: every figure inside fp32's interval")
    if args.out:
        args.out.write_text(json.dumps(result, indent=1), encoding="utf-8")
    return result


if __name__ == "__main__":
    main()
