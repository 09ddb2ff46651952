"""The full pretraining recipe and its parts (each objective alone, each source alone), on a GPU.

Two halves, so that the machine that trains needs neither the ontologies nor bioviz's
ontology packages (a GPU node, or the lent machine of a development session):

``prepare DIR`` (where the sources are)
    builds every pair of ``--sources`` x ``--objectives`` once (``--max-pairs all``), with
    the evaluation levels' validation/test names and the ICD-10-CM leaf-to-parent queries
    (every name of those leaf concepts) kept out, into ``DIR/all.pairs.json.gz``; writes the
    evaluation problems (class retrieval on ICD-10 chapters and HPO level 1 under two splits,
    leaf-to-parent on ICD-10-CM) into ``DIR/problems.json.gz``; copies the base model with
    float16 weights into ``DIR/base`` (half the bytes to carry; training starts from the
    float32 upcast, and the base row is scored from the same upcast).
``run DIR OUT --recipes all synonyms ...`` (where the GPU is)
    pretrains one model per recipe on its part of the pair file (``trainer.pretrain.pairs_file``),
    one epoch, BioLORD's settings, and scores each and the base on the same problems and
    MayoSRS/UMNSRS (reported only: nothing is chosen on them); one JSON line per model in
    ``OUT/results.jsonl`` as soon as it is known; ``--keep all`` also writes that model's
    weights (float16, split into parts of at most 15 MiB) to ``OUT``.
``assemble OUT NAME DIR/base TARGET``
    joins a kept model's parts into a float32 sentence-transformers directory.
``table FILE...``
    prints the results as the markdown table of docs/pretraining.md.

Usage::

    BIOVIZ_HOME=/tmp/pr python benchmarks/pretrain_recipes.py prepare .gpu
    python benchmarks/pretrain_recipes.py run .gpu $OUT --recipes base all synonyms definitions hierarchy --keep all
    python benchmarks/pretrain_recipes.py table results.jsonl
"""

from __future__ import annotations

import argparse
import gzip
import json
import shutil
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from anywhere, without installing

BENCHMARKS = ("mayosrs", "umnsrs-sim", "umnsrs-rel")
SOURCES = ("hpo", "icd10cm", "icd10")
OBJECTIVES = ("synonyms", "definitions", "hierarchy")
# name -> (sources, objectives); empty means all of the pair file
RECIPES = {"all": ((), ()), **{o: ((), (o,)) for o in OBJECTIVES}, **{s: ((s,), ()) for s in SOURCES}}
LEVELS = {"icd10 chapters": ("icd10", None, 1), "hpo level 1": ("hpo", "HP:0000118", 1)}
SPLITS = {"default split": 1, "10 test names per class": 10}  # test names per class; shots 15, seed 0
PART_BYTES = 15 * 2**20


# --------------------------------------------------------------------------- prepare

def _problem_record(problem) -> dict:
    record = {"queries": list(problem.queries), "query_labels": problem.query_labels.tolist(),
              "references": list(problem.references), "reference_labels": problem.reference_labels.tolist(),
              "exclude_self": problem.exclude_self}
    if problem.relevance is not None:
        coo = problem.relevance.tocoo()
        record["relevance"] = {"rows": coo.row.tolist(), "cols": coo.col.tolist(), "shape": list(coo.shape)}
    if problem.reference_groups is not None:
        record["reference_groups"] = problem.reference_groups.tolist()
    return record


def evaluation_problems(leaf_queries: int = 2000):
    """The evaluation problems every candidate is scored on, what they hold out, and the leaf queries' names.

    Returns
    -------
    (problems, held, query_names)
        ``{name: RankingProblem}`` (class retrieval on ICD-10 chapters and HPO level 1 under
        both splits, ICD-10-CM leaf-to-parent), the levels' held-out names
        (:class:`trainer.pretrain.leakage.HeldOut`), and every name of the leaf concepts queried.
    """
    from bioviz.evaluation import protocols
    from bioviz.ontology.level_spec import LevelSpec
    from bioviz.ontology.splits import SplitSpec
    from trainer.pretrain.leakage import held_out

    problems, held = {}, []
    for label, (source, root, depth) in LEVELS.items():
        level = LevelSpec(source, root=root, depth=depth)
        ontology = level.ontology()
        view = level.load(ontology)
        for split_label, per_class in SPLITS.items():
            split_spec = SplitSpec(shots=15, seed=0, test_per_class=per_class)
            problems[f"{label}, {split_label}"] = protocols.ranking_problem(view, split_spec.make(view))
            held.append(held_out(level, split_spec, ontology))
    cm = LevelSpec("icd10cm", depth=1)
    cm_ontology = cm.ontology()
    leaf = protocols.leaf_to_parent_problem(cm_ontology, cm.load(cm_ontology).root, leaf_queries, 0)
    problems["icd10cm leaf-to-parent"] = leaf
    by_name = {c.name: c for c in cm_ontology.concepts.values()}
    query_names = sorted({n for q in leaf.queries for n in by_name[q].names})
    return problems, held, query_names


