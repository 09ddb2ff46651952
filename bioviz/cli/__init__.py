"""``python -m bioviz``: the command line of the library.

Each sub-command lives in its own module with ``register(subparsers)``; its handler takes
the parsed arguments and returns a JSON-serialisable dict (printed as one JSON object with
``--json``, as readable text otherwise). Bad input raises :class:`BiovizError`: the CLI
prints ``error: <reason>`` on one line to stderr and exits with code 2; so does a file the
machine refuses to read or write (``OSError``: a full disk, a file-size limit). Progress goes to
stderr so stdout stays machine-readable.
"""

from __future__ import annotations

import argparse
import importlib
import json
import logging
import sys

from bioviz.errors import BiovizError
from bioviz.models.backend_choice import backend_override
from bioviz.paths import check_home_writable

# Sub-command modules, in the order ``--help`` lists them.
COMMAND_MODULES = ("sources", "levels", "embed", "neighbours", "code", "evaluate", "project")
# Command name -> module, where they differ. Only the invoked command's module is imported:
# the evaluation stack (scipy.stats, ...) costs seconds that `levels` should not pay.
COMMAND_NAMES = {"eval": "evaluate"}


class RefusedArgument(Exception):
    """An option's value refused with its own one-line reason (a ``type=`` that parses, e.g. ``--model``).

    Not a ValueError, which argparse would turn into "invalid value": :func:`main` prints the
    reason as every other bad input, ``error: <reason>``, exit code 2.
    """


class _Parser(argparse.ArgumentParser):
    """argparse that exits with code 2 and one line, like every other bad input."""

    def error(self, message: str) -> None:  # noqa: D102 - argparse hook
        sys.stderr.write(f"error: {message}\n")
        raise SystemExit(2)


def _modules_for(argv: list[str] | None) -> tuple[str, ...]:
    """The one module that ``argv`` invokes, or every module (for help and errors)."""
    words = [a for a in (argv or []) if not a.startswith("-")]
    if words:
        module = COMMAND_NAMES.get(words[0], words[0])
        if module in COMMAND_MODULES:
            return (module,)
    return COMMAND_MODULES


def build_parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    """The parser, with the sub-command named in ``argv`` registered (all when none is)."""
    parser = _Parser(prog="python -m bioviz", description="Explore and train representations of biomedical names.")
    parser.add_argument("-v", "--verbose", action="store_true", help="log progress details to stderr")
    subparsers = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    for name in _modules_for(argv):
        importlib.import_module(f"bioviz.cli.{name}").register(subparsers)
    return parser


def print_result(result: dict, as_json: bool) -> None:
    """Print a handler's result: one JSON object, or ``key: value`` lines."""
    if as_json:
        sys.stdout.write(json.dumps(result, default=str) + "\n")
        return
    for key, value in result.items():
        if isinstance(value, list) and value and isinstance(value[0], dict):
            sys.stdout.write(f"{key}:\n")
            for row in value:
                sys.stdout.write("  " + "  ".join(f"{k}={v}" for k, v in row.items()) + "\n")
        else:
            sys.stdout.write(f"{key}: {value}\n")


def main(argv: list[str] | None = None) -> int:
    """Run the command line; returns the exit code."""
    argv = sys.argv[1:] if argv is None else argv
    parser = build_parser(argv)
    try:
        args = parser.parse_args(argv)
    except RefusedArgument as error:
        sys.stderr.write(f"error: {error}\n")
        return 2
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, stream=sys.stderr,
                        format="%(levelname)s %(name)s: %(message)s")
    check_home_writable()  # a read-only home: one WARNING line, then the command works from what is cached
    try:
        # --backend (the commands that encode have it): every encoder the command loads, for names
        # and queries alike, uses that backend (None: the default, bioviz.models.backend_choice)
        with backend_override(getattr(args, "backend", None)):
            result = args.handler(args)
    except BiovizError as error:
        sys.stderr.write(f"error: {error}\n")
        return 2
    except OSError as error:
        # The machine, not the code: a full disk or a file-size limit on a file that must be
        # written, a folder removed meanwhile. (Caches never get here: they skip the write.)
        logging.getLogger(__name__).info("the command failed on a file", exc_info=True)
        where = f" ({error.filename})" if error.filename else ""
        sys.stderr.write(f"error: {error.strerror or error}{where}\n")
        return 2
    if result is not None:
        print_result(result, getattr(args, "json", False))
    return 0
