"""``python -m bioviz levels SOURCE [--root ID] --depth K --json``: level-view statistics."""

from __future__ import annotations

from bioviz.cli.common import add_json, add_level_options, level_spec_from_args
from bioviz.ontology import DEFAULT_SPLIT, make_split


def register(subparsers) -> None:
    """Add the ``levels`` sub-command."""
    parser = subparsers.add_parser("levels", help="statistics of a concept level (classes, names per class)")
    parser.add_argument("source", help="icd10, icd10cm, hpo, or a path (.obo, UMLS META dir, .tsv/.csv)")
    add_level_options(parser)
    parser.add_argument("--shots", type=int, default=None, help="also report a few-shot split with N shots")
    parser.add_argument("--seed", type=int, default=DEFAULT_SPLIT.seed, help="split seed")
    parser.add_argument("--classes", action="store_true", help="list every class with its size")
    add_json(parser)
    parser.set_defaults(handler=run)


def run(args) -> dict:
    """Statistics of the level view (and optionally its split)."""
    view = level_spec_from_args(args).load()
    result = view.stats()
    if args.shots:
        split = make_split(view, shots=args.shots, seed=args.seed)
        result["split"] = {**split.sizes(), "seed": args.seed, "shots": args.shots,
                           "short_class_ids": sorted(split.short_classes)}
    if args.classes:
        result["class_table"] = view.class_table()
    return result