def prepare(directory: Path, sources, objectives, leaf_queries: int, exclude_names=()) -> None:
    """Pairs, problems and the float16 base into ``directory``.

    ``exclude_names`` are files of names kept out of every pair (the GSC+ dev mentions).
    """
    from safetensors.torch import load_file, save_file

    from bioviz.models.model_spec import ModelSpec
    from trainer.pretrain.dataset import build_pairs
    from trainer.pretrain.leakage import held_out_names
    from trainer.pretrain.pairs_file import save_pairset

    directory.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    problems, held, query_names = evaluation_problems(leaf_queries)
    problems = {name: _problem_record(p) for name, p in problems.items()}
    names_file = directory / "leaf2parent-queries.txt"
    names_file.write_text("\n".join(query_names) + "\n", encoding="utf-8")
    held.append(held_out_names(names_file))
    held.extend(held_out_names(str(f)) for f in exclude_names)
    print(f"problems and held-out names: {time.perf_counter() - started:.0f} s", flush=True)

    pairs = build_pairs(list(sources), list(objectives), max_pairs=None, seed=0, held=held, validation_pairs=500)
    settings = {"sources": list(sources), "objectives": list(objectives), "max_pairs": None, "seed": 0,
                "exclude_levels": [h.record() for h in held]}
    save_pairset(pairs, directory / "all.pairs.json.gz", settings)
    with gzip.open(directory / "problems.json.gz", "wt", encoding="utf-8") as handle:
        json.dump(problems, handle)
    print(json.dumps({**pairs.counts(), "available": pairs.available, "excluded": pairs.excluded["pairs"],
                      "seconds": round(time.perf_counter() - started)}), flush=True)

    base = directory / "base"
    shutil.rmtree(base, ignore_errors=True)
    shutil.copytree(resolve("minilm").path, base, ignore=shutil.ignore_patterns("model.safetensors", "README.md"))
    weights = load_file(str(Path(resolve("minilm").path) / "model.safetensors"))
    save_file({k: v.half().contiguous() for k, v in weights.items()}, str(base / "model.fp16.safetensors"))


# --------------------------------------------------------------------------- run

def _upcast_base(directory: Path, target: Path) -> Path:
    """The float16 base as a float32 sentence-transformers directory (transformers would keep float16)."""
    from safetensors.torch import load_file, save_file

    if (target / "model.safetensors").is_file():
        return target
    shutil.copytree(directory / "base", target, ignore=shutil.ignore_patterns("model.fp16.safetensors"),
                    dirs_exist_ok=True)
    weights = load_file(str(directory / "base" / "model.fp16.safetensors"))
    save_file({k: v.float().contiguous() for k, v in weights.items()}, str(target / "model.safetensors"))
    return target


def _load_problems(directory: Path) -> dict:
    from scipy import sparse

    from bioviz.evaluation.protocols import RankingProblem

    with gzip.open(directory / "problems.json.gz", "rt", encoding="utf-8") as handle:
        records = json.load(handle)
    problems = {}
    for name, r in records.items():
        relevance = None
        if "relevance" in r:
            rel = r["relevance"]
            relevance = sparse.csr_matrix((np.ones(len(rel["rows"]), dtype=bool), (rel["rows"], rel["cols"])),
                                          shape=tuple(rel["shape"]))
        groups = np.asarray(r["reference_groups"], dtype=np.int64) if "reference_groups" in r else None
        problems[name] = RankingProblem(tuple(r["queries"]), np.asarray(r["query_labels"]), tuple(r["references"]),
                                        np.asarray(r["reference_labels"]), r["exclude_self"], relevance, groups)
    return problems


