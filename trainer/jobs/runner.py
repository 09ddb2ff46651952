"""The runner of one job: ``python -m trainer.jobs.runner run JOB_ID`` (started by the queue).

Each started job is a small runner process in its own session. It starts the trainer
(``python -m trainer train --config jobs/<id>/config.json ...``) as its child, in the same
process group so a cancel reaches both, waits for it, records how it ended, and reconciles
the queue itself, so the next queued job starts even when nobody is looking.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import signal
import subprocess
import sys
import time
from pathlib import Path

from bioviz.paths import write_text_atomic
from trainer.jobs.executor import CANCEL_GRACE_S, python_command
from trainer.jobs.progress import read_progress, summarise_progress
from trainer.jobs.queue import PROJECT_ROOT, Worker, discard_incomplete_run, job_env, outcome
from trainer.jobs.store import FAILED, RUNNING, SUCCEEDED, Job

logger = logging.getLogger(__name__)


def train_command(job: Job) -> list[str]:
    """The trainer command line of ``job``: its config file, its run directory, its slot's device.

    The device is the slot the job got (``cpu`` or one GPU made visible as ``cuda``), which
    overrides whatever the file says (options override ``--config``).
    """
    device = "cpu" if (job.device or "cpu") == "cpu" else "cuda"
    return python_command("-m", job.module, "train", "--config", job.config_path, "--out", job.run_dir,
                          "--json", "--progress-file", job.progress_path, "--device", device)


def ensure_config_file(job: Job) -> None:
    """Write ``job``'s config.json from its row when missing (jobs queued before config files)."""
    if not Path(job.config_path).exists():
        write_text_atomic(job.config_path, json.dumps(job.config, sort_keys=True, indent=1))


def run_job(worker: Worker, job_id: str) -> int:
    """Body of the runner process: run the trainer, record how it ended, start the next job.

    Returns
    -------
    int
        The trainer's exit code.
    """
    job = worker.store.get(job_id)
    ensure_config_file(job)
    cancel_requested: float | bool = False  # monotonic time of the first SIGTERM
    child: subprocess.Popen | None = None

    def on_term(signum, frame):  # noqa: ARG001 - signal handler signature
        # The trainer got the same signal when it came to the whole group; forward it when
        # only this process was signalled. Then keep waiting, to record the end.
        nonlocal cancel_requested
        cancel_requested = cancel_requested or time.monotonic()
        if child is not None and child.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                child.send_signal(signal.SIGTERM)

    signal.signal(signal.SIGTERM, on_term)
    command = train_command(job)
    with open(job.log_path, "ab") as log:
        log.write(f"[job {job.id}] on {job.device}: {subprocess.list2cmdline(command)}\n".encode())
        log.flush()
        try:
            child = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                     env=job_env(job, worker.store.path.parent), cwd=str(PROJECT_ROOT))
        except OSError as error:
            worker.store.update(job.id, only_if=(RUNNING,), status=FAILED, finished_at=time.time(),
                              error=f"could not start the trainer: {error}")
            worker.reconcile()
            return 1
        code = None
        while code is None:
            try:
                code = child.wait(timeout=0.5)
            except subprocess.TimeoutExpired:
                if cancel_requested and time.monotonic() - cancel_requested > CANCEL_GRACE_S:
                    logger.warning("trainer ignored SIGTERM for %.0f s: killing it", CANCEL_GRACE_S)
                    child.kill()
        status, reason = outcome(job, code, bool(cancel_requested))
        log.write((f"[job {job.id}] {status}" + (f": {reason}" if reason else "") + "\n").encode())
    progress = summarise_progress(read_progress(job.progress_path))
    if not worker.store.update(job.id, only_if=(RUNNING,), status=status, error=reason, exit_code=code,
                             finished_at=time.time(), progress=progress):
        # Already marked (cancelled by the user): keep that status, record the details.
        worker.store.update(job.id, exit_code=code, progress=progress)
        status = worker.store.get(job.id).status
    if status != SUCCEEDED:
        discard_incomplete_run(job)
    # Hand the slot to the next queued job, even when no page or CLI is looking. A
    # cancel in progress must not be undone by ignoring SIGTERM from here on.
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    worker.reconcile()
    return code


def main(argv: list[str] | None = None) -> int:
    """``python -m trainer.jobs.runner run JOB_ID`` (started by the queue) or ``reconcile``."""
    parser = argparse.ArgumentParser(prog="python -m trainer.jobs.runner")
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run one job (started by the queue; not for direct use)")
    run.add_argument("job_id")
    sub.add_parser("reconcile", help="reap finished jobs and start queued ones")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s")
    worker = Worker()
    if args.command == "run":
        code = run_job(worker, args.job_id)
        return 0 if code == 0 else 1
    worker.reconcile()
    return 0


if __name__ == "__main__":
    sys.exit(main())
