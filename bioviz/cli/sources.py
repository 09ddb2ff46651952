"""``python -m bioviz sources``: list the bundled sources and the accepted paths."""

from __future__ import annotations

from bioviz.cli.common import add_json
from bioviz.ontology import list_sources


def register(subparsers) -> None:
    """Add the ``sources`` sub-command."""
    parser = subparsers.add_parser("sources", help="list ontology sources")
    add_json(parser)
    parser.set_defaults(handler=run)


def run(args) -> dict:
    """Return ``{"sources": [...]}``."""
    return {"sources": list_sources()}