def score(model, problems: dict) -> dict:
    """Relatedness Spearman and each problem's figure (mAP, or MRR for leaf-to-parent) of one model."""
    from bioviz.evaluation import metrics
    from bioviz.evaluation.benchmarks import load_benchmark, score_benchmark

    def encode(texts):
        return model.encode(list(texts), batch_size=256, normalize_embeddings=True, convert_to_numpy=True,
                            show_progress_bar=False).astype(np.float32)

    out = {}
    for name in BENCHMARKS:
        bench = load_benchmark(name)
        scored = score_benchmark(bench, dict(zip(bench.terms, encode(bench.terms))), n_boot=1000)
        out[name] = {"value": round(float(scored["spearman"]), 4), "ci": scored.get("ci")}
    for name, p in problems.items():
        relevance = (metrics.matrix_relevance(p.relevance) if p.relevance is not None
                     else metrics.label_relevance(p.query_labels, p.reference_labels))
        leaf = p.relevance is not None
        result = metrics.ranking_metrics(encode(p.queries), encode(p.references), relevance,
                                         exclude_self=p.exclude_self, reference_groups=p.reference_groups,
                                         with_ap=not leaf, n_boot=1000, seed=0)
        key = "mrr" if leaf else "map"
        out[name] = {"metric": key, "value": round(float(result[key]), 4), "ci": result["ci"].get(key),
                     "queries": result["queries"]}
    return out


def _write_parts(model_dir: Path, out: Path, name: str) -> list[str]:
    from safetensors.torch import load_file, save

    weights = load_file(str(model_dir / "model.safetensors"))
    data = save({k: v.half().contiguous() for k, v in weights.items()})
    parts = []
    for i in range(0, len(data), PART_BYTES):
        part = out / f"{name}.fp16.safetensors.part{i // PART_BYTES}"
        part.write_bytes(data[i:i + PART_BYTES])
        parts.append(part.name)
    return parts


def run(directory: Path, out: Path, recipes, keep, batch_size: int, epochs: int, *, lr: float = 2e-5,
        max_pairs: int | None = None, max_seq_length: int | None = None) -> None:
    """Pretrain and score each recipe (``base``: the base model alone)."""
    import torch

    from bioviz.models.encoders import load_sentence_transformer
    from trainer.pretrain.command import ProgressPrinter
    from trainer.pretrain.config import PretrainConfig, validate
    from trainer.pretrain.fit import pretrain

    out.mkdir(parents=True, exist_ok=True)
    base = _upcast_base(directory, Path("/tmp/bioviz-base"))
    problems = _load_problems(directory)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    gpu = torch.cuda.get_device_name(0) if device == "cuda" else "none"
    for recipe in recipes:
        started = time.perf_counter()
        if recipe == "base":
            row = {"recipe": "base", "device": device, "gpu": gpu,
                   "scores": score(load_sentence_transformer(str(base), device=device), problems)}
        else:
            sources, objectives = RECIPES[recipe]
            target = Path("/tmp/bioviz-pretrained") / recipe
            shutil.rmtree(target, ignore_errors=True)
            config = validate(PretrainConfig(sources=list(sources), objectives=list(objectives), base=str(base),
                                             pairs_file=str(directory / "all.pairs.json.gz"), max_pairs=max_pairs,
                                             batch_size=batch_size, epochs=epochs, lr=lr, save_steps=10**9,
                                             max_seq_length=max_seq_length,
                                             device=device))
            result = pretrain(config, target, callbacks=[ProgressPrinter()])
            row = {"recipe": recipe, "device": device, "gpu": gpu, "pairs": result["pairs"]["train"],
                   "objectives": result["pairs"]["objectives"], "sources": result["pairs"]["sources"],
                   "steps": result["steps"], "batch_size": batch_size, "epochs": epochs, "lr": lr,
                   "max_pairs": max_pairs, "max_seq_length": max_seq_length,
                   "seconds": {k: round(v, 1) for k, v in result["seconds"].items()},
                   "validation": result["validation"]}
            if recipe in keep:
                # the weights first: a call cut short while scoring still brings the model back
                row["weights"] = _write_parts(target, out, recipe)
                for name in ("pretrain.json",):
                    shutil.copy(target / name, out / f"{recipe}.{name}")
            row["scores"] = score(load_sentence_transformer(str(target), device=device), problems)
        row["wall_s"] = round(time.perf_counter() - started, 1)
        with (out / "results.jsonl").open("a", encoding="utf-8") as handle:
            handle.write(json.dumps(row) + "\n")
        print(json.dumps({k: row[k] for k in row if k != "scores"}), flush=True)
        print("  " + "  ".join(f"{k}={v['value']}" for k, v in row["scores"].items()), flush=True)


