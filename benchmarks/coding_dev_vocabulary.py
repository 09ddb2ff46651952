"""Does the clinical vocabulary change term coding on the coding development files? Before and after, paired.

``hpo_coding_dev.tsv`` (clinical-note mentions) and ``gsc_plus_dev.tsv`` (PubMed mentions), read where
they are (``../shared/benchmarks``, never copied here), coded on HPO synonym sets under HP:0000118 as
``python -m bioviz code`` codes them under the defaults (med-minilm, dense, synonym expansion): without
the clinical vocabulary (the defaults before issue 40) and with it. Acc@1 (a mention is right when its
first concept is one of its gold ids) with 95% bootstrap intervals and the paired difference. Rows go to
``benchmarks/results/coding_dev_vocabulary.json``.

Usage::

    BIOVIZ_HOME=.bioviz python benchmarks/coding_dev_vocabulary.py [--model med-minilm] [--n-boot 1000]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from anywhere, without installing
sys.path.insert(0, str(Path(__file__).resolve().parent))  # dev_files

from bioviz.evaluation.metrics import bootstrap_mean_ci  # noqa: E402
from bioviz.evaluation.normalisation import EXAMPLE_LEVEL, load_gold  # noqa: E402
from bioviz.evaluation.paired import paired_mean_delta  # noqa: E402
from bioviz.models.model_spec import DEFAULT_MODEL, ModelSpec  # noqa: E402
from bioviz.search.hybrid import DEFAULT_RANKING  # noqa: E402
from bioviz.search.lexicon import DEFAULT_EXPANSION  # noqa: E402
from bioviz.search.neighbours import candidate_index  # noqa: E402
from bioviz.search.term_coding import code_term_list  # noqa: E402
from bioviz.search.vocabulary import vocabulary_for  # noqa: E402
from dev_files import GSC_PLUS_DEV, HPO_CODING_DEV  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default=DEFAULT_MODEL)
    parser.add_argument("--n-boot", type=int, default=1000)
    args = parser.parse_args()
    model = ModelSpec.parse(args.model)
    ontology = EXAMPLE_LEVEL.ontology()
    view = EXAMPLE_LEVEL.load(ontology)
    index = candidate_index(view, model)
    vocabulary = vocabulary_for(ontology)
    out = {"model": args.model, "level": "hpo under HP:0000118 synonym sets", "ranking": DEFAULT_RANKING.label,
           "files": {}}
    for path in (HPO_CODING_DEV, GSC_PLUS_DEV):
        gold = load_gold(path)
        wanted: dict[str, set[str]] = {}
        for mention, concept_id in zip(gold.mentions, gold.concept_ids):
            wanted.setdefault(mention, set()).add(concept_id)
        mentions = list(wanted)
        hits = {}
        for name, used in (("before", None), ("after", vocabulary)):
            frame = code_term_list(mentions, view, ontology, [(model, index)], k=5, ranking=DEFAULT_RANKING,
                                   expansion=DEFAULT_EXPANSION, vocabulary=used)
            hits[name] = np.asarray([code in wanted[m] for m, code in zip(mentions, frame["code_a"])], dtype=float)
            if name == "after":
                rules = frame["match"].value_counts().to_dict()
        delta, ci, n = paired_mean_delta(hits["before"], hits["after"], n_boot=args.n_boot)
        out["files"][path.name] = {
            "mentions": n, "rules_after": {k: int(v) for k, v in rules.items()},
            **{name: {"acc1": round(float(v.mean()), 3), "ci": [round(x, 3) for x in bootstrap_mean_ci(v, args.n_boot)]}
               for name, v in hits.items()},
            "after_minus_before": {"delta": round(float(delta), 3), "ci": [round(x, 3) for x in ci] if ci else None}}
        print(json.dumps({path.name: out["files"][path.name]}), flush=True)
    RESULTS.mkdir(exist_ok=True)
    target = RESULTS / f"coding_dev_vocabulary_{args.model}.json"
    target.write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {target}")


if __name__ == "__main__":
    main()
