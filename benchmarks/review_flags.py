"""Review flags that mean something (issue 40): precision and recall of "first concept wrong", thresholds chosen here.

Code terms flags a term's first concept for review (:mod:`bioviz.search.coding_confidence`): by its
rule when the clinical vocabulary placed it (:data:`~bioviz.search.coding_confidence.RULE_REVIEW`), else
when the model's score or margin is low. This script codes, under the defaults (``python -m bioviz
code`` as it runs: med-minilm, dense, expansion and the clinical vocabulary), every query of:

- the everyday development set (``benchmarks/everyday_dev.py``): WHO ICD-10 with each query's own
  phrasing left out of the vocabulary ("unlisted phrasing") and with its category held out
  ("held-out concept"), and HPO with the phrasing unlisted;
- the coding development files ``hpo_coding_dev.tsv`` and ``gsc_plus_dev.tsv`` (read where they are,
  never copied here), on HPO synonym sets under HP:0000118, with the whole vocabulary.

A flag is a prediction that the first concept is wrong: precision = wrong among the flagged,
recall = flagged among the wrong. The thresholds for answers the model placed are chosen on the
pooled sets by the highest Youden J (recall − share of right answers flagged, as
``benchmarks/coding_confidence.py`` chose them on GSC+ alone), ties to fewer flags; a vocabulary rule whose answers
are right at least 80% of the time on the pooled sets is never flagged, the others are judged by the
thresholds too (a rule with fewer than 20 answers is judged as the vocabulary rule: a listed
abbreviation is a dictionary hit too), and an ambiguous abbreviation is always flagged. Rows go to ``benchmarks/results/review_flags.json``; the page states its figures.

Usage::

    BIOVIZ_HOME=.bioviz python benchmarks/review_flags.py [--n-boot 1000]
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from anywhere, without installing
sys.path.insert(0, str(Path(__file__).resolve().parent))  # dev_files, everyday_dev

from bioviz.evaluation.metrics import bootstrap_mean_ci  # noqa: E402
from bioviz.evaluation.normalisation import EXAMPLE_LEVEL, load_gold  # noqa: E402
from bioviz.models.model_spec import DEFAULT_MODEL, ModelSpec  # noqa: E402
from bioviz.search.clinical_text import term_key  # noqa: E402
from bioviz.search.coding_confidence import RULE_REVIEW  # noqa: E402
from bioviz.search.hybrid import DEFAULT_RANKING  # noqa: E402
from bioviz.search.lexicon import DEFAULT_EXPANSION  # noqa: E402
from bioviz.search.neighbours import candidate_index  # noqa: E402
from bioviz.search.term_coding import code_term_list  # noqa: E402
from bioviz.search.vocabulary import ClinicalVocabulary, bundled_terms  # noqa: E402
from dev_files import GSC_PLUS_DEV, HPO_CODING_DEV  # noqa: E402
from everyday_dev import HPO_LEVEL, SEED, WHO_LEVEL, hpo_set, who_set  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"
SCORES = np.round(np.arange(0.50, 0.951, 0.01), 3)
MARGINS = (0.0, 0.01, 0.02, 0.03, 0.04, 0.05, 0.06, 0.08, 0.1)
TRUSTED_RULE = 0.8  # a rule right this often on the pooled sets is not flagged
MIN_JUDGED = 20  # a rule with fewer answers on the pooled sets is judged as the vocabulary rule


def coded(rows: list[dict], level, ontology, model: ModelSpec, vocabulary, by_category: bool, name: str) -> list[dict]:
    """Each query's first concept under the defaults: its rule, score, margin and whether it is right."""
    view = level.load(ontology)
    index = candidate_index(view, model)
    frame = code_term_list([r["query"] for r in rows], view, ontology, [(model, index)], k=5,
                           ranking=DEFAULT_RANKING, expansion=DEFAULT_EXPANSION, vocabulary=vocabulary)
    out = []
    for row, (_, found) in zip(rows, frame.iterrows()):
        code = found["code_a"]
        right = (code[:3] if by_category else code) in row["gold"]
        out.append({"set": name, "match": found["match"], "score": float(found["score_a"]),
                    "margin": float(found["margin_a"]) if found["margin_a"] == found["margin_a"] else float("nan"),
                    "right": bool(right)})
    return out


def flags(items: list[dict], min_score: float, min_margin: float, policy: dict) -> np.ndarray:
    """Which items a threshold pair and rule policy flag (exact matches never)."""
    out = []
    for item in items:
        fixed = policy.get(item["match"])
        if item["match"] == "exact":
            out.append(False)
        elif fixed is not None:
            out.append(fixed)
        else:
            out.append(item["score"] < min_score or (item["margin"] == item["margin"] and item["margin"] < min_margin))
    return np.asarray(out)


