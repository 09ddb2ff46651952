"""``python -m trainer jobs submit|list|status|cancel|resume|logs|delete``: the job queue from a shell.

``jobs submit`` takes the same options as ``train``, ``--config FILE`` included (minus
``--out`` and ``--progress-file``, which the queue chooses) and prints the job id; the job runs in the background and a run
directory appears under ``BIOVIZ_HOME/runs/<job id>`` when it succeeds. Every command first
reconciles the queue (reaps dead jobs, starts queued ones), so no daemon is needed.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from bioviz.errors import BiovizError

from trainer.jobs.executor import CANCEL_GRACE_S
from trainer.jobs.progress import job_row, tail
from trainer.jobs.queue import AlreadyCancelled, Worker
from trainer.jobs.store import jobs_blocked_reason
from trainer.train_command import add_config_options, config_from_args


def _print_json(value) -> None:
    sys.stdout.write(json.dumps(value, default=str) + "\n")


def _submit(args: argparse.Namespace) -> int:
    job = Worker().submit(config_from_args(args).to_dict())
    if args.json:
        _print_json(job.as_dict())
    else:
        sys.stdout.write(job.id + "\n")
    return 0


def _list(args: argparse.Namespace) -> int:
    jobs = Worker().reconcile()
    if args.active:
        jobs = [j for j in jobs if not j.finished]
    if args.json:
        _print_json({"jobs": [j.as_dict() for j in jobs]})
        return 0
    rows = [job_row(j, jobs) for j in jobs]
    if not rows:
        sys.stdout.write("no jobs\n")
        return 0
    columns = list(rows[0])
    widths = {c: max(len(c), *(len(str(r[c])) for r in rows)) for c in columns}
    sys.stdout.write("  ".join(c.upper().ljust(widths[c]) for c in columns).rstrip() + "\n")
    for row in rows:
        sys.stdout.write("  ".join(str(row[c]).ljust(widths[c]) for c in columns).rstrip() + "\n")
    return 0


def _status(args: argparse.Namespace) -> int:
    worker = Worker()
    worker.reconcile()
    job = worker.store.get(args.job_id)
    if args.json:
        _print_json(job.as_dict())
    else:
        for key, value in job_row(job, worker.store.list()).items():
            sys.stdout.write(f"{key}: {value}\n")
        if job.error:
            sys.stdout.write(f"error: {job.error}\n")
        sys.stdout.write(f"run_dir: {job.run_dir}\nlog: {job.log_path}\n")
    return 0


def _cancel(args: argparse.Namespace) -> int:
    worker = Worker()
    try:
        job, already = worker.cancel(args.job_id, grace_s=args.grace), False
    except AlreadyCancelled:
        # What was asked for holds: not an error. Said apart from "cancelled", so that of two cancels
        # at once exactly one says it cancelled the job.
        job, already = worker.store.get(args.job_id), True
    if args.json:
        _print_json({**job.as_dict(), "already_cancelled": already})
    else:
        sys.stdout.write(f"{job.id}: {'already ' if already else ''}{job.status}\n")
    return 0


def _resume(args: argparse.Namespace) -> int:
    job = Worker().resume(args.job_id)
    if args.json:
        _print_json(job.as_dict())
    else:
        sys.stdout.write(job.id + "\n")
    return 0


def _delete(args: argparse.Namespace) -> int:
    Worker().delete(args.job_id, remove_run=args.with_run)
    sys.stdout.write(f"{args.job_id}: deleted\n")
    return 0


def _logs(args: argparse.Namespace) -> int:
    worker = Worker()
    worker.reconcile()
    job = worker.store.get(args.job_id)
    text = tail(job.log_path, args.tail)
    sys.stdout.write(text + ("\n" if text else ""))
    if not args.follow:
        return 0
    # Follow: print what is appended until the job ends (reconciling, so a dead job ends too).
    with open(job.log_path, "rb") as log:
        log.seek(0, 2)
        while True:
            chunk = log.read()
            if chunk:
                sys.stdout.write(chunk.decode("utf-8", errors="replace"))
                sys.stdout.flush()
            elif worker.store.get(job.id).finished:
                return 0
            else:
                worker.reconcile()
                time.sleep(1.0)


def _guard(handler):
    """Bad input, a damaged job database or a failed write -> ``error: <reason>`` on stderr, exit code 2.

    ``OSError`` too: a full disk or a file size limit met while writing a job's files is
    the machine's state, not a bug, and deserves one line rather than a traceback. A read-only
    or unwritable ``BIOVIZ_HOME`` is said as such first (:func:`~trainer.jobs.store.jobs_blocked_reason`),
    the Train page's words, not the database's ``unable to open database file``.
    """

    def run(args: argparse.Namespace) -> int:
        if blocked := jobs_blocked_reason():
            sys.stderr.write(f"error: {blocked}\n")
            return 2
        try:
            return handler(args)
        except BiovizError as error:
            sys.stderr.write(f"error: {error}\n")
        except OSError as error:
            where = f" ({error.filename})" if error.filename else ""
            sys.stderr.write(f"error: {error.strerror or error}{where}\n")
        return 2

    return run


def register(subparsers) -> None:
    """Add the ``jobs`` sub-command and its own sub-commands."""
    parser = subparsers.add_parser("jobs", help="background training jobs (submit, list, status, cancel, logs, delete)",
                                   description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="jobs_command", required=True, parser_class=type(parser))

    submit = sub.add_parser("submit", help="queue a training run (same options as train); prints the job id")
    add_config_options(submit)
    submit.add_argument("--json", action="store_true", help="print the job as one JSON object")
    submit.set_defaults(handler=_guard(_submit))

    listing = sub.add_parser("list", help="all jobs, oldest first")
    listing.add_argument("--active", action="store_true", help="only queued and running jobs")
    listing.add_argument("--json", action="store_true", help="print one JSON object")
    listing.set_defaults(handler=_guard(_list))

    status = sub.add_parser("status", help="one job's status, progress and error")
    status.add_argument("job_id")
    status.add_argument("--json", action="store_true", help="print one JSON object")
    status.set_defaults(handler=_guard(_status))

    cancel = sub.add_parser("cancel", help="stop a queued or running job (and its child processes)")
    cancel.add_argument("job_id")
    cancel.add_argument("--grace", type=float, default=CANCEL_GRACE_S,  # the one grace period (docs/jobs.md)
                        help=f"seconds before SIGTERM becomes SIGKILL (default {CANCEL_GRACE_S:g})")
    cancel.add_argument("--json", action="store_true", help="print one JSON object")
    cancel.set_defaults(handler=_guard(_cancel))

    resume = sub.add_parser("resume", help="continue an interrupted pretraining job from its checkpoint "
                                           "(a new job); prints its id")
    resume.add_argument("job_id")
    resume.add_argument("--json", action="store_true", help="print the new job as one JSON object")
    resume.set_defaults(handler=_guard(_resume))

    delete = sub.add_parser("delete", help="forget a job (cancelling it first), its log and progress")
    delete.add_argument("job_id")
    delete.add_argument("--with-run", action="store_true", help="also delete its run directory")
    delete.set_defaults(handler=_guard(_delete))

    logs = sub.add_parser("logs", help="the job's log (stdout and stderr of the trainer)")
    logs.add_argument("job_id")
    logs.add_argument("--tail", type=int, default=200, help="last lines to print")
    logs.add_argument("-f", "--follow", action="store_true", help="keep printing until the job ends")
    logs.set_defaults(handler=_guard(_logs))
