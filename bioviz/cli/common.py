"""Options shared by several sub-commands (source and level selection)."""

from __future__ import annotations

import argparse

from bioviz.ontology import LevelSpec
from bioviz.ontology.level_spec import SOURCE_OPTION_KEYS
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


def level_spec_from_args(args: argparse.Namespace) -> LevelSpec:
    """The level that ``args.source`` and the level options describe (load it with ``.load()``)."""
    options = {key: getattr(args, key, None) for key in SOURCE_OPTION_KEYS}
    return LevelSpec(args.source, root=args.root, depth=args.depth or 1, synonyms=getattr(args, "synonyms", False),
                     keep_ambiguous=args.keep_ambiguous, options=options)
