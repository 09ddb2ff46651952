"""``python -m trainer reranker``: train the granularity cross-encoder on ontology pairs (issue 31).

Term coding's misses are often one hierarchy step off: the right concept is among the top
candidates, next to the one ranked first. This command trains a small cross-encoder that
reads a term and a concept name together (:mod:`bioviz.search.cross_rerank`) on pairs built
from the ontologies alone:

* a concept's name and one of its synonyms: a match (label 1);
* the same name and the name of the concept's parent, of one of its children and of one of
  its siblings: non-matches (label 0), the three ways a coder's answer is one step off.

Names listed in ``--exclude-names`` (development mentions, benchmark terms) never appear in a
pair. The model starts from ``--base``'s transformer (a new one-logit head) and is written
as a sentence-transformers ``CrossEncoder`` directory in float16 (about 45 MB for MiniLM-L6)
with ``reranker.json`` (settings, pair counts, seconds). Exit codes: 0 done, 2 bad input.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import random
import shutil
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from bioviz.errors import BiovizError
from bioviz.models.model_spec import ModelSpec
from bioviz.ontology import load_source
from bioviz.ontology.model import Ontology, normalise_name
from bioviz.output_paths import check_output_dir
from trainer.cli_common import add_json_option
from trainer.pretrain.leakage import held_out_names
from trainer.pretrain.negatives import siblings

RECORD_FILE = "reranker.json"


@dataclass(frozen=True)
class RerankerConfig:
    """Settings of one cross-encoder training run.

    Attributes
    ----------
    sources : tuple of str
        Ontologies the pairs come from (``hpo``, ``icd10cm``, .obo files ...).
    base : str
        MODEL whose transformer starts the cross-encoder.
    max_concepts : int
        Concepts sampled per source (each gives one match and up to three non-matches).
    epochs : int
    batch_size : int
    lr : float
    seed : int
    exclude_names : str, optional
        File of names kept out of every pair.
    """

    sources: tuple[str, ...] = ("hpo",)
    base: str = "minilm"
    max_concepts: int = 6000
    epochs: int = 1
    batch_size: int = 32
    lr: float = 3e-5
    seed: int = 0
    exclude_names: str | None = None

    def __post_init__(self):
        if not self.sources:
            raise BiovizError("give at least one --sources entry")
        if not 1 <= self.max_concepts <= 200_000 or not 1 <= self.epochs <= 100 or not 2 <= self.batch_size <= 4096:
            raise BiovizError("--max-concepts must be 1..200000, --epochs 1..100, --batch-size 2..4096")
        if not 0 < self.lr <= 1:
            raise BiovizError("--lr must be in (0, 1]")


def labelled_pairs(ontology: Ontology, rng: random.Random, *, max_concepts: int,
                   excluded: set[str] | None = None) -> list[tuple[str, str, int]]:
    """(name, candidate name, label) rows of one ontology: synonyms match; parent, child, sibling do not.

    Parameters
    ----------
    ontology : Ontology
    rng : random.Random
    max_concepts : int
        Concepts with two names or more sampled (in id order, then shuffled: reproducible).
    excluded : set of str, optional
        Normalised names never used.
    """
    excluded = excluded or set()
    graph = ontology.graph

    def usable(names) -> list[str]:
        return [n for n in names if normalise_name(n) not in excluded]

    def a_name(concept_id: str) -> str | None:
        names = usable(ontology.concepts[concept_id].names) if concept_id in ontology.concepts else []
        return rng.choice(names) if names else None

    eligible = sorted(c.id for c in ontology.concepts.values() if len(usable(c.names)) >= 2)
    rng.shuffle(eligible)
    rows = []
    for concept_id in eligible[:max_concepts]:
        anchor, positive = rng.sample(usable(ontology.concepts[concept_id].names), 2)
        rows.append((anchor, positive, 1))
        parents = [p for p in graph.predecessors(concept_id) if p in ontology.concepts]
        children = [c for c in graph.successors(concept_id) if c in ontology.concepts]
        for group in (parents, children, siblings(ontology, concept_id)):
            if group:
                other = a_name(rng.choice(group))
                if other is not None:
                    rows.append((anchor, other, 0))
    return rows


def _half_precision(directory: Path) -> None:
    """Store the weights in float16: half the size, the same ranking (a re-ranker compares, never sums up)."""
    from safetensors.numpy import load_file, save_file

    path = directory / "model.safetensors"
    weights = load_file(str(path))
    save_file({k: v.astype("float16") if v.dtype.kind == "f" else v for k, v in weights.items()}, str(path),
              metadata={"format": "pt"})


def train_reranker(config: RerankerConfig, out: Path, report=print) -> dict:
    """Build the pairs, train the cross-encoder and write it to ``out`` (all or nothing).

    Returns
    -------
    dict
        What ``reranker.json`` records: the settings, pair counts and seconds.
    """
    from datasets import Dataset
    from sentence_transformers.cross_encoder import (CrossEncoder, CrossEncoderTrainer,
                                                     CrossEncoderTrainingArguments)
    from sentence_transformers.cross_encoder.losses import BinaryCrossEntropyLoss

    started = time.perf_counter()
    excluded = held_out_names(config.exclude_names).names if config.exclude_names else set()
    rng = random.Random(config.seed)
    rows, per_source = [], {}
    for source in config.sources:
        found = labelled_pairs(load_source(source), rng, max_concepts=config.max_concepts, excluded=excluded)
        per_source[source] = {"matches": sum(r[2] for r in found), "non_matches": sum(1 - r[2] for r in found)}
        rows += found
    rng.shuffle(rows)
    report(f"pairs: {len(rows):,} ({json.dumps(per_source)})")
    base_dir = ModelSpec.parse(config.base).files()
    model = CrossEncoder(str(base_dir), num_labels=1, max_length=64, device="cpu", local_files_only=True)
    data = Dataset.from_dict({"term": [r[0] for r in rows], "name": [r[1] for r in rows],
                              "label": [float(r[2]) for r in rows]})
    partial = out.with_name(out.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    args = CrossEncoderTrainingArguments(output_dir=str(partial / "checkpoints"), num_train_epochs=config.epochs,
                                         per_device_train_batch_size=config.batch_size, learning_rate=config.lr,
                                         warmup_steps=0.1, seed=config.seed, save_strategy="no", logging_steps=50,
                                         report_to="none", use_cpu=True, dataloader_num_workers=0)
    trained = time.perf_counter()
    CrossEncoderTrainer(model=model, args=args, train_dataset=data, loss=BinaryCrossEntropyLoss(model)).train()
    record = {"config": asdict(config), "pairs": per_source, "rows": len(rows),
              "seconds": {"total": round(time.perf_counter() - started, 1),
                          "training": round(time.perf_counter() - trained, 1)}}
    shutil.rmtree(partial / "checkpoints", ignore_errors=True)
    model.save(str(partial))
    _half_precision(partial)
    (partial / RECORD_FILE).write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    if out.exists():
        out.rmdir()  # check_output_dir allowed only an empty one
    partial.rename(out)  # all or nothing: an interrupted run leaves no half model under the given name
    return record


def register(subparsers) -> None:
    """Add the ``reranker`` sub-command."""
    p = subparsers.add_parser("reranker", help="train the granularity cross-encoder on ontology pairs",
                              description=__doc__.split("\n\n")[0])
    defaults = RerankerConfig()
    p.add_argument("--sources", nargs="+", default=list(defaults.sources), metavar="SOURCE")
    p.add_argument("--base", default=defaults.base, help="MODEL whose transformer starts the cross-encoder")
    p.add_argument("--max-concepts", type=int, default=defaults.max_concepts, help="concepts sampled per source")
    p.add_argument("--epochs", type=int, default=defaults.epochs)
    p.add_argument("--batch-size", type=int, default=defaults.batch_size)
    p.add_argument("--lr", type=float, default=defaults.lr)
    p.add_argument("--seed", type=int, default=defaults.seed)
    p.add_argument("--exclude-names", metavar="FILE", help="names (one per line) kept out of every pair")
    p.add_argument("--out", required=True, help="new or empty directory for the cross-encoder")
    add_json_option(p)
    p.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    """Validate and train; returns the exit code."""
    try:
        config = RerankerConfig(tuple(args.sources), args.base, args.max_concepts, args.epochs, args.batch_size,
                                args.lr, args.seed, args.exclude_names)
        out = check_output_dir(args.out, "--out")
        if out.exists() and (not out.is_dir() or any(out.iterdir())):
            raise BiovizError(f"--out {out}: not a new or empty directory")
        if config.exclude_names:
            held_out_names(config.exclude_names)  # a bad file is refused before minutes of work
    except BiovizError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    with contextlib.redirect_stdout(sys.stderr):  # the training loop's own log lines: stdout is the JSON summary's
        record = train_reranker(config, Path(out), report=print)
    if args.json:
        print(json.dumps(record))
    return 0
