"""``python -m trainer``: the trainer's command line.

Sub-commands live in modules listed in :data:`COMMAND_MODULES`; each has
``register(subparsers)`` and sets ``handler(args) -> exit code``. Bad input prints
``error: <reason>`` on one line to stderr and exits with code 2.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys

# Sub-command modules, in the order ``--help`` lists them (the job queue adds its own).
COMMAND_MODULES = ("trainer.train_command", "trainer.pretrain.command", "trainer.reranker", "trainer.jobs.cli")


class _Parser(argparse.ArgumentParser):
    """argparse that exits with code 2 and one line, like every other bad input.

    ``@FILE`` reads arguments from a file (``python -m trainer pretrain @recipes/med-minilm.args``):
    whitespace-separated, ``#`` starts a comment, so a recipe can say why each setting is what it is.
    """

    def convert_arg_line_to_args(self, arg_line: str) -> list[str]:
        return arg_line.split("#", 1)[0].split()

    def error(self, message: str) -> None:
        sys.stderr.write(f"error: {message}\n")
        raise SystemExit(2)


def build_parser() -> argparse.ArgumentParser:
    """The full parser, with every sub-command registered."""
    parser = _Parser(prog="python -m trainer", description="Train the papers' encoders on ontology levels.",
                     fromfile_prefix_chars="@")
    parser.add_argument("-v", "--verbose", action="store_true", help="log details to stderr")
    subparsers = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the command line; returns the exit code."""
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, stream=sys.stderr,
                        format="%(levelname)s %(name)s: %(message)s")
    return int(args.handler(args) or 0)
