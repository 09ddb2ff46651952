"""``python -m trainer train``: train one configuration into a run directory.

``--config FILE`` reads a JSON object of :class:`~trainer.config.TrainConfig` fields (what
the job queue writes as ``jobs/<id>/config.json``); every field is also an option
(``--batch-size`` for ``batch_size``), for people at a shell. Options given on the command
line override the file's values. Progress goes to stderr (and, with ``--progress-file``, as
JSON lines appended and flushed as training goes); one JSON summary goes to stdout. Exit
codes: 0 done, 2 bad input (refused before any training), 130 cancelled by SIGTERM/SIGINT
(nothing left at ``--out``).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time
from pathlib import Path

from bioviz.errors import BiovizError
from bioviz.output_paths import check_output_file
from bioviz.paths import append_line
from trainer.cli_common import add_json_option, print_summary, refuse, run_cancellable
from trainer.config import OPTIONS, TrainConfig, read_config, validate
from trainer.data import check_models
from trainer.options import add_arguments, values_from_args

def add_config_options(parser: argparse.ArgumentParser) -> None:
    """``--config FILE`` and one option per TrainConfig field, typed from the field.

    Options left out are absent from the parsed namespace (``argparse.SUPPRESS``), so an
    explicit ``--shots all`` (None) differs from no ``--shots`` (the file's or the default).
    """
    parser.add_argument("--config", metavar="FILE",
                        help="JSON object of training options (options given here override it)")
    add_arguments(parser, OPTIONS.values(), suppress=True)


def register(subparsers) -> None:
    """Add the ``train`` sub-command."""
    parser = subparsers.add_parser("train", help="train one encoder into a run directory",
                                   description=__doc__.split("\n\n")[0])
    add_config_options(parser)
    parser.add_argument("--out", required=True, help="run directory to create (must not exist or be empty)")
    add_json_option(parser)
    parser.add_argument("--progress-file", help="append JSON-lines progress events to this file")
    parser.set_defaults(handler=handle)


def config_from_args(args: argparse.Namespace) -> TrainConfig:
    """A TrainConfig from ``--config`` and the options given (these win); the rest keep the defaults.

    Raises
    ------
    BiovizError
        Unreadable config file, unknown options in it, or no source.
    """
    values = read_config(args.config) if getattr(args, "config", None) else {}
    values.update(values_from_args(args, OPTIONS.values()))
    return TrainConfig.from_dict(values)


class ProgressWriter:
    """Callback writing events to stderr and, optionally, appending them to a JSON-lines file."""

    def __init__(self, path: str | None):
        self.path = Path(path) if path else None
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)

    def __call__(self, event: dict) -> None:
        try:
            if self.path is not None:
                append_line(self.path, json.dumps({**event, "time": time.time()}, default=str))
        finally:
            # Said on stderr even when the progress file's disk refused it (then raised): the one
            # line a full disk's `error:` event leaves for whoever ran the command.
            with contextlib.suppress(OSError):  # stderr is the job's log: on a full disk the progress file says it
                _echo(event)


def _echo(event: dict) -> None:
    """One line on stderr for an event (the job's log)."""
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
        waiting = f"waiting for {event['waiting_for']}'s encoding: " if event.get("waiting_for") else ""
        sys.stderr.write(f"{waiting}embedding {event['done']:,}/{event['total']:,} names"
                         + (f" eta={eta:.0f}s" if eta is not None else "") + "\n")
    elif kind == "error":
        sys.stderr.write(f"error: {event.get('message')}\n")
    sys.stderr.flush()


def handle(args: argparse.Namespace) -> int:
    """Validate, then train; returns the exit code."""
    from trainer.runs import check_out_dir, train_run  # torch and the loop: a run's only, not --help or `jobs list`

    if args.progress_file:
        try:
            # Before the writer, which creates the file's folder (a typo would make a new tree).
            check_output_file(args.progress_file, "--progress-file")
        except BiovizError as error:
            return refuse(ProgressWriter(None), error)
    writer = ProgressWriter(args.progress_file)
    try:
        config = validate(config_from_args(args))
        input_model = check_models(config)  # the MODEL texts parsed here: a bad one is an error event
        check_out_dir(args.out)
    except BiovizError as error:
        return refuse(writer, error)
    code, summary = run_cancellable(
        lambda cancel: train_run(config, args.out, callbacks=[writer], cancel=cancel, validated=True,
                                 input_model=input_model),
        writer, cancelled_message="cancelled")
    if code == 0:
        print_summary(summary, args.json)
    return code
