"""The job store: one SQLite table of training jobs.

A job is one ``python -m trainer train --config jobs/<id>/config.json ...`` run. Its row in ``BIOVIZ_HOME/jobs.sqlite``
(WAL mode, so the app, the command line and the job processes read and write it at the
same time) holds the config, the status, the device, timestamps, where its log, progress
file and run directory are, and the error when it did not succeed. The trainer appends one
JSON line per event to the progress file while it runs, so a page opened later still shows
the whole history; the row keeps a summary of the latest event.

Statuses::

    queued -> starting -> running -> succeeded | failed | cancelled | interrupted
    queued | starting -> cancelled

``starting`` is a claim: the queue commits it, with a fresh random token, *before* it
starts the job's runner process, and the runner turns it into ``running`` only with that
token. So a crash between the two never runs a job twice (a runner holding a stale token
exits without doing anything), and a claim whose runner never came up is found and
handled by the next reconcile. ``interrupted`` means the job's processes vanished without
reporting (killed, out of memory, machine restart); ``failed`` means the trainer reported
an error or exited non-zero.

A finished job is *settled* once its processes are gone and its run directory agrees with
its status: ``succeeded`` if and only if ``runs/<id>/run.json`` exists. Until then (a
cancel still stopping the trainer, a runner that died before tidying up) the queue keeps
its slot taken and finishes the job's business on the next reconcile.

Damaged or unwritable database files (garbage, truncated, a full disk, a file-size limit)
raise :class:`JobStoreError` with one line that says what and where; the file is never
deleted or replaced behind the user's back.

What starts a process is an executor (:mod:`trainer.jobs.executor`); the queue is
:mod:`trainer.jobs.queue`, each job's runner process :mod:`trainer.jobs.runner`, and
following a job's progress :mod:`trainer.jobs.progress`.
"""

from __future__ import annotations

import contextlib
import json
import logging
import secrets
import shlex
import shutil
import sqlite3
import time
from dataclasses import dataclass, field, fields
from pathlib import Path

from bioviz.errors import BiovizError
from bioviz.paths import home, home_path, home_writable, write_text_atomic

logger = logging.getLogger(__name__)

QUEUED, STARTING, RUNNING = "queued", "starting", "running"
SUCCEEDED, FAILED, CANCELLED, INTERRUPTED = "succeeded", "failed", "cancelled", "interrupted"
STATUSES = (QUEUED, STARTING, RUNNING, SUCCEEDED, FAILED, CANCELLED, INTERRUPTED)
ACTIVE = (QUEUED, STARTING, RUNNING)
FINISHED = (SUCCEEDED, FAILED, CANCELLED, INTERRUPTED)

DB_FILE = "jobs.sqlite"
CONFIG_FILE = "config.json"  # in the job's folder, beside its log and progress file
# The completeness marker of a run directory, as bioviz.models.runs.RUN_FILE (tests check they
# agree). Spelled here so the job runner, started for every job, does not import the ontology
# stack (networkx, scipy) just to test for one file.
RUN_FILE = "run.json"

SCHEMA_VERSION = 1  # PRAGMA user_version; 0: the table before claims (no 'starting', no token)
_COLUMNS = f"""
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
    error TEXT,
    token TEXT,
    claimed_by TEXT,
    claimed_at REAL,
    settled INTEGER NOT NULL DEFAULT 0
"""
_INDEX = "CREATE INDEX IF NOT EXISTS jobs_status ON jobs (status, created_at)"
# Columns of version 0, copied as they are when an older table is upgraded.
_V0_COLUMNS = ("id, config, status, requested_device, device, created_at, started_at, finished_at, executor, "
               "module, handle, log_path, progress_path, run_dir, progress, exit_code, error")
# Damaged files, as SQLite words it ("file is not a database", "database disk image is malformed").
_DAMAGED = ("not a database", "malformed", "encrypted")


class JobStoreError(BiovizError):
    """The job database cannot be read or written (damaged file, full disk, no permission)."""


