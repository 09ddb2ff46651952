"""The bundled biomedical encoder ``med-minilm``: its exclusions, its shipping, its scores.

``exclusions``
    writes ``recipes/med-minilm-excluded.txt``: every name the recipe keeps out of its pairs
    (the validation and test names of ICD-10 chapters and HPO level 1 under the default split
    and under 10 test names per class, every name of the ICD-10-CM leaf concepts the
    leaf-to-parent protocol queries, and the GSC+ dev mentions), so that the evaluations that
    chose and report the model are held out of its training.
``scores [--models M ...]``
    MayoSRS/UMNSRS (reported only), class retrieval, leaf-to-parent and CPU encoding speed,
    the models side by side in one run (``benchmarks/results/med_minilm_scores.json``).
``ship RUN [--lineage DIR ...] [--version N] [--recipe FILE]``
    copies a finished pretraining (``python -m trainer pretrain @recipes/med-minilm.args --out RUN``)
    into ``assets/models/med-minilm`` with float16 weights; with ``--lineage`` the card records
    every step that made it (``recipes/med-minilm-2.sh``).

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
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run from anywhere, without installing
sys.path.insert(0, str(ROOT / "benchmarks"))  # the shared evaluation problems of pretrain_recipes.py
from dev_files import DEV_DIR, GSC_PLUS_DEV  # noqa: E402 - the development files, where they are

EXCLUDED = ROOT / "recipes" / "med-minilm-excluded.txt"
TARGET = ROOT / "assets" / "models" / "med-minilm"
GOLD = GSC_PLUS_DEV  # a development file: read where it is, never shipped
LEAF_QUERIES = 2000  # as benchmarks/pretrain_recipes.py and the evaluation protocol


def _development_texts() -> set[str]:
    """Every text of the three development files, normalised (read where they are, never copied here)."""
    from bioviz.ontology.model import normalise_name

    texts = set()
    for name, columns in (("ehr_relb_dev", ("term1", "term2")), ("hpo_coding_dev", ("mention",)),
                          ("gsc_plus_dev", ("mention",))):
        with (DEV_DIR / f"{name}.tsv").open(encoding="utf-8") as handle:
            texts |= {normalise_name(row[c]) for row in csv.DictReader(handle, delimiter="\t") for c in columns
                      if row[c].strip()}
    return texts


def exclusions() -> int:
    """Write the held-out names; returns how many.

    A name that is also a development file's text (all of GSC+ dev's mentions, which version 1
    kept out of its pairs, and a few ontology names that equal one) is written as the hash of its
    normalised form (``sha256:...``, :func:`trainer.pretrain.leakage.name_hash`): kept out of
    training all the same, without shipping development data.
    """
    from pretrain_recipes import evaluation_problems

    from bioviz.ontology.model import normalise_name
    from trainer.pretrain.leakage import name_hash

    _, held, query_names = evaluation_problems(LEAF_QUERIES)
    names = set().union(*(h.names for h in held)) | set(query_names)
    with GOLD.open(encoding="utf-8") as handle:
        names |= {row["mention"] for row in csv.DictReader(handle, delimiter="\t")}
    names = {n.strip() for n in names if n.strip()}
    development = _development_texts()
    plain = sorted(n for n in names if normalise_name(n) not in development)
    hashed = sorted({name_hash(normalise_name(n)) for n in names if normalise_name(n) in development})
    EXCLUDED.parent.mkdir(parents=True, exist_ok=True)
    EXCLUDED.write_text("\n".join(plain + hashed) + "\n", encoding="utf-8")
    return len(plain) + len(hashed)


def speed(models, names: list[str], rounds: int = 3) -> dict:
    """Names per second of each model on this CPU, measured alternately in one process (no cache)."""
    from bioviz.models.encoders import load_sentence_transformer

    loaded = {m: load_sentence_transformer(m, device="cpu") for m in models}
    for model in loaded.values():  # warm-up: the first batch pays for lazy initialisation
        model.encode(names[:64], batch_size=64)
    seconds = {m: [] for m in models}
    for _ in range(rounds):
        for m, model in loaded.items():
            started = time.perf_counter()
            model.encode(names, batch_size=64, normalize_embeddings=True)
            seconds[m].append(time.perf_counter() - started)
    return {m: round(len(names) / float(np.median(s)), 1) for m, s in seconds.items()}


def scores(models, out: Path) -> dict:
    """Relatedness (reported only), class retrieval, leaf-to-parent and CPU speed of ``models``, side by side."""
    from bioviz.models.encoders import load_sentence_transformer
    from bioviz.ontology.level_spec import LevelSpec
    from pretrain_recipes import evaluation_problems, score

    problems, _, _ = evaluation_problems(LEAF_QUERIES)
    rows = {m: score(load_sentence_transformer(m, device="cpu"), problems) for m in models}
    names = LevelSpec("hpo", root="HP:0000118", depth=1).load().names[:2000]
    result = {"scores": rows, "names_per_second": speed(models, names),
              "speed_names": "the first 2,000 names of HPO level 1, batch 64, median of 3 alternating rounds"}
    out.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    return result


def _lineage_step(directory: Path) -> dict:
    """What one ingredient of the shipped model was: a pretraining's settings or a merge's record."""
    from bioviz.models.model_files import directory_fingerprint

    step = {"name": directory.name, "fingerprint": directory_fingerprint(directory)}
    for file, key in (("merge.json", "merge"), ("pretrain.json", "pretrain")):
        if (directory / file).is_file():
            record = json.loads((directory / file).read_text(encoding="utf-8"))
            step[key] = record if key == "merge" else {k: record[k] for k in ("base", "config", "pairs", "seconds")
                                                          if k in record}
            break
    return step


def ship(run: Path, lineage: list[Path] | None = None, *, version: int = 1, recipe: str | None = None) -> Path:
    """``run``'s model with float16 weights as the bundled ``med-minilm``.

    With ``lineage`` (the directories the model was made from, oldest first: pretrainings and
    merges), ``pretrain.json`` gains ``version``, ``recipe`` and ``lineage`` (each step's
    settings and fingerprint), and ``pretrain-terms.json`` holds every text any step trained on
    (the Evaluation page's overlap mark must see them all).
    """
    from safetensors.torch import load_file, save_file

    keep = ("modules.json", "config.json", "config_sentence_transformers.json", "sentence_bert_config.json",
            "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.txt", "1_Pooling",
            "2_Normalize", "pretrain.json", "pretrain-terms.json")
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
    if lineage:
        card = json.loads((TARGET / "pretrain.json").read_text(encoding="utf-8"))
        card.update({"version": version, "recipe": recipe, "lineage": [_lineage_step(d) for d in [*lineage, run]]})
        # The exclusion file the steps read held development texts: it is never shipped, the recipe rebuilds it.
        card["config"]["exclude_names"] = "recipes/med-minilm-excluded.txt + the development files' texts"
        text = json.dumps(card, indent=1).replace(str(run.parent) + "/", "")  # the work folder says nothing
        (TARGET / "pretrain.json").write_text(text + "\n", encoding="utf-8")
        hashes, texts = set(), 0
        for directory in [*lineage, run]:
            terms = directory / "pretrain-terms.json"
            if terms.is_file():
                record = json.loads(terms.read_text(encoding="utf-8"))
                hashes |= set(record["hashes"])
                texts += record["texts"]
        first = json.loads((run / "pretrain-terms.json").read_text(encoding="utf-8"))
        (TARGET / "pretrain-terms.json").write_text(json.dumps(
            {"hash": first["hash"], "texts": len(hashes), "hashes": sorted(hashes)}), encoding="utf-8")
    return TARGET


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("exclusions")
    s = sub.add_parser("ship")
    s.add_argument("run", type=Path)
    s.add_argument("--lineage", type=Path, nargs="*", default=[], help="the ingredients, oldest first")
    s.add_argument("--version", type=int, default=1)
    s.add_argument("--recipe", help="the recipe that makes it (recorded in pretrain.json)")
    c = sub.add_parser("scores")
    c.add_argument("--models", nargs="+", default=["minilm", "med-minilm"])
    c.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "med_minilm_scores.json")
    args = parser.parse_args()
    if args.command == "exclusions":
        print(json.dumps({"excluded_names": exclusions(), "file": str(EXCLUDED.relative_to(ROOT))}))
    elif args.command == "ship":
        print(ship(args.run, args.lineage, version=args.version, recipe=args.recipe))
    else:
        print(json.dumps(scores(args.models, args.out), indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
