"""What the trainer's commands share: exit codes, the one-line refusal, a cancellable run, the summary.

``python -m trainer train`` (:mod:`trainer.train_command`) and ``python -m trainer pretrain``
(:mod:`trainer.pretrain.command`) behave alike: bad input is one ``error`` event (one line on
stderr) and exit code 2, before any work; SIGTERM/SIGINT cancel the work between steps (exit
code 130); progress goes to stderr, and stdout holds only the summary (``--json``: one JSON
object), so whatever libraries print while the work runs is sent to stderr.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from typing import Callable, Sequence, TypeVar

from bioviz.errors import BiovizError
from bioviz.paths import is_write_refusal
from trainer.events import CancelFlag, Cancelled, cancel_on_signals

EXIT_BAD_INPUT = 2
EXIT_CANCELLED = 130  # 128 + SIGINT, as a shell reports an interrupted command
# The disk refused a write the work needs (full, a quota, a file-size limit, read-only): EX_TEMPFAIL of
# sysexits.h. The job runner reads it as "no space left on device" or the refusal it finds, since on a
# full disk neither the error event nor the log line that would say so can be written.
EXIT_WRITE_REFUSED = 75

Report = Callable[[dict], None]
Result = TypeVar("Result")


def add_json_option(parser: argparse.ArgumentParser) -> None:
    """``--json``: the summary as one JSON object on stdout."""
    parser.add_argument("--json", action="store_true", help="print one JSON summary on stdout")


def refuse(report: Report, error: BiovizError) -> int:
    """Report bad input as one ``error`` event; returns :data:`EXIT_BAD_INPUT`."""
    report({"event": "error", "message": str(error)})
    return EXIT_BAD_INPUT


def run_cancellable(work: Callable[[CancelFlag], Result], report: Report,
                    cancelled_message: str | None = None) -> tuple[int, Result | None]:
    """Run ``work(cancel)`` with SIGTERM/SIGINT setting ``cancel`` and stdout sent to stderr.

    Parameters
    ----------
    work : callable
        Does the command's work, checking the flag it is given between steps (raising
        :class:`~trainer.events.Cancelled` when set); returns the summary.
    report : callable
        Takes the ``error`` event of a cancel, a refusal or a bug.
    cancelled_message : str, optional
        The cancel event's message; by default the ``Cancelled`` exception's own.

    Returns
    -------
    (exit code, summary)
        ``(0, summary)`` when done; ``(130, None)`` when cancelled; ``(2, None)`` when the work
        refused its input (a :class:`~bioviz.errors.BiovizError`); ``(75, None)`` when the disk refused
        a write (:data:`EXIT_WRITE_REFUSED`: full, a quota, read-only; one ``error`` event if it still fits). Any other exception (a bug)
        is reported and raised again, traceback kept.
    """
    cancel, restore_signals = cancel_on_signals()
    try:
        # Libraries that print (progress bars, trainer logs) must not break the one-JSON stdout.
        with contextlib.redirect_stdout(sys.stderr):
            return 0, work(cancel)
    except Cancelled as why:
        report({"event": "error", "message": cancelled_message or str(why), "cancelled": True})
        return EXIT_CANCELLED, None
    except BiovizError as error:
        return refuse(report, error), None
    except OSError as error:
        if not is_write_refusal(error):
            _report_quietly(report, {"event": "error", "message": f"{type(error).__name__}: {error}"})
            raise
        where = f" ({error.filename})" if error.filename else ""
        _report_quietly(report, {"event": "error", "message": f"cannot write: {error.strerror}{where}"})
        return EXIT_WRITE_REFUSED, None
    except Exception as error:  # a bug: record it (the job page shows the last error), keep the traceback
        report({"event": "error", "message": f"{type(error).__name__}: {error}"})
        raise
    finally:
        restore_signals()  # kept after a cancel: see cancel_on_signals


def _report_quietly(report: Report, event: dict) -> None:
    """``report(event)``, where a disk that refuses writes may refuse this one too: then it is lost, not raised."""
    with contextlib.suppress(OSError):
        report(event)


def print_summary(summary: dict, as_json: bool, keys: Sequence[str] | None = None) -> None:
    """Write ``summary`` to stdout: one JSON object, or one ``key: value`` line per key (of ``keys``).

    In the lines, text is written as it is and any other value as JSON.

    Examples
    --------
    >>> print_summary({"run": "runs/a", "metrics": {"mAP": 0.5}, "seconds": 3}, as_json=False, keys=("run", "metrics"))
    run: runs/a
    metrics: {"mAP": 0.5}
    """
    if as_json:
        sys.stdout.write(json.dumps(summary, default=str) + "\n")
        return
    for key in summary if keys is None else keys:
        value = summary[key]
        sys.stdout.write(f"{key}: {value if isinstance(value, str) else json.dumps(value, default=str)}\n")
