"""Choose the Code terms page's low-confidence thresholds on the GSC+ dev file, per model and ranking.

Codes the vendored GSC+ development split (../shared/benchmarks/gsc_plus_dev.tsv, read where it is, never copied here; 119 mentions with their
HPO ids) on HPO synonym sets under HP:0000118 exactly as the page and ``python -m bioviz code``
do (:func:`bioviz.search.term_coding.code_term_list`, k=2), for each model under the dense and
the default hybrid ranking. A term is *flagged* when its first concept's score is below
``min_score`` or its margin over the second concept is below ``min_margin`` (exact matches are
never flagged). Over a grid of both thresholds the rule "highest Youden's J for catching
errors (share of wrong first concepts flagged minus share of right ones flagged), ties -> fewer
flagged" picks one pair; its dev figures are the share flagged, the accuracy of the unflagged
and of the flagged terms, and the share of errors caught. 119 mentions are few: read the
thresholds as "where this file puts the line", not as calibrated probabilities.

Writes ``benchmarks/results/coding_confidence.json``; ``bioviz.search.coding_confidence.THRESHOLDS``
holds the chosen pairs (a test checks they agree).

Usage::

    BIOVIZ_HOME=/tmp/q python benchmarks/coding_confidence.py [--models med-minilm minilm char-tfidf]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from anywhere, without installing
sys.path.insert(0, str(Path(__file__).resolve().parent))  # dev_files: where the development files are

from bioviz.evaluation.normalisation import EXAMPLE_LEVEL, check_gold_ids, load_gold  # noqa: E402
from bioviz.search.hybrid import DEFAULT_RANKING, Ranking  # noqa: E402
from bioviz.search.neighbours import candidate_index  # noqa: E402
from bioviz.search.term_coding import EXACT, code_term_list  # noqa: E402
from dev_files import GSC_PLUS_DEV  # noqa: E402

RESULT = Path(__file__).resolve().parent / "results" / "coding_confidence.json"
MARGINS = tuple(round(0.01 * i, 2) for i in range(0, 21))  # 0 to 0.2
RULE = "highest Youden J for catching wrong first concepts (errors flagged - right ones flagged), ties -> fewer flagged"


def figures(correct: np.ndarray, flagged: np.ndarray) -> dict:
    """What flagging ``flagged`` gives on terms whose first concept is ``correct``."""
    def share(part, whole):
        return round(float(part.sum() / whole.sum()), 3) if whole.sum() else None

    return {"flagged": int(flagged.sum()), "flag_rate": share(flagged, np.ones_like(flagged)),
            "accuracy_all": share(correct, np.ones_like(correct)),
            "accuracy_unflagged": share(correct & ~flagged, ~flagged),
            "accuracy_flagged": share(correct & flagged, flagged),
            "errors_caught": share(~correct & flagged, ~correct)}


def choose(score: np.ndarray, margin: np.ndarray, exact: np.ndarray, correct: np.ndarray) -> dict:
    """The (min_score, min_margin) pair the rule picks, with its dev figures."""
    margin = np.nan_to_num(margin, nan=np.inf)  # no second concept: never low on margin
    best = None
    for min_score in sorted({-np.inf, *np.round(score[~exact], 3)}):
        for min_margin in MARGINS:
            flagged = ~exact & ((score < min_score) | (margin < min_margin))
            caught = (flagged & ~correct).sum() / max((~correct).sum(), 1)
            false = (flagged & correct).sum() / max(correct.sum(), 1)
            key = (round(caught - false, 9), -int(flagged.sum()))
            if best is None or key > best[0]:
                best = (key, float(min_score), min_margin, flagged)
    (j, _), min_score, min_margin, flagged = best
    return {"min_score": min_score if np.isfinite(min_score) else None, "min_margin": min_margin,
            "youden_j": round(j, 3), **figures(correct, flagged)}


def run(models: list[str], gold_path: Path) -> list[dict]:
    """One row per model and ranking: the chosen thresholds and their figures on the dev file."""
    gold = load_gold(gold_path)
    ontology = EXAMPLE_LEVEL.ontology()
    view = EXAMPLE_LEVEL.load(ontology)
    check_gold_ids(gold, view)
    truth = dict(zip(gold.mentions, gold.concept_ids))
    rows = []
    for model in models:
        index = candidate_index(view, model)
        for ranking in (Ranking("dense"), DEFAULT_RANKING):
            frame = code_term_list(gold.mentions, view, ontology, [(model, index)], k=2, ranking=ranking)
            correct = np.array([truth[t] == c for t, c in zip(frame["term"], frame["code_a"])])
            exact = (frame["match"] == EXACT).to_numpy()
            chosen = choose(frame["score_a"].to_numpy(float), frame["margin_a"].to_numpy(float), exact, correct)
            rows.append({"model": model, "label": index.space.model_id, "ranking": ranking.label,
                         "terms": len(frame), "exact": int(exact.sum()), **chosen})
            print(f"{model:<12} {ranking.label:<12} {json.dumps(chosen)}", file=sys.stderr)
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", nargs="+", default=["med-minilm", "minilm", "char-tfidf"])
    parser.add_argument("--gold", default=str(GSC_PLUS_DEV),
                        help="gold file (mention, concept id); the GSC+ dev file by default (never shipped)")
    args = parser.parse_args(argv)
    rows = run(args.models, Path(args.gold))
    RESULT.write_text(json.dumps({"gold": Path(args.gold).name, "level": EXAMPLE_LEVEL.label, "rule": RULE,
                                  "margins": list(MARGINS), "rows": rows}, indent=1) + "\n")
    print(f"written to {RESULT}", file=sys.stderr)


if __name__ == "__main__":
    main()
