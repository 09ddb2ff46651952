"""The runner of one job: ``python -m trainer.jobs.runner run JOB_ID --token TOKEN`` (started by the queue).

Each started job is a small runner process in its own session. It first claims its job:
``starting`` becomes ``running`` only if the job still holds the token the queue gave this
runner (a runner whose claim was taken over, or whose job was cancelled meanwhile, exits
without doing anything). Then it starts the trainer (``python -m trainer train --config
jobs/<id>/config.json ...``) as its child, in the same process group so a cancel reaches
both, waits for it, records how it ended, and reconciles the queue itself, so the next
queued job starts even when nobody is looking.
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

from bioviz.errors import BiovizError
from bioviz.paths import write_text_atomic
from trainer.crash_points import crash_point
from trainer.jobs.executor import CANCEL_GRACE_S, Executor, python_command
from trainer.jobs.kinds import kind_of
from trainer.jobs.progress import read_progress, summarise_progress
from trainer.jobs.queue import PROJECT_ROOT, Worker, discard_run, executor_from_env, job_env, outcome
from trainer.jobs.store import CANCELLED, FAILED, INTERRUPTED, RUNNING, STARTING, SUCCEEDED, Job, JobStoreError

logger = logging.getLogger(__name__)


def train_command(job: Job) -> list[str]:
    """The trainer command line of ``job``: its config file, its run directory, its slot's device.

    The device is the slot the job got (``cpu`` or one GPU made visible as ``cuda``), which
    overrides whatever the file says (options override ``--config``).
    """
    device = "cpu" if (job.device or "cpu") == "cpu" else "cuda"
    # Every kind's program takes the trainer's command line shape (a pretrain job's: trainer.jobs.pretrain_job).
    return python_command("-m", kind_of(job.config).module_of(job), "train", "--config", job.config_path, "--out", job.run_dir,
                          "--json", "--progress-file", job.progress_path, "--device", device)


def trainer_executor(worker: Worker, job: Job) -> Executor:
    """The executor that starts ``job``'s trainer: the one it was submitted to (its row's ``executor``)."""
    return worker.executor if job.executor == worker.executor.name else executor_from_env(job.executor)


def ensure_config_file(job: Job) -> None:
    """Write ``job``'s config.json from its row when missing (jobs queued before config files)."""
    if not Path(job.config_path).exists():
        write_text_atomic(job.config_path, json.dumps(job.config, sort_keys=True, indent=1))


def claim(worker: Worker, job_id: str, token: str) -> bool:
    """Turn the job's ``starting`` claim into ``running`` if ``token`` is still its token.

    Records this process as the job's handle in the same step, so the job can be followed
    and cancelled even when the process that started this runner crashed before it could
    record it.
    """
    with worker.store.transaction() as conn:
        claimed = worker.store.update(job_id, conn, only_if=(STARTING,), where_token=token, status=RUNNING,
                                      handle=worker.executor.current_handle(), started_at=time.time())
        crash_point("runner:claim-before-commit")
    crash_point("runner:claim-after-commit")
    return claimed


def record_end(worker: Worker, job: Job, status: str, *, reason: str | None, code: int | None) -> str:
    """Record how the job ended and make its run directory agree; return the status it keeps.

    One transaction: the status (unless a cancel was recorded first: then it stays
    cancelled), the exit code, the progress summary, the removal of the run directory of a
    job that did not succeed (a run published after a cancel included), and ``settled``.
    """
    progress = summarise_progress(read_progress(job.progress_path))
    with worker.store.transaction() as conn:
        if not worker.store.update(job.id, conn, only_if=(RUNNING,), status=status, error=reason, exit_code=code,
                                   finished_at=time.time(), progress=progress):
            # Already marked (cancelled by the user): keep that status, record the details.
            worker.store.update(job.id, conn, exit_code=code, progress=progress)
            status = worker.store.get(job.id, conn).status
        if status != SUCCEEDED:
            discard_run(job)
        worker.store.update(job.id, conn, settled=1)
        crash_point("runner:record-before-commit")
    crash_point("runner:record-after-commit")
    return status


def _log_line(log, text: str) -> None:
    """One line of the runner's own in the job's log; a disk that refuses it loses the line, nothing else."""
    with contextlib.suppress(OSError):
        log.write((text + "\n").encode())


def record_end_retrying(worker: Worker, job: Job, status: str, *, reason: str | None, code: int | None,
                        tries: int = 3) -> str:
    """:func:`record_end`, tried again when the job database cannot be written (a full disk).

    The failed job's run folder is removed first (what a full disk most likely filled), then the
    end is tried again a second later; a database that still refuses leaves the job to the next
    reconcile, which finds the runner gone (its exit code says why).
    """
    for attempt in range(tries):
        try:
            return record_end(worker, job, status, reason=reason, code=code)
        except JobStoreError:
            if attempt == tries - 1:
                raise
            logger.warning("job %s: cannot record its end yet (the database refused); trying again", job.id)
            if status != SUCCEEDED:
                with contextlib.suppress(OSError):
                    discard_run(job)
            time.sleep(1.0)
    return status