def assemble(parts_dir: Path, name: str, base_dir: Path, target: Path) -> Path:
    """A float32 sentence-transformers directory from the float16 parts that ``run --keep`` wrote."""
    from safetensors.torch import load, save_file

    parts = sorted(parts_dir.glob(f"{name}.fp16.safetensors.part*"), key=lambda p: int(p.name.rsplit("part", 1)[1]))
    weights = load(b"".join(p.read_bytes() for p in parts))
    shutil.copytree(base_dir, target, ignore=shutil.ignore_patterns("model.fp16.safetensors"), dirs_exist_ok=True)
    save_file({k: v.float().contiguous() for k, v in weights.items()}, str(target / "model.safetensors"))
    if (parts_dir / f"{name}.pretrain.json").is_file():
        shutil.copy(parts_dir / f"{name}.pretrain.json", target / "pretrain.json")
    return target


# --------------------------------------------------------------------------- table

def table(files) -> None:
    """The markdown table of every result row in ``files``."""
    rows = [json.loads(line) for f in files for line in Path(f).read_text(encoding="utf-8").splitlines() if line]
    columns = list(rows[0]["scores"])
    print("| recipe | pairs | steps | training s | val MRR | " + " | ".join(columns) + " |")
    print("|" + "---|" * (5 + len(columns)))
    for r in rows:
        val = r.get("validation", {})
        mrr = f"{val['before']['mrr']:.3f} -> {val['after']['mrr']:.3f}" if val else ""
        print(f"| {r['recipe']} | {r.get('pairs', '')} | {r.get('steps', '')} | "
              f"{r.get('seconds', {}).get('training', '')} | {mrr} | "
              + " | ".join(f"{r['scores'][c]['value']:.3f}" for c in columns) + " |")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("prepare")
    p.add_argument("directory", type=Path)
    p.add_argument("--sources", nargs="+", default=list(SOURCES))
    p.add_argument("--objectives", nargs="+", default=list(OBJECTIVES))
    p.add_argument("--leaf-queries", type=int, default=2000)
    p.add_argument("--exclude-names", nargs="*", default=[], help="files of names kept out of every pair")
    r = sub.add_parser("run")
    r.add_argument("directory", type=Path)
    r.add_argument("out", type=Path)
    r.add_argument("--recipes", nargs="+", default=["base", *RECIPES], choices=["base", *RECIPES])
    r.add_argument("--keep", nargs="*", default=[], help="recipes whose weights go to OUT")
    r.add_argument("--batch-size", type=int, default=64)
    r.add_argument("--epochs", type=int, default=1)
    r.add_argument("--lr", type=float, default=2e-5)
    r.add_argument("--max-pairs", type=int, default=None, help="a stratified sample of the pair file")
    r.add_argument("--max-seq-length", type=int, default=None)
    a = sub.add_parser("assemble")
    a.add_argument("parts_dir", type=Path)
    a.add_argument("name")
    a.add_argument("base_dir", type=Path, help="the prepared DIR/base")
    a.add_argument("target", type=Path)
    t = sub.add_parser("table")
    t.add_argument("files", nargs="+")
    args = parser.parse_args()
    if args.command == "prepare":
        prepare(args.directory, args.sources, args.objectives, args.leaf_queries, args.exclude_names)
    elif args.command == "run":
        run(args.directory, args.out, args.recipes, set(args.keep), args.batch_size, args.epochs,
            lr=args.lr, max_pairs=args.max_pairs, max_seq_length=args.max_seq_length)
    elif args.command == "assemble":
        print(assemble(args.parts_dir, args.name, args.base_dir, args.target))
    else:
        table(args.files)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
