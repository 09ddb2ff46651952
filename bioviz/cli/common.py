"""Options shared by several sub-commands (source and level selection)."""

from __future__ import annotations

import argparse

from bioviz.ontology import level_view, load_source, synonym_view
from bioviz.ontology.levels import LevelView
from bioviz.ontology.umls import DEFAULT_SAB, HIERARCHIES


def add_json(parser: argparse.ArgumentParser) -> None:
    """``--json``: print one JSON object on stdout."""
    parser.add_argument("--json", action="store_true", help="print one JSON object on stdout")


def add_level_options(parser: argparse.ArgumentParser, depth_required: bool = False) -> None:
    """``--root``, ``--depth``, ``--synonyms``, ``--keep-ambiguous`` and UMLS options."""
    parser.add_argument("--root", help="root concept id (default: the source's default root)")
    parser.add_argument("--depth", type=int, required=depth_required, default=None if depth_required else 1,
                        help="levels below the root whose concepts are the classes")
    parser.add_argument("--synonyms", action="store_true",
                        help="synonym-set mode: every concept under the root is its own class")
    parser.add_argument("--keep-ambiguous", action="store_true",
                        help="keep names found under several classes (dropped by default)")
    parser.add_argument("--sab", default=None, help=f"UMLS: source vocabulary (default {DEFAULT_SAB})")
    parser.add_argument("--semantic-group", default=None,
                        help="UMLS: semantic group, DISO (disorders) or a comma list of TUIs")
    parser.add_argument("--hierarchy", choices=list(HIERARCHIES), default=None,
                        help="UMLS: IS-A edges from " + ", or ".join(f"{k} ({v})" for k, v in HIERARCHIES.items())
                        + " (default parchd)")


def source_options(args: argparse.Namespace) -> dict:
    """Loader options from the UMLS flags given (``sab``, ``semantic_group``, ``hierarchy``)."""
    options = {}
    if getattr(args, "sab", None):
        options["sab"] = args.sab
    if getattr(args, "semantic_group", None):
        options["semantic_group"] = args.semantic_group
    if getattr(args, "hierarchy", None):
        options["hierarchy"] = args.hierarchy
    return options


def view_from_args(source: str, args: argparse.Namespace) -> LevelView:
    """Load ``source`` and cut the level view the arguments describe."""
    ontology = load_source(source, **source_options(args))
    if getattr(args, "synonyms", False):
        return synonym_view(ontology, root=args.root, keep_ambiguous=args.keep_ambiguous)
    return level_view(ontology, depth=args.depth, root=args.root, keep_ambiguous=args.keep_ambiguous)