def figures(items: list[dict], flagged: np.ndarray, n_boot: int) -> dict:
    wrong = np.asarray([not i["right"] for i in items])
    precision = wrong[flagged].astype(float)
    recall = flagged[wrong].astype(float)
    return {"items": len(items), "wrong": int(wrong.sum()), "flagged": int(flagged.sum()),
            "precision": round(float(precision.mean()), 3) if len(precision) else None,
            "precision_ci": [round(v, 3) for v in bootstrap_mean_ci(precision, n_boot)],
            "recall": round(float(recall.mean()), 3) if len(recall) else None,
            "recall_ci": [round(v, 3) for v in bootstrap_mean_ci(recall, n_boot)],
            "accuracy_unflagged": round(float((~wrong[~flagged]).mean()), 3) if (~flagged).any() else None}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default=DEFAULT_MODEL)
    parser.add_argument("--n", type=int, default=300)
    parser.add_argument("--n-boot", type=int, default=1000)
    args = parser.parse_args()
    model = ModelSpec.parse(args.model)
    terms = bundled_terms()
    items: list[dict] = []
    who_ontology = WHO_LEVEL.ontology()
    who_rows, who_held = who_set(who_ontology, terms, args.n, random.Random(SEED))
    keys = frozenset(term_key(r["query"]) for r in who_rows)
    items += coded(who_rows, WHO_LEVEL, who_ontology, model,
                   ClinicalVocabulary.for_ontology(who_ontology, terms, exclude_keys=keys), True, "WHO, unlisted phrasing")
    items += coded(who_rows, WHO_LEVEL, who_ontology, model,
                   ClinicalVocabulary.for_ontology(who_ontology, terms, exclude=who_held), True, "WHO, held-out concept")
    hpo_rows, _, stripped = hpo_set(HPO_LEVEL.ontology(), terms, args.n, random.Random(SEED))
    keys = frozenset(term_key(r["query"]) for r in hpo_rows)
    items += coded(hpo_rows, HPO_LEVEL, stripped, model,
                   ClinicalVocabulary.for_ontology(stripped, terms, exclude_keys=keys), False, "HPO, unlisted phrasing")
    example = EXAMPLE_LEVEL.ontology()
    vocabulary = ClinicalVocabulary.for_ontology(example, terms)
    for path in (HPO_CODING_DEV, GSC_PLUS_DEV):
        if not path.is_file():
            print(f"skipped {path}: not here", file=sys.stderr)
            continue
        gold = load_gold(path)
        grouped: dict[str, list[str]] = {}
        for mention, concept_id in zip(gold.mentions, gold.concept_ids):  # a mention with several ids: any is right
            grouped.setdefault(mention, []).append(concept_id)
        rows = [{"query": m, "gold": ids} for m, ids in grouped.items()]
        items += coded(rows, EXAMPLE_LEVEL, example, model, vocabulary, False, path.stem)
    rules = sorted({i["match"] for i in items} - {"exact", "nearest"})
    rule_accuracy = {r: round(float(np.mean([i["right"] for i in items if i["match"] == r])), 3) for r in rules}
    rule_counts = {r: sum(i["match"] == r for i in items) for r in rules}
    best = None
    for min_score in SCORES:
        for min_margin in MARGINS:
            # a rule whose answers are right at least four times in five is never flagged (a dictionary hit: on
            # listed terms it is right 99%), the others are judged by the thresholds as dense answers; an
            # ambiguous abbreviation always is flagged (a coder picks a sense)
            policy = {r: (False if rule_accuracy[r] >= TRUSTED_RULE else None) for r in rules}
            for rule in rules:  # too few answers to judge: a listed abbreviation is a dictionary hit as "vocabulary" is
                if rule_counts[rule] < MIN_JUDGED and rule != "similar term":
                    policy[rule] = policy.get("vocabulary")
            policy["ambiguous abbreviation"] = True
            flagged = flags(items, float(min_score), min_margin, policy)
            wrong = np.asarray([not i["right"] for i in items])
            j = flagged[wrong].mean() - flagged[~wrong].mean()
            key = (round(float(j), 4), -int(flagged.sum()))
            if best is None or key > best[0]:
                best = (key, float(min_score), min_margin, policy)
    (_, min_score, min_margin, policy) = best
    chosen = flags(items, min_score, min_margin, policy)
    current = flags(items, 0.794, 0.02, dict(RULE_REVIEW))
    sets = sorted({i["set"] for i in items})
    result = {
        "model": args.model, "ranking": DEFAULT_RANKING.label,
        "rule": "highest Youden J (recall of wrong first concepts - share of right ones flagged) over the pooled sets, "
                "ties -> fewer flagged; a vocabulary rule right at least 80% of the time on the pooled sets is never "
                "flagged, the others by the thresholds; ambiguous abbreviations always are",
        "min_score": min_score, "min_margin": min_margin,
        "rule_review": {r: policy.get(r) for r in rules}, "rule_accuracy": rule_accuracy, "rule_answers": rule_counts,
        "chosen": {"pooled": figures(items, chosen, args.n_boot),
                   **{s: figures([i for i in items if i["set"] == s], chosen[[i["set"] == s for i in items]],
                                 args.n_boot) for s in sets}},
        "previous_thresholds_0.794_0.02": {"pooled": figures(items, current, args.n_boot),
                                           **{s: figures([i for i in items if i["set"] == s],
                                                         current[[i["set"] == s for i in items]], args.n_boot)
                                              for s in sets}},
    }
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / "review_flags.json"
    out.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    print(json.dumps(result, indent=1))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
