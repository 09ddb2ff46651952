"""The job store: one SQLite table of training jobs.

A job is one ``python -m trainer train --config jobs/<id>/config.json ...`` run. Its row in ``BIOVIZ_HOME/jobs.sqlite``
(WAL mode, so the app, the command line and the job processes read and write it at the
same time) holds the config, the status, the device, timestamps, where its log, progress
file and run directory are, and the error when it did not succeed. The trainer appends one
JSON line per event to the progress file while it runs, so a page opened later still shows
the whole history; the row keeps a summary of the latest event.

Statuses::

    queued -> running -> succeeded | failed | cancelled | interrupted
    queued -> cancelled

``interrupted`` means the job's process vanished without reporting (killed, out of memory,
machine restart); ``failed`` means it reported an error or exited non-zero.

What starts a process is an executor (:mod:`trainer.jobs.executor`); the queue is
:mod:`trainer.jobs.queue`, each job's runner process :mod:`trainer.jobs.runner`, and
following a job's progress :mod:`trainer.jobs.progress`.
"""

from __future__ import annotations

import contextlib
import json
import logging
import secrets
import sqlite3
import time
from dataclasses import dataclass, field
from pathlib import Path

from bioviz.errors import BiovizError
from bioviz.paths import home, write_text_atomic

logger = logging.getLogger(__name__)

QUEUED, RUNNING = "queued", "running"
SUCCEEDED, FAILED, CANCELLED, INTERRUPTED = "succeeded", "failed", "cancelled", "interrupted"
STATUSES = (QUEUED, RUNNING, SUCCEEDED, FAILED, CANCELLED, INTERRUPTED)
ACTIVE = (QUEUED, RUNNING)
FINISHED = (SUCCEEDED, FAILED, CANCELLED, INTERRUPTED)

DB_FILE = "jobs.sqlite"
CONFIG_FILE = "config.json"  # in the job's folder, beside its log and progress file

_SCHEMA = f"""
CREATE TABLE IF NOT EXISTS jobs (
    id TEXT PRIMARY KEY,
    config TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ({", ".join(repr(s) for s in STATUSES)})),
    requested_device TEXT NOT NULL DEFAULT 'auto',
    device TEXT,
    created_at REAL NOT NULL,
    started_at REAL,
    finished_at REAL,
    executor TEXT NOT NULL DEFAULT 'local',
    module TEXT NOT NULL DEFAULT 'trainer',
    handle TEXT,
    log_path TEXT NOT NULL,
    progress_path TEXT NOT NULL,
    run_dir TEXT NOT NULL,
    progress TEXT NOT NULL DEFAULT '{{}}',
    exit_code INTEGER,
    error TEXT
);
CREATE INDEX IF NOT EXISTS jobs_status ON jobs (status, created_at);
"""


class JobError(BiovizError):
    """A job request that cannot be honoured (unknown id, wrong state, invalid config)."""


@dataclass(frozen=True)
class Job:
    """One row of the job table.

    Attributes
    ----------
    id : str
        ``YYYYmmdd-HHMMSS-xxxx``: sortable, and the name of its run directory.
    config : dict
        The ``train`` options (source, root, depth, shots, encoder, base, init, hyperparameters).
    status : str
        One of :data:`STATUSES`.
    requested_device, device : str
        What was asked (``auto``, ``cpu``, ``cuda``) and the slot it got (``cpu``, ``cuda:0``).
    created_at, started_at, finished_at : float
        Unix times; the last two are None until reached.
    executor, handle : str
        Which executor runs it and its opaque reference to the process (JSON for the local one).
    module : str
        The trainer program, run as ``python -m <module> train ...`` (``trainer``).
    log_path, progress_path, run_dir : str
        Combined stdout/stderr, the trainer's JSON-lines progress, the run directory.
    progress : dict
        Summary of the latest progress event (epoch, max_epochs, losses, val_metric, eta_s ...).
    exit_code : int
        The trainer's exit code when known.
    error : str
        Why it failed, was cancelled or interrupted.
    """

    id: str
    config: dict
    status: str
    requested_device: str
    device: str | None
    created_at: float
    started_at: float | None
    finished_at: float | None
    executor: str
    module: str
    handle: str | None
    log_path: str
    progress_path: str
    run_dir: str
    progress: dict = field(default_factory=dict)
    exit_code: int | None = None
    error: str | None = None

    @property
    def config_path(self) -> str:
        """``jobs/<id>/config.json``: the options the trainer runs with (``train --config``)."""
        return str(Path(self.log_path).parent / CONFIG_FILE)

    @property
    def finished(self) -> bool:
        """True once the job can no longer change."""
        return self.status in FINISHED

    def duration_s(self, now: float | None = None) -> float | None:
        """Seconds spent running so far (or in total once finished); None while queued."""
        if self.started_at is None:
            return None
        end = self.finished_at if self.finished_at is not None else (now or time.time())
        return max(0.0, end - self.started_at)

    def as_dict(self) -> dict:
        """JSON-serialisable form (for ``jobs status --json``)."""
        return {
            "id": self.id, "status": self.status, "config": self.config,
            "requested_device": self.requested_device, "device": self.device,
            "created_at": self.created_at, "started_at": self.started_at, "finished_at": self.finished_at,
            "duration_s": self.duration_s(), "progress": self.progress, "exit_code": self.exit_code,
            "error": self.error, "log_path": self.log_path, "progress_path": self.progress_path,
            "run_dir": self.run_dir, "executor": self.executor, "module": self.module,
        }


def new_job_id() -> str:
    """A fresh, sortable job id (UTC time plus random hex)."""
    return time.strftime("%Y%m%d-%H%M%S", time.gmtime()) + "-" + secrets.token_hex(2)