def jobs_blocked_reason() -> str | None:
    """Why no job can be launched or listed here, in one line: ``BIOVIZ_HOME`` takes no writes; else None.

    The job database, each job's log and its run all live under the home: on a read-only or
    unwritable one the database cannot even be created, nor opened (it is a WAL database). The
    command line (``trainer jobs ...``) and the Train page say this instead of SQLite's own
    ``unable to open database file``.
    """
    if home_writable():
        return None
    return (f"Jobs need a writable BIOVIZ_HOME: none can be launched or listed while {home_path()} "
            "is read-only or not writable")


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
    token : str
        The claim of a starting job: its runner must present it to run the job.
    claimed_by : str
        Handle of the process that claimed it and starts its runner (a ``pid``/``start`` JSON).
    claimed_at : float
        When it was claimed.
    settled : bool
        A finished job whose processes are gone and whose run directory agrees with its status.
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
    token: str | None = None
    claimed_by: str | None = None
    claimed_at: float | None = None
    settled: bool = False

    @property
    def config_path(self) -> str:
        """``jobs/<id>/config.json``: the options the trainer runs with (``train --config``)."""
        return str(Path(self.log_path).parent / CONFIG_FILE)

    @property
    def finished(self) -> bool:
        """True once the job's status can no longer change."""
        return self.status in FINISHED

    @property
    def run_complete(self) -> bool:
        """True when the job's run directory is complete (has ``run.json``)."""
        return (Path(self.run_dir) / RUN_FILE).is_file()

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
    one writer commits. Use :meth:`transaction` to read and write atomically. Any SQLite
    error (damaged file, full disk) comes out as :class:`JobStoreError`, one line naming
    the file.

    Parameters
    ----------
    path : path-like, optional
        Database file (default ``BIOVIZ_HOME/jobs.sqlite``).

    Raises
    ------
    JobStoreError
        If the database is damaged or cannot be created.
    """

    _ready: set[Path] = set()  # databases this process has already set up

    def __init__(self, path: str | Path | None = None):
        self.path = Path(path) if path else home() / DB_FILE
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if self.path not in self._ready or not self.path.exists():
            self._set_up()
            self._ready.add(self.path)

    def _set_up(self) -> None:
        """WAL mode, and the table at :data:`SCHEMA_VERSION` (upgrading an older one in place)."""
        created = not self.path.exists()
        try:
            with self._connect() as conn:
                # WAL is a property of the file: set once, it stays for every later connection.
                conn.execute("PRAGMA journal_mode=WAL")
                if conn.execute("PRAGMA user_version").fetchone()[0] < SCHEMA_VERSION:
                    self._upgrade(conn)
        except JobStoreError:
            if created:  # do not leave an empty database file behind a failed first use
                for path in (self.path, *(self.path.with_name(self.path.name + s) for s in ("-wal", "-shm"))):
                    with contextlib.suppress(OSError):
                        if path.stat().st_size == 0:
                            path.unlink()
            raise

    @staticmethod
    def _upgrade(conn: sqlite3.Connection) -> None:
        """Create the table, or rebuild a version-0 one (SQLite cannot alter a CHECK constraint)."""
        conn.execute("BEGIN IMMEDIATE")
        try:
            if conn.execute("PRAGMA user_version").fetchone()[0] < SCHEMA_VERSION:  # nobody did it meanwhile
                if conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'jobs'").fetchone():
                    finished = ", ".join(repr(s) for s in FINISHED)
                    conn.execute(f"CREATE TABLE jobs_upgrade ({_COLUMNS})")
                    conn.execute(f"INSERT INTO jobs_upgrade ({_V0_COLUMNS}, settled) "
                                 f"SELECT {_V0_COLUMNS}, status IN ({finished}) FROM jobs")
                    conn.execute("DROP TABLE jobs")
                    conn.execute("ALTER TABLE jobs_upgrade RENAME TO jobs")
                else:
                    conn.execute(f"CREATE TABLE jobs ({_COLUMNS})")
                conn.execute(_INDEX)
                conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        except BaseException:
            with contextlib.suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    def _error(self, error: sqlite3.Error) -> JobStoreError:
        """One line for an SQLite error: what is wrong with which file, and what to do."""
        text = str(error)
        if any(word in text for word in _DAMAGED):
            # Never deleted or replaced here: it is the user's job history, and may be recoverable.
            aside = f"{self.path}.damaged-{time.strftime('%Y%m%d-%H%M%S')}"
            return JobStoreError(f"the job database {self.path} is damaged ({text}): move it aside "
                                 f"(mv {shlex.quote(str(self.path))} {shlex.quote(aside)}) to start an empty job "
                                 f"list; trained runs in {self.path.parent / 'runs'} are not affected")
        if "full" in text or "I/O error" in text:
            return JobStoreError(f"cannot write the job database {self.path}: {text} "
                                 "(is the disk full, or a file size limit reached?)")
        return JobStoreError(f"job database {self.path}: {text}")

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
        try:
            # isolation_level=None: we issue BEGIN ourselves, so transactions are explicit.
            conn = sqlite3.connect(self.path, timeout=30, isolation_level=None)
        except sqlite3.Error as error:
            raise self._error(error) from None
        try:
            conn.row_factory = sqlite3.Row
            conn.execute("PRAGMA busy_timeout=30000")
            yield conn
        except sqlite3.Error as error:
            raise self._error(error) from None
        finally:
            with contextlib.suppress(sqlite3.Error):
                conn.close()

    @contextlib.contextmanager
    def transaction(self):
        """A connection inside ``BEGIN IMMEDIATE``: one writer at a time, committed on success.

        The queue holds it while it decides which queued job starts, so two processes
        looking at the job list at once never claim the same job twice.
        """
        with self._connect() as conn:
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
            except BaseException:
                with contextlib.suppress(sqlite3.Error):  # a failed COMMIT may have rolled back already
                    conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")

    # -- reading -----------------------------------------------------------------------
    @staticmethod
    def _job(row: sqlite3.Row) -> Job:
        data = dict(row)
        data["config"] = _json_object(data["config"], "config", data["id"])
        data["progress"] = _json_object(data["progress"], "progress", data["id"])
        data["settled"] = bool(data["settled"])
        return Job(**data)

    def get(self, job_id: str, conn: sqlite3.Connection | None = None) -> Job:
        """The job ``job_id``.

        Raises
        ------
        JobError
            If there is no such job.
        """
        with contextlib.nullcontext(conn) if conn else self._connect() as c:
            row = c.execute(f"SELECT {_SELECTED} FROM jobs WHERE id = ?", (job_id,)).fetchone()
        if row is None:
            raise JobError(f"no job {job_id!r} (see `python -m trainer jobs list`)")
        return self._job(row)

    def list(self, statuses: tuple[str, ...] | None = None, conn: sqlite3.Connection | None = None) -> list[Job]:
        """Jobs, oldest first, optionally only those with one of ``statuses``."""
        query, params = f"SELECT {_SELECTED} FROM jobs", ()
        if statuses:
            query += f" WHERE status IN ({', '.join('?' * len(statuses))})"
            params = tuple(statuses)
        with contextlib.nullcontext(conn) if conn else self._connect() as c:
            rows = c.execute(query + " ORDER BY created_at, id", params).fetchall()
        return [self._job(r) for r in rows]

    def unsettled(self, conn: sqlite3.Connection | None = None) -> list[Job]:
        """Jobs whose processes may be alive: starting, running, or finished but not yet settled."""
        query = (f"SELECT {_SELECTED} FROM jobs WHERE status IN (?, ?) OR (status IN ({', '.join('?' * len(FINISHED))})"
                 " AND settled = 0) ORDER BY created_at, id")
        with contextlib.nullcontext(conn) if conn else self._connect() as c:
            rows = c.execute(query, (STARTING, RUNNING, *FINISHED)).fetchall()
        return [self._job(r) for r in rows]

    def has_work(self) -> bool:
        """True when a reconcile has something to do: a job queued, starting, running or unsettled."""
        with self._connect() as conn:
            row = conn.execute(f"SELECT 1 FROM jobs WHERE status IN ({', '.join('?' * len(ACTIVE))}) "
                               "OR settled = 0 LIMIT 1", ACTIVE).fetchone()
        return row is not None

    # -- writing -----------------------------------------------------------------------
    def create(self, config: dict, requested_device: str = "auto", executor: str = "local",
               module: str = "trainer") -> Job:
        """Add a queued job for ``config``; its folder and run path are named by its id.

        The config is written once, to ``jobs/<id>/config.json`` (atomically, before the row
        exists, so a listed job always has it); the row keeps a copy for listing. When
        either cannot be written (full disk, file size limit), nothing is left of the job.

        Raises
        ------
        JobStoreError
            If the folder, the config file or the row cannot be written.
        """
        job_id = new_job_id()
        folder = self.jobs_dir / job_id
        folder.mkdir(parents=True, exist_ok=False)
        values = {
            "id": job_id, "config": json.dumps(config, sort_keys=True), "status": QUEUED,
            "requested_device": requested_device, "created_at": time.time(), "executor": executor, "module": module,
            "log_path": str(folder / "log.txt"), "progress_path": str(folder / "progress.jsonl"),
            "run_dir": str(self.runs_dir / job_id),
        }
        try:
            write_text_atomic(folder / CONFIG_FILE, json.dumps(config, sort_keys=True, indent=1))
            with self.transaction() as conn:
                conn.execute(f"INSERT INTO jobs ({', '.join(values)}) VALUES ({', '.join('?' * len(values))})",
                             tuple(values.values()))
        except OSError as error:
            shutil.rmtree(folder, ignore_errors=True)
            raise JobStoreError(f"cannot write the job's files in {folder}: {error.strerror or error}") from None
        except BaseException:
            shutil.rmtree(folder, ignore_errors=True)
            raise
        logger.info("job %s queued", job_id)
        return self.get(job_id)

    def update(self, job_id: str, conn: sqlite3.Connection | None = None, only_if: tuple[str, ...] | None = None,
               where_token: str | None = None, **fields) -> bool:
        """Set ``fields`` on a job; with ``only_if``, only when its status is one of those.

        With ``where_token``, only while the job's claim token is that one (a runner's claim,
        the handle recorded after a spawn).

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
        if where_token is not None:
            query += " AND token = ?"
            params += (where_token,)
        if conn is not None:
            return conn.execute(query, params).rowcount > 0
        with self.transaction() as c:
            return c.execute(query, params).rowcount > 0

    def delete(self, job_id: str) -> None:
        """Remove a job's row (its files are the caller's business)."""
        with self.transaction() as conn:
            conn.execute("DELETE FROM jobs WHERE id = ?", (job_id,))


_SELECTED = ", ".join(f.name for f in fields(Job))  # explicit: a column added later cannot break Job(**row)


def _json_object(text: str | None, column: str, job_id: str) -> dict:
    """A JSON object column; a damaged value reads as empty (the job stays listable and removable)."""
    try:
        value = json.loads(text or "{}")
    except (TypeError, ValueError):
        value = None
    if not isinstance(value, dict):
        logger.warning("job %s: its %s in the job table is not a JSON object; shown as empty", job_id, column)
        return {}
    return value
