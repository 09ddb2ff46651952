"""``python -m trainer pretrain``: pretrain a base model on whole ontologies (issue 17).

Pairs of each ``--objectives`` (synonyms, definitions, hierarchy) come from every
``--sources`` entry; ``--exclude-level SOURCE:ROOT:DEPTH`` keeps that level's validation,
test and zero-shot names (under the split of ``--split-seed``, ``--shots``, ...) out of them.
The output is a sentence-transformers directory (a MODEL everywhere in bioviz) plus
``pretrain.json``. Progress goes to stderr; ``--json`` prints one JSON summary on stdout.
Exit codes: 0 done, 2 bad input (one line, nothing trained), 130 interrupted (a checkpoint
is kept: run again with ``--out DIR --resume``).
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from bioviz.errors import BiovizError
from bioviz.output_paths import check_output_dir, check_output_file
from trainer.cli_common import add_json_option, print_summary, refuse, run_cancellable
from trainer.options import add_arguments, values_from_args
from trainer.pretrain.config import NO_SOURCE, OPTIONS, PretrainConfig, validate
from trainer.pretrain.pairs import OBJECTIVES
from trainer.pretrain.pairs_file import save_pairset

PRINT_EVERY_S = 5.0  # step progress on stderr at most this often


def register(subparsers) -> None:
    """Add the ``pretrain`` sub-command: one flag per :class:`PretrainConfig` field, and the run's own."""
    p = subparsers.add_parser("pretrain", help="pretrain a base model on ontology pairs (synonyms, definitions, "
                                               "hierarchy)", description=__doc__.split("\n\n")[0])
    add_arguments(p, OPTIONS.values(), suppress=False)
    p.add_argument("--out", help="output directory (new or empty; with --resume, the interrupted run)")
    p.add_argument("--save-pairs", metavar="FILE",
                   help="build the pairs (sources, objectives, exclusions, sampling), write them to FILE and stop")
    p.add_argument("--resume", action="store_true", help="continue the interrupted run in --out (its own settings)")
    add_json_option(p)
    p.set_defaults(handler=handle)


def config_from_args(args: argparse.Namespace) -> PretrainConfig:
    """The validated config of the options (with ``--resume``, the one saved in ``--out``).

    Raises
    ------
    BiovizError
    """
    if args.resume:
        return validate(PretrainConfig.read(args.out))
    if args.pairs_file and args.save_pairs:
        raise BiovizError("give --pairs (train on a pair file) or --save-pairs (write one), not both")
    if not args.pairs_file and not args.sources:
        raise BiovizError(NO_SOURCE)
    if not args.pairs_file and not args.objectives:
        raise BiovizError(f"no objective: give --objectives (any of {', '.join(OBJECTIVES)})")
    return validate(PretrainConfig(**values_from_args(args, OPTIONS.values())))


class ProgressPrinter:
    """Writes pretraining events to stderr, step events at most every :data:`PRINT_EVERY_S` seconds."""

    def __init__(self) -> None:
        self.last = 0.0

    def __call__(self, event: dict) -> None:
        kind = event.get("event")
        if kind == "pairs":
            sys.stderr.write(f"pairs: {event['train']:,} training, {event['validation']:,} validation, "
                             f"{event['excluded']:,} excluded ({event['objectives']})\n")
        elif kind == "start":
            sys.stderr.write(f"pretraining {event['base']} on {event['train_pairs']:,} pairs, "
                             f"{event['total_steps']:,} steps on {event['device']}\n")
        elif kind == "step":
            now = time.monotonic()
            if now - self.last >= PRINT_EVERY_S or event["step"] == event["total_steps"]:
                self.last = now
                loss = f" loss={event['loss']:.4f}" if event.get("loss") is not None else ""
                sys.stderr.write(f"step {event['step']}/{event['total_steps']}{loss} eta={event['eta_s']:.0f}s\n")
        elif kind == "error":
            sys.stderr.write(f"error: {event['message']}\n")
        sys.stderr.flush()


def save_pairs(config: PretrainConfig, path: str, printer) -> int:
    """Build the pairs of ``config`` and write them to ``path`` (``--save-pairs``); returns 0.

    Raises
    ------
    BiovizError
    """
    from trainer.pretrain.fit import prepare  # torch and sentence-transformers: not for --help or the checks

    started = time.perf_counter()
    pairs = prepare(config)
    printer({"event": "pairs", **pairs.counts(), "excluded": pairs.excluded.get("total", 0),
             "seconds": time.perf_counter() - started})
    settings = {k: v for k, v in config.to_dict().items()
                if k in ("sources", "objectives", "max_pairs", "validation_pairs", "seed", "exclude_levels",
                         "exclude_names", "split_seed", "shots", "test_per_class", "zero_shot_classes",
                         "hard_negatives")}
    if config.hard_negatives == "mined":  # the negatives are the base's nearest names: which base says what they are
        settings["base"] = config.base
    save_pairset(pairs, path, settings)
    sys.stdout.write(json.dumps({"pairs_file": str(path), **pairs.counts()}) + "\n")
    return 0


def handle(args: argparse.Namespace) -> int:
    """Validate, build pairs, pretrain; returns the exit code."""
    printer = ProgressPrinter()
    try:
        config = config_from_args(args)
        if args.save_pairs:
            # Checked before the pairs are built (most of a minute for the bundled ontologies).
            check_output_file(args.save_pairs, "--save-pairs")
            return save_pairs(config, args.save_pairs, printer)
        if not args.out:
            raise BiovizError("no --out: give the directory to write the pretrained model to")
        if not args.resume:
            check_output_dir(args.out, "--out")
        from trainer.pretrain.fit import check_out_dir, pretrain  # torch, sentence-transformers: a run's only

        check_out_dir(args.out, args.resume)
    except BiovizError as error:
        return refuse(printer, error)

    def work(cancel):
        return pretrain(config, args.out, callbacks=[printer], cancel=cancel, resume=args.resume)

    code, result = run_cancellable(work, printer)
    if code == 0:
        print_summary(result, args.json, keys=("pairs", "excluded", "seconds", "validation"))
    return code