class JobStore:
    """The job table in ``BIOVIZ_HOME/jobs.sqlite``.

    Every method opens its own short connection: the store is shared between processes
    (the app, the CLI, the job runners), and SQLite's WAL mode lets readers go on while
    one writer commits. Use :meth:`transaction` to read and write atomically.

    Parameters
    ----------
    path : path-like, optional
        Database file (default ``BIOVIZ_HOME/jobs.sqlite``).
    """

    _ready: set[Path] = set()  # databases this process has already set up

    def __init__(self, path: str | Path | None = None):
        self.path = Path(path) if path else home() / DB_FILE
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if self.path not in self._ready or not self.path.exists():
            # WAL is a property of the file: set once, it stays for every later connection.
            with self._connect() as conn:
                conn.execute("PRAGMA journal_mode=WAL")
                conn.executescript(_SCHEMA)
            self._ready.add(self.path)

    @property
    def jobs_dir(self) -> Path:
        """``<home>/jobs``: one folder per job with its log and progress file."""
        path = self.path.parent / "jobs"
        path.mkdir(exist_ok=True)
        return path

    @property
    def runs_dir(self) -> Path:
        """``<home>/runs``: where a job's run directory goes."""
        path = self.path.parent / "runs"
        path.mkdir(exist_ok=True)
        return path

    @contextlib.contextmanager
    def _connect(self):
        # isolation_level=None: we issue BEGIN ourselves, so transactions are explicit.
        conn = sqlite3.connect(self.path, timeout=30, isolation_level=None)
        conn.row_factory = sqlite3.Row
        conn.execute("PRAGMA busy_timeout=30000")
        try:
            yield conn
        finally:
            conn.close()

    @contextlib.contextmanager
    def transaction(self):
        """A connection inside ``BEGIN IMMEDIATE``: one writer at a time, committed on success.

        The queue runner holds it while it decides which queued job starts, so two
        processes looking at the job list at once never start the same job twice.
        """
        with self._connect() as conn:
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")

    # -- reading -----------------------------------------------------------------------
    @staticmethod
    def _job(row: sqlite3.Row) -> Job:
        data = dict(row)
        data["config"] = json.loads(data["config"])
        data["progress"] = json.loads(data["progress"] or "{}")
        return Job(**data)

    def get(self, job_id: str, conn: sqlite3.Connection | None = None) -> Job:
        """The job ``job_id``.

        Raises
        ------
        JobError
            If there is no such job.
        """
        with contextlib.nullcontext(conn) if conn else self._connect() as c:
            row = c.execute("SELECT * FROM jobs WHERE id = ?", (job_id,)).fetchone()
        if row is None:
            raise JobError(f"no job {job_id!r} (see `python -m trainer jobs list`)")
        return self._job(row)

    def list(self, statuses: tuple[str, ...] | None = None, conn: sqlite3.Connection | None = None) -> list[Job]:
        """Jobs, oldest first, optionally only those with one of ``statuses``."""
        query, params = "SELECT * FROM jobs", ()
        if statuses:
            query += f" WHERE status IN ({', '.join('?' * len(statuses))})"
            params = tuple(statuses)
        with contextlib.nullcontext(conn) if conn else self._connect() as c:
            rows = c.execute(query + " ORDER BY created_at, id", params).fetchall()
        return [self._job(r) for r in rows]

    # -- writing -----------------------------------------------------------------------
    def create(self, config: dict, requested_device: str = "auto", executor: str = "local",
               module: str = "trainer") -> Job:
        """Add a queued job for ``config``; its folder and run path are named by its id.

        The config is written once, to ``jobs/<id>/config.json`` (atomically, before the row
        exists, so a listed job always has it); the row keeps a copy for listing.
        """
        job_id = new_job_id()
        folder = self.jobs_dir / job_id
        folder.mkdir(parents=True, exist_ok=False)
        write_text_atomic(folder / CONFIG_FILE, json.dumps(config, sort_keys=True, indent=1))
        values = {
            "id": job_id, "config": json.dumps(config, sort_keys=True), "status": QUEUED,
            "requested_device": requested_device, "created_at": time.time(), "executor": executor, "module": module,
            "log_path": str(folder / "log.txt"), "progress_path": str(folder / "progress.jsonl"),
            "run_dir": str(self.runs_dir / job_id),
        }
        with self.transaction() as conn:
            conn.execute(f"INSERT INTO jobs ({', '.join(values)}) VALUES ({', '.join('?' * len(values))})",
                         tuple(values.values()))
        logger.info("job %s queued", job_id)
        return self.get(job_id)

    def update(self, job_id: str, conn: sqlite3.Connection | None = None, only_if: tuple[str, ...] | None = None,
               **fields) -> bool:
        """Set ``fields`` on a job; with ``only_if``, only when its status is one of those.

        Returns
        -------
        bool
            True when the row changed (False: the job was already in another state).
        """
        for key in ("config", "progress"):
            if key in fields and not isinstance(fields[key], str):
                fields[key] = json.dumps(fields[key], sort_keys=True)
        query = f"UPDATE jobs SET {', '.join(f'{k} = ?' for k in fields)} WHERE id = ?"
        params = (*fields.values(), job_id)
        if only_if:
            query += f" AND status IN ({', '.join('?' * len(only_if))})"
            params += tuple(only_if)
        if conn is not None:
            return conn.execute(query, params).rowcount > 0
        with self.transaction() as c:
            return c.execute(query, params).rowcount > 0

    def delete(self, job_id: str) -> None:
        """Remove a job's row (its files are the caller's business)."""
        with self.transaction() as conn:
            conn.execute("DELETE FROM jobs WHERE id = ?", (job_id,))
