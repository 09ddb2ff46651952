"""``python -m trainer train``: train one configuration into a run directory.

Every :class:`~trainer.config.TrainConfig` field is an option (``--batch-size`` for
``batch_size``), so a job's config dict turns into a command line field by field.
Progress goes to stderr (and, with ``--progress-file``, as JSON lines appended and flushed
as training goes); one JSON summary goes to stdout. Exit codes: 0 done, 2 bad input
(refused before any training), 130 cancelled by SIGTERM/SIGINT (nothing left at ``--out``).
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import dataclasses
import json
import signal
import sys
import time
import typing
from pathlib import Path

from bioviz.errors import BiovizError
from trainer.config import TrainConfig

EXIT_CANCELLED = 130
_NONE_WORDS = ("none", "all", "null")
_EXPLICIT_NONE = "__none__"  # ``--shots all``: differs from an option left out (its default)


def _optional(kind, none_word: str | None = None):
    """Parse ``kind``, or None from a none word (plus the field's own word for None, e.g. ``auto``)."""
    words = (*_NONE_WORDS, none_word) if none_word else _NONE_WORDS

    def parse(text: str):
        return _EXPLICIT_NONE if text.strip().lower() in words else kind(text)

    parse.__name__ = kind.__name__
    return parse


def _mapping(text: str) -> dict:
    """A dict option given as JSON (or a Python literal, as ``str(dict)`` prints it)."""
    try:
        value = json.loads(text)
    except ValueError:
        try:
            value = ast.literal_eval(text)
        except (ValueError, SyntaxError):
            raise argparse.ArgumentTypeError(f"expected a JSON object, got {text!r}") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"expected a JSON object, got {text!r}")
    return value


def _field_help() -> dict[str, str]:
    from trainer.job_options import field_help

    try:
        return field_help()
    except Exception:  # noqa: BLE001 - help text is a nicety, never a reason to fail
        return {}


def add_config_options(parser: argparse.ArgumentParser) -> None:
    """One option per TrainConfig field, typed from its annotation, default None (= config default)."""
    hints = typing.get_type_hints(TrainConfig)
    helps = _field_help()
    for f in dataclasses.fields(TrainConfig):
        flag = "--" + f.name.replace("_", "-")
        hint = hints[f.name]
        text = helps.get(f.name, "")
        if f.name == "source":
            parser.add_argument(flag, required=True, help=text)
        elif hint is bool:
            parser.add_argument(flag, action="store_true", default=None, help=text)
        elif hint is dict:
            parser.add_argument(flag, type=_mapping, default=None, help=text)
        else:
            args = typing.get_args(hint)
            base = next((a for a in args if a is not type(None)), hint)
            kind = _optional(base, f.metadata.get("none")) if type(None) in args else base
            parser.add_argument(flag, type=kind, default=None, metavar=f.name.upper(), help=text)


def register(subparsers) -> None:
    """Add the ``train`` sub-command."""
    parser = subparsers.add_parser("train", help="train one encoder into a run directory",
                                   description=__doc__.split("\n\n")[0])
    add_config_options(parser)
    parser.add_argument("--out", required=True, help="run directory to create (must not exist or be empty)")
    parser.add_argument("--json", action="store_true", help="print one JSON summary on stdout")
    parser.add_argument("--progress-file", help="append JSON-lines progress events to this file")
    parser.set_defaults(handler=handle)


def config_from_args(args: argparse.Namespace) -> TrainConfig:
    """A TrainConfig from the parsed options (options left out keep the config defaults)."""
    values = {f.name: getattr(args, f.name) for f in dataclasses.fields(TrainConfig)
              if getattr(args, f.name, None) is not None}
    values = {k: (None if v == _EXPLICIT_NONE else v) for k, v in values.items()}
    return TrainConfig(**values)


class ProgressWriter:
    """Callback writing events to stderr and, optionally, appending them to a JSON-lines file."""

    def __init__(self, path: str | None):
        self.path = Path(path) if path else None
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)

    def __call__(self, event: dict) -> None:
        if self.path is not None:
            with open(self.path, "a", encoding="utf-8") as handle:
                handle.write(json.dumps({**event, "time": time.time()}, default=str) + "\n")
                handle.flush()
        kind = event.get("event")
        if kind == "start":
            sys.stderr.write(f"training {event.get('encoder')} on {event.get('train_names')} names, "
                             f"up to {event.get('max_epochs')} epochs on {event.get('device')}\n")
        elif kind == "epoch":
            losses = " ".join(f"{k}={v:.4f}" for k, v in event["losses"].items() if v is not None)
            metric = event.get("val_metric")
            metric_text = f"{metric:.4f}" if isinstance(metric, float) else str(metric)
            sys.stderr.write(f"epoch {event['epoch']}/{event['max_epochs']} {losses} "
                             f"val_{event['val_name']}={metric_text} eta={event['eta_s']:.0f}s\n")
        elif kind == "base_weight":
            sys.stderr.write(f"choosing the base weight: {event['done']}/{event['total']} weights scored\n")
        elif kind == "embedding":
            eta = event.get("eta_s")
            sys.stderr.write(f"embedding {event['done']:,}/{event['total']:,} names"
                             + (f" eta={eta:.0f}s" if eta is not None else "") + "\n")
        elif kind == "error":
            sys.stderr.write(f"error: {event.get('message')}\n")
        sys.stderr.flush()


def handle(args: argparse.Namespace) -> int:
    """Validate, then train; returns the exit code."""
    from trainer.config import validate
    from trainer.data import check_models
    from trainer.events import CancelFlag, Cancelled
    from trainer.runs import check_out_dir, train_run

    writer = ProgressWriter(args.progress_file)
    try:
        config = validate(config_from_args(args))
        check_models(config)
        check_out_dir(args.out)
    except BiovizError as error:
        writer({"event": "error", "message": str(error)})
        return 2
    cancel = CancelFlag()
    previous = {sig: signal.signal(sig, lambda *_: cancel.set()) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        # Libraries that print (progress bars, trainer logs) must not break the one-JSON stdout.
        with contextlib.redirect_stdout(sys.stderr):
            summary = train_run(config, args.out, callbacks=[writer], cancel=cancel, validated=True)
    except Cancelled:
        writer({"event": "error", "message": "cancelled", "cancelled": True})
        return EXIT_CANCELLED
    except BiovizError as error:
        writer({"event": "error", "message": str(error)})
        return 2
    except Exception as error:  # a bug: record it for the job page, keep the traceback
        writer({"event": "error", "message": f"{type(error).__name__}: {error}"})
        raise
    finally:
        # After a cancel, keep swallowing signals until the process exits: the job runner
        # forwards its own SIGTERM, which may land after the first one was handled, and
        # the default action would turn a clean exit 130 into death by SIGTERM.
        if not cancel.is_set():
            for sig, handler in previous.items():
                signal.signal(sig, handler)
    if args.json:
        sys.stdout.write(json.dumps(summary, default=str) + "\n")
    else:
        for key, value in summary.items():
            sys.stdout.write(f"{key}: {value}\n")
    return 0
