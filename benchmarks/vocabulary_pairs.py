"""Training pairs from the clinical vocabulary (issue 40, item 3): a lay or listed form ↔ its concept's name.

So that unseen lay phrasings improve too, not only the ones a source lists, a med-minilm candidate can
be trained on what the vocabulary knows: each HPO layperson or abbreviation synonym with its concept's
preferred name, each ICD-10-CM inclusion term or includes note with its code's title. Pairs are split
by concept (a fifth of concepts to validation), and kept away from every development text:

- every term of a concept the everyday development set holds out (``benchmarks/everyday_dev.py``: the
  held-out WHO categories' ICD-10-CM codes, the held-out HPO concepts) and every everyday query itself;
- every text of the three shared development files (``../shared/benchmarks``), as
  ``recipes/candidates.sh`` keeps them out.

The file is the trainer's pair-file format (``python -m trainer pretrain --pairs FILE``,
:mod:`trainer.pretrain.pairs_file`), written outside the project (``--out``). ``--max-pairs`` bounds it
for a CPU run.

Usage::

    BIOVIZ_HOME=.bioviz python benchmarks/vocabulary_pairs.py --out WORK/vocabulary.pairs.json.gz [--max-pairs 8000]
    python -m trainer pretrain --pairs WORK/vocabulary.pairs.json.gz --base med-minilm --out WORK/c6 ...
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import json
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from anywhere, without installing
sys.path.insert(0, str(Path(__file__).resolve().parent))  # dev_files, everyday_dev

from bioviz.search.clinical_text import term_key  # noqa: E402
from bioviz.search.vocabulary import ABBREVIATION, CLINICAL, HPO, ICD10CM, LAY, bundled_terms  # noqa: E402
from dev_files import DEV_DIR  # noqa: E402
from everyday_dev import HPO_LEVEL, SEED, WHO_LEVEL, held_out, hpo_set, who_set  # noqa: E402
from trainer.pretrain.dataset import PairSet  # noqa: E402
from trainer.pretrain.pairs import Pair  # noqa: E402
from trainer.pretrain.pairs_file import save_pairset  # noqa: E402

VALIDATION_SHARE = 0.05


def development_keys() -> set[str]:
    """Keys of every text of the shared development files (never a training text)."""
    keys = set()
    for name, columns in (("ehr_relb_dev", ("term1", "term2")), ("hpo_coding_dev", ("mention",)),
                          ("gsc_plus_dev", ("mention",))):
        path = DEV_DIR / f"{name}.tsv"
        if path.is_file():
            with path.open(encoding="utf-8") as handle:
                for row in csv.DictReader(handle, delimiter="\t"):
                    keys.update(term_key(row[c]) for c in columns)
    return keys


def in_validation(system: str, concept_id: str) -> bool:
    digest = hashlib.sha256(f"validation:{system}:{concept_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64 < VALIDATION_SHARE


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, help="the pair file to write (outside the project)")
    parser.add_argument("--max-pairs", type=int, default=8000)
    args = parser.parse_args()
    terms = bundled_terms()
    rng = random.Random(SEED)
    who_rows, _ = who_set(WHO_LEVEL.ontology(), terms, 10_000, random.Random(SEED))
    hpo_rows, hpo_held, _ = hpo_set(HPO_LEVEL.ontology(), terms, 10_000, random.Random(SEED))
    banned = development_keys() | {term_key(r["query"]) for r in (*who_rows, *hpo_rows)}
    train, validation, dropped = [], [], 0
    for term in terms:
        if term.kind not in (LAY, ABBREVIATION, CLINICAL) or term.term == term.concept_name:
            continue
        held = term.concept_id in hpo_held if term.system == HPO else \
            (term.system == ICD10CM and held_out(term.concept_id[:3]))
        if held or term_key(term.term) in banned or term_key(term.concept_name) in banned:
            dropped += 1
            continue
        anchor = term.term[:-4] if term.term.endswith(" NOS") else term.term
        pair = Pair(anchor, term.concept_name, "synonyms", term.system.lower(), f"vocabulary {term.kind}",
                    (term.concept_id,), (term.concept_name,))
        (validation if in_validation(term.system, term.concept_id) else train).append(pair)
    rng.shuffle(train)
    lay_first = sorted(train, key=lambda p: p.kind not in ("vocabulary lay", "vocabulary abbreviation"))
    train = lay_first[:args.max_pairs]  # every lay and abbreviation pair first, then inclusion terms
    validation = validation[:max(200, args.max_pairs // 20)]
    pairs = PairSet(train, validation, available={"vocabulary": {"synonyms": len(lay_first)}},
                    excluded={"development": dropped})
    settings = {"built_by": "benchmarks/vocabulary_pairs.py", "max_pairs": args.max_pairs, "seed": SEED,
                "excluded": "everyday dev held-out concepts and queries; shared development files' texts"}
    path = save_pairset(pairs, args.out, settings)
    print(json.dumps({"pairs_file": str(path), "train": len(train), "validation": len(validation),
                      "dropped_for_development": dropped, **pairs.counts()}))


if __name__ == "__main__":
    main()
