"""Options shared by several sub-commands (source and level selection, ranking)."""

from __future__ import annotations

import argparse

from bioviz.cli import RefusedArgument
from bioviz.errors import ModelError
from bioviz.models.model_spec import ModelSpec
from bioviz.models.vectors_coverage import covered_view
from bioviz.ontology import LevelSpec
from bioviz.ontology.levels import LevelView
from bioviz.ontology.level_spec import SOURCE_OPTION_KEYS
from bioviz.ontology.umls import DEFAULT_SAB, HIERARCHIES
from bioviz.search.hybrid import DEFAULT_RANKING, HYBRID_WEIGHT, RANKING_KINDS, Ranking, ranking_of


def model_argument(text: str) -> ModelSpec:
    """``type=`` of a MODEL option (``--model``, ``--compare``, ``--base``): the MODEL parsed once.

    The command line is the machine's own user: any path is accepted (no server policy).

    Raises
    ------
    RefusedArgument
        With the one-line reason the MODEL cannot be loaded (a missing directory, a damaged run).
    """
    try:
        return ModelSpec.parse(text)
    except ModelError as error:
        raise RefusedArgument(str(error)) from None


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


def add_ranking_options(parser: argparse.ArgumentParser, repeat: bool = False) -> None:
    """``--ranking dense|hybrid`` (repeatable with ``repeat``) and ``--weight`` (the hybrid's char-tfidf weight)."""
    if repeat:
        parser.add_argument("--ranking", action="append", choices=RANKING_KINDS, default=None,
                            help="dense (cosine) or hybrid (exact match first, then cosine + weight x char-tfidf "
                                 "cosine); repeat to compare (default: both)")
    else:
        parser.add_argument("--ranking", choices=RANKING_KINDS, default=DEFAULT_RANKING.kind,
                            help="dense (cosine) or hybrid (exact or normalised match first, then cosine + weight x "
                                 f"char-tfidf cosine); default {DEFAULT_RANKING.kind}, chosen on the coding dev files")
    parser.add_argument("--weight", type=float, default=None,
                        help=f"the hybrid ranking's char-tfidf weight (default {HYBRID_WEIGHT:g}, "
                             "chosen on the GSC+ dev file)")


def rankings_from_args(args: argparse.Namespace) -> list[Ranking]:
    """The :class:`~bioviz.search.hybrid.Ranking` values ``--ranking``/``--weight`` ask for (one unless repeated)."""
    kinds = args.ranking if isinstance(args.ranking, list) else [args.ranking] if args.ranking else list(RANKING_KINDS)
    return [ranking_of(kind, args.weight) for kind in dict.fromkeys(kinds)]


def covered_level(args: argparse.Namespace, models, ontology=None) -> tuple[LevelView, list[str]]:
    """The level of ``args`` cut to the names every vectors file among ``models`` covers, and what each left out.

    Returns
    -------
    (LevelView, list of str)
        The view (as loaded when no vectors file is among the models) and one coverage line
        per vectors file (``sapbert: 11,902 of 12,456 names; 554 without a vector are left out``),
        which the commands print.
    """
    spec = level_spec_from_args(args)
    view, found = covered_view(spec.load(ontology), models)
    return view, [f"{c.label}: {c.message()}" for c in found]
