"""Choose the coding ranking on the GSC+ dev file: dense vs hybrid at every weight, side by side in one run.

Scores the vendored GSC+ development split (../shared/benchmarks/gsc_plus_dev.tsv, read where it is, never copied here; 119 mentions with
their HPO ids) on HPO synonym sets under HP:0000118, as ``python -m bioviz eval --task
normalisation`` does: Acc@1, Acc@5 and MRR with 95% bootstrap intervals, on all mentions and
on the paraphrased ones, for the dense ranking and for the hybrid ranking at weights 0, 0.1,
..., 1.0 (:mod:`bioviz.search.hybrid`). The level's names are encoded once and each ranking
re-scores the same vectors. Rows go to ``benchmarks/results/coding_dev_<model>.json``; the
rule "highest Acc@1 on all mentions, ties -> MRR" picks the row printed last, which is what
``bioviz.search.hybrid.DEFAULT_RANKING`` holds.

Usage::

    BIOVIZ_HOME=/tmp/q python benchmarks/coding_dev.py --model minilm [--n-boot 1000] [--gold FILE]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from anywhere, without installing
sys.path.insert(0, str(Path(__file__).resolve().parent))  # dev_files: where the development files are

from bioviz.evaluation.normalisation import (EXAMPLE_LEVEL, check_gold_ids, gold_ranks,  # noqa: E402
                                             load_gold, normalisation_figures, paraphrased)
from bioviz.search.hybrid import Ranking, SparseNames  # noqa: E402
from bioviz.search.neighbours import candidate_index  # noqa: E402
from bioviz.search.term_coding import encode_terms, resolve_terms  # noqa: E402
from dev_files import GSC_PLUS_DEV  # noqa: E402

WEIGHTS = tuple(round(0.1 * i, 1) for i in range(11))
RESULTS = Path(__file__).resolve().parent / "results"


def choose(rows: list[dict]) -> dict:
    """The row with the highest Acc@1 on all mentions; ties -> the higher MRR, then the first listed (dense first)."""
    return max(rows, key=lambda r: (round(r["acc1"], 6), round(r["mrr"], 6)))


def score(model: str, gold_path: Path, n_boot: int) -> list[dict]:
    """One row per ranking: the figures and intervals on all and on paraphrased mentions."""
    gold = load_gold(gold_path)
    ontology = EXAMPLE_LEVEL.ontology()
    view = EXAMPLE_LEVEL.load(ontology)
    check_gold_ids(gold, view)
    mask = paraphrased(gold, view, ontology)
    started = time.perf_counter()
    index = candidate_index(view, model)
    texts = [info.text for info in resolve_terms(gold.mentions, view, ontology)]
    vectors = encode_terms(texts, model)
    sparse = SparseNames.build(view.names, index.space.names)
    print(f"{model}: {len(view.names):,} names of {view.title} encoded/read in {time.perf_counter() - started:.0f} s; "
          f"{len(gold)} mentions, {int(mask.sum())} paraphrased", file=sys.stderr)
    rows = []
    for ranking in [Ranking("dense"), *(Ranking("hybrid", w) for w in WEIGHTS)]:
        ranks = gold_ranks(gold, view, index, vectors, ranking=ranking, ontology=ontology, sparse=sparse)
        figures, ci, sizes = normalisation_figures(ranks, mask, n_boot=n_boot)
        rows.append({"model": model, "ranking": ranking.kind, "weight": ranking.weight if ranking.hybrid else None,
                     "label": ranking.label, "level": view.title, "gold": gold.label, **sizes, **figures, "ci": ci})
    return rows


def table(rows: list[dict]) -> str:
    """The rows as a fixed-width table, intervals in brackets."""
    def cell(row, key):
        low, high = row["ci"][key]
        return f"{row[key]:.3f} [{low:.2f}, {high:.2f}]"

    keys = ["acc1", "acc5", "mrr", "paraphrased.acc1", "paraphrased.acc5", "paraphrased.mrr"]
    lines = [f"{'ranking':<14}" + "".join(f"{k:>24}" for k in keys)]
    lines += [f"{row['label']:<14}" + "".join(f"{cell(row, k):>24}" for k in keys) for row in rows]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="minilm", help="minilm, med-minilm, char-tfidf, or any MODEL")
    parser.add_argument("--gold", default=str(GSC_PLUS_DEV),
                        help="gold file (mention, concept id); the GSC+ dev file by default (never shipped)")
    parser.add_argument("--n-boot", type=int, default=1000, help="bootstrap resamples for the 95%% intervals")
    args = parser.parse_args(argv)
    rows = score(args.model, Path(args.gold), args.n_boot)
    best = choose(rows)
    print(table(rows))
    print(f"chosen by 'highest acc@1 on all mentions, ties -> MRR': {best['label']}")
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / f"coding_dev_{re.sub(r'[^A-Za-z0-9.-]+', '-', Path(args.model).name)}.json"
    out.write_text(json.dumps({"model": args.model, "n_boot": args.n_boot, "rule": "highest acc1 on all mentions, "
                               "ties -> mrr", "chosen": best["label"], "rows": rows}, indent=1) + "\n")
    print(f"rows written to {out}", file=sys.stderr)


if __name__ == "__main__":
    main()