def _cancelled_in_table(worker: Worker, job_id: str) -> bool:
    """True when the job's row says cancelled (a cancel whose signal never came: its sender crashed)."""
    try:
        return worker.store.get(job_id).status == CANCELLED
    except JobStoreError:
        return False  # cannot tell now; the signal, or the next look, will do


def run_job(worker: Worker, job_id: str, token: str) -> int:
    """Body of the runner process: claim the job, run the trainer, record how it ended, start the next job.

    Returns
    -------
    int
        The trainer's exit code (0 when the claim was no longer the job's and nothing ran).
    """
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

    signal.signal(signal.SIGTERM, on_term)  # before the claim: a cancel must never be lost
    if not claim(worker, job_id, token):
        # Cancelled, deleted, or claimed again after the process that started this runner crashed.
        logger.info("job %s: this runner's claim is no longer the job's: exiting without running it", job_id)
        return 0
    job = worker.store.get(job_id)
    ensure_config_file(job)
    command = train_command(job)
    code = None
    # Unbuffered, and every line of the runner's own written through _log_line: on a full disk a
    # lost log line must not take the runner down before it records how the job ended.
    with open(job.log_path, "ab", buffering=0) as log:
        _log_line(log, f"[job {job.id}] on {job.device}: {subprocess.list2cmdline(command)}")
        if not cancel_requested:  # else cancelled between the claim and here: no trainer at all
            try:
                child = trainer_executor(worker, job).start_trainer(
                    job, command, job_env(job, worker.store.path.parent), str(PROJECT_ROOT), log=log)
            except (OSError, BiovizError) as error:
                worker.store.update(job.id, only_if=(RUNNING,), status=FAILED, finished_at=time.time(), settled=1,
                                    error=f"could not start the trainer: {error}")
                worker.reconcile()
                return 1
            crash_point("runner:after-trainer-start")
            if cancel_requested:  # the SIGTERM landed while the trainer was being started
                child.send_signal(signal.SIGTERM)
            code = wait_for_trainer(worker, job, child, cancelled_at=lambda: cancel_requested)
        status, reason = outcome(job, code, cancel_requested=bool(cancel_requested))
        lost = getattr(child, "lost_reason", None)  # a remote trainer whose node or worker died
        if lost and status != CANCELLED:
            status, reason = INTERRUPTED, lost
        _log_line(log, f"[job {job.id}] {status}" + (f": {reason}" if reason else ""))
    crash_point("runner:before-record")
    record_end_retrying(worker, job, status, reason=reason, code=code)
    # Hand the slot to the next queued job, even when no page or CLI is looking. A
    # cancel in progress must not be undone by ignoring SIGTERM from here on.
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    worker.reconcile()
    return code if code is not None else 1


def wait_for_trainer(worker: Worker, job: Job, child: subprocess.Popen, cancelled_at, *,
                     check_every_s: float = 2.0) -> int:
    """Wait for the trainer; kill it when it outlives a cancel by the grace period. Returns its exit code.

    ``cancelled_at()`` is the monotonic time of the SIGTERM this runner got, or False. Every
    ``check_every_s`` the job's row is read too: a cancel recorded there whose SIGTERM never
    came (the cancelling process crashed in between) still stops the trainer.
    """
    seen_in_table = None
    last_check = time.monotonic()
    while True:
        try:
            return child.wait(timeout=0.5)
        except subprocess.TimeoutExpired:
            pass
        now = time.monotonic()
        signalled = cancelled_at()
        if not signalled and seen_in_table is None and now - last_check > check_every_s:
            last_check = now
            if _cancelled_in_table(worker, job.id):
                logger.warning("job %s was cancelled without a signal reaching it: stopping the trainer", job.id)
                seen_in_table = now
                with contextlib.suppress(ProcessLookupError):
                    child.send_signal(signal.SIGTERM)
        started = signalled or seen_in_table
        if started and now - started > CANCEL_GRACE_S:
            logger.warning("trainer ignored SIGTERM for %.0f s: killing it", CANCEL_GRACE_S)
            child.kill()


def main(argv: list[str] | None = None) -> int:
    """``python -m trainer.jobs.runner run JOB_ID --token TOKEN`` (started by the queue) or ``reconcile``."""
    parser = argparse.ArgumentParser(prog="python -m trainer.jobs.runner")
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run one job (started by the queue; not for direct use)")
    run.add_argument("job_id")
    run.add_argument("--token", required=True, help="the claim the queue made for this runner")
    sub.add_parser("reconcile", help="reap finished jobs and start queued ones")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s")
    worker = Worker()
    if args.command == "run":
        code = run_job(worker, args.job_id, args.token)
        return 0 if code == 0 else 1
    worker.reconcile()
    return 0


if __name__ == "__main__":
    sys.exit(main())
