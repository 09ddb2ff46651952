"""The bundled biomedical encoder ``med-minilm``: its exclusions, its shipping, its scores.

``exclusions``
    writes ``recipes/med-minilm-excluded.txt``: every name the recipe keeps out of its pairs
    (the validation and test names of ICD-10 chapters and HPO level 1 under the default split
    and under 10 test names per class, every name of the ICD-10-CM leaf concepts the
    leaf-to-parent protocol queries, and the GSC+ dev mentions), so that the evaluations that
    chose and report the model are held out of its training.
``ship RUN``
    copies a finished pretraining (``python -m trainer pretrain @recipes/med-minilm.args --out RUN``)
    into ``assets/models/med-minilm`` with float16 weights.

Usage::

    python benchmarks/med_minilm.py exclusions
    python -m trainer pretrain @recipes/med-minilm.args --out runs/med
    python benchmarks/med_minilm.py ship runs/med
"""

from __future__ import annotations

import argparse
import csv
import json
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run from anywhere, without installing

EXCLUDED = ROOT / "recipes" / "med-minilm-excluded.txt"
TARGET = ROOT / "assets" / "models" / "med-minilm"
GOLD = ROOT / "assets" / "gold" / "gsc_plus_dev.tsv"
LEVELS = (("icd10", None, 1), ("hpo", "HP:0000118", 1))
TEST_PER_CLASS = (1, 10)
LEAF_QUERIES = 2000  # as benchmarks/pretrain_recipes.py and the evaluation protocol


def exclusions() -> int:
    """Write the held-out names; returns how many."""
    from bioviz.evaluation import protocols
    from bioviz.ontology.level_spec import LevelSpec
    from bioviz.ontology.splits import SplitSpec
    from trainer.pretrain.leakage import held_out

    names: set[str] = set()
    for source, root, depth in LEVELS:
        level = LevelSpec(source, root=root, depth=depth)
        ontology = level.ontology()
        for per_class in TEST_PER_CLASS:
            names |= held_out(level, SplitSpec(shots=15, seed=0, test_per_class=per_class), ontology).names
    cm = LevelSpec("icd10cm", depth=1)
    cm_ontology = cm.ontology()
    leaf = protocols.leaf_to_parent_problem(cm_ontology, cm.load(cm_ontology).root, LEAF_QUERIES, 0)
    by_name = {c.name: c for c in cm_ontology.concepts.values()}
    names |= {n for q in leaf.queries for n in by_name[q].names}
    with GOLD.open(encoding="utf-8") as handle:
        names |= {row["mention"] for row in csv.DictReader(handle, delimiter="\t")}
    EXCLUDED.parent.mkdir(parents=True, exist_ok=True)
    EXCLUDED.write_text("\n".join(sorted(n.strip() for n in names if n.strip())) + "\n", encoding="utf-8")
    return len(names)


def ship(run: Path) -> Path:
    """``run``'s model with float16 weights as the bundled ``med-minilm``."""
    from safetensors.torch import load_file, save_file

    keep = ("modules.json", "config.json", "config_sentence_transformers.json", "sentence_bert_config.json",
            "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.txt", "1_Pooling",
            "2_Normalize", "pretrain.json")
    shutil.rmtree(TARGET, ignore_errors=True)
    TARGET.mkdir(parents=True)
    for name in keep:
        path = run / name
        if path.is_dir():
            shutil.copytree(path, TARGET / name)
        elif path.is_file():
            shutil.copy(path, TARGET / name)
    weights = load_file(str(run / "model.safetensors"))
    save_file({k: v.half().contiguous() for k, v in weights.items()}, str(TARGET / "model.safetensors"),
              metadata={"format": "pt"})
    return TARGET


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("exclusions")
    s = sub.add_parser("ship")
    s.add_argument("run", type=Path)
    args = parser.parse_args()
    if args.command == "exclusions":
        print(json.dumps({"excluded_names": exclusions(), "file": str(EXCLUDED.relative_to(ROOT))}))
    else:
        print(ship(args.run))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
