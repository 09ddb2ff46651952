"""Training jobs: a SQLite job table and the executor interface that runs them.

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

What starts a process is an :class:`Executor` (``submit``/``poll``/``cancel`` on an opaque
handle string), so a Ray or Slurm executor can stand behind the same queue; the embedded
default is :class:`LocalProcessExecutor`. The queue itself lives in :mod:`trainer.jobs.worker`.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import secrets
import signal
import sqlite3
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from bioviz.errors import BiovizError
from bioviz.paths import home, write_text_atomic
from bioviz.models.runs import shots_text
from bioviz.ontology.level_spec import LevelSpec
from bioviz.ontology.splits import DEFAULT_SHOTS

logger = logging.getLogger(__name__)

QUEUED, RUNNING = "queued", "running"
SUCCEEDED, FAILED, CANCELLED, INTERRUPTED = "succeeded", "failed", "cancelled", "interrupted"
STATUSES = (QUEUED, RUNNING, SUCCEEDED, FAILED, CANCELLED, INTERRUPTED)
ACTIVE = (QUEUED, RUNNING)
FINISHED = (SUCCEEDED, FAILED, CANCELLED, INTERRUPTED)

DB_FILE = "jobs.sqlite"
CONFIG_FILE = "config.json"  # in the job's folder, beside its log and progress file
# Exit code of a trainer stopped by SIGTERM between batches (128 + SIGINT, by convention).
CANCEL_EXIT_CODE = 130
# Seconds a cancelled trainer gets to stop cleanly before it is killed (it stops between
# batches, then the interpreter tears torch down: seconds on a busy machine).
CANCEL_GRACE_S = 30.0

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


# -- progress --------------------------------------------------------------------------
def read_progress(path: str | Path) -> list[dict]:
    """The events of a progress file, in order; a half-written last line is skipped."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    events = []
    for line in text.splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            continue  # the trainer may be in the middle of writing this line
        if isinstance(event, dict):
            events.append(event)
    return events


def summarise_progress(events: list[dict]) -> dict:
    """Latest state from progress events: epoch, max_epochs, losses, val metric, ETA, device.

    The result is what the job table shows; the full curves come from :func:`read_progress`.
    """
    summary: dict = {}
    for event in events:
        kind = event.get("event")
        if kind == "embedding":
            summary["embedding"] = {"done": event.get("done", 0), "total": event.get("total", 0)}
            summary["eta_s"] = event.get("eta_s")
        elif kind == "start":
            summary.update({k: event[k] for k in ("max_epochs", "device") if k in event})
            summary["epoch"] = 0
            summary["eta_s"] = None  # the embedding's estimate no longer holds
            summary.pop("embedding", None)
        elif kind == "epoch":
            summary.update({k: event[k] for k in ("epoch", "max_epochs", "losses", "val_metric", "val_name",
                                                   "elapsed_s", "eta_s") if k in event})
        elif kind == "base_weight":  # after the last epoch: the weight of the input is chosen
            summary["base_weight"] = {"done": event.get("done", 0), "total": event.get("total", 0)}
            summary["eta_s"] = None  # the epochs' estimate does not cover it (and early stopping ended them)
        elif kind == "done":
            summary["done"] = True
            summary["eta_s"] = 0
            if "summary" in event:
                summary["summary"] = event["summary"]
        elif kind == "error":
            summary["error"] = event.get("message")
    return summary


def tail(path: str | Path, lines: int = 200, max_bytes: int = 256_000) -> str:
    """The last ``lines`` lines of a text file (empty if it does not exist yet)."""
    try:
        with open(path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            size = handle.tell()
            handle.seek(max(0, size - max_bytes))
            data = handle.read()
    except FileNotFoundError:
        return ""
    return "\n".join(data.decode("utf-8", errors="replace").splitlines()[-lines:])


# -- executors -------------------------------------------------------------------------
@dataclass(frozen=True)
class ProcessState:
    """What an executor knows about a job's process.

    Attributes
    ----------
    alive : bool
        Still running.
    exit_code : int or None
        Exit code when the executor saw it end (negative: killed by that signal).
    """

    alive: bool
    exit_code: int | None = None


class Executor:
    """Starts, watches and stops job processes. Subclass for Ray, Slurm, ...

    A handle is an opaque string the executor can later turn back into its process; it is
    stored in the job table so any process (the app, the CLI) can poll or cancel the job.
    """

    name = "abstract"

    def submit(self, command: list[str], env: dict[str, str], log_path: str | Path) -> str:
        """Start ``command`` with ``env``, stdout and stderr appended to ``log_path``; return its handle."""
        raise NotImplementedError

    def poll(self, handle: str) -> ProcessState:
        """Whether the process behind ``handle`` is still alive."""
        raise NotImplementedError

    def cancel(self, handle: str, grace_s: float = CANCEL_GRACE_S, wait: bool = True) -> None:
        """Ask the process and its children to stop; force them after ``grace_s`` seconds.

        With ``wait=False`` return once asked; the job's runner forces its trainer itself.
        """
        raise NotImplementedError


def _proc_start_time(pid: int) -> str | None:
    """Start time of ``pid`` in clock ticks since boot (Linux), to tell a reused pid apart."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses: split after the last ')'.
    fields = stat[stat.rindex(")") + 2:].split()
    return fields[19] if len(fields) > 19 else None


def _proc_state(pid: int) -> str | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat[stat.rindex(")") + 2:].split()[0]


def _pid_alive(pid: int, start: str | None) -> bool:
    """True when ``pid`` exists, is not a zombie, and (when known) started at ``start``."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # exists, owned by someone else: cannot be ours, but do not reap it blindly
    if Path("/proc").is_dir():
        if _proc_state(pid) in (None, "Z", "X"):
            return False
        if start is not None and _proc_start_time(pid) != start:
            return False  # the pid was reused by an unrelated process
    return True


class LocalProcessExecutor(Executor):
    """Runs each job as its own OS process on this machine, in its own session.

    ``start_new_session=True`` gives the process its own process group, so :meth:`cancel`
    reaches the trainer and anything it started, and closing the app or the terminal that
    submitted it does not kill it. The handle is ``{"pid": .., "start": ..}``; the start
    time guards against a recycled pid after a reboot.
    """

    name = "local"
    # Popen objects of processes started by this Python process: polling them reaps the
    # child (no zombie while the app runs) and gives its exit code.
    _children: dict[int, subprocess.Popen] = {}

    def submit(self, command: list[str], env: dict[str, str], log_path: str | Path) -> str:
        """Start ``command`` detached; return its handle."""
        Path(log_path).parent.mkdir(parents=True, exist_ok=True)
        with open(log_path, "ab") as log:
            proc = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                    env=env, start_new_session=True, close_fds=True)
        self._children[proc.pid] = proc
        return json.dumps({"pid": proc.pid, "start": _proc_start_time(proc.pid)})

    def poll(self, handle: str) -> ProcessState:
        """Alive or not, with the exit code when this process started it."""
        info = json.loads(handle)
        pid = int(info["pid"])
        child = self._children.get(pid)
        if child is not None:
            code = child.poll()
            if code is None:
                return ProcessState(True)
            del self._children[pid]
            return ProcessState(False, code)
        return ProcessState(_pid_alive(pid, info.get("start")))

    @classmethod
    def reap(cls) -> None:
        """Collect the exit status of finished children, so none lingers as a zombie."""
        for pid, child in list(cls._children.items()):
            if child.poll() is not None:
                cls._children.pop(pid, None)

    def cancel(self, handle: str, grace_s: float = CANCEL_GRACE_S, wait: bool = True) -> None:
        """SIGTERM the process group (the trainer stops between batches), SIGKILL after ``grace_s``.

        With ``wait=False`` only the SIGTERM is sent: the runner kills its trainer after
        the same grace period, so a page need not block on a slow shutdown.
        """
        info = json.loads(handle)
        pid = int(info["pid"])
        if not self.poll(handle).alive:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGTERM)  # pid == pgid: the process leads its own session
        if not wait:
            return
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline:
            if not self.poll(handle).alive and not group_alive(pid):
                return
            time.sleep(0.1)
        logger.warning("job process group %s ignored SIGTERM for %.0f s: killing it", pid, grace_s)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGKILL)
        deadline = time.monotonic() + 5.0  # SIGKILL cannot be refused; wait for the kernel
        while (self.poll(handle).alive or group_alive(pid)) and time.monotonic() < deadline:
            time.sleep(0.05)


def group_alive(pgid: int) -> bool:
    """True while any process of group ``pgid`` is alive (zombies do not count)."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    proc = Path("/proc")
    if not proc.is_dir():
        return True
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        if int(fields[2]) == pgid and fields[0] not in ("Z", "X"):
            return True
    return False


def python_command(*args: str) -> list[str]:
    """``[sys.executable, *args]``: jobs run with the interpreter of the app or CLI."""
    return [sys.executable, *args]


# -- presentation ----------------------------------------------------------------------
def _clock(seconds: float | None) -> str:
    if seconds is None:
        return ""
    seconds = int(round(seconds))
    hours, rest = divmod(seconds, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}" if hours else f"{rest // 60}:{rest % 60:02d}"


def describe_config(config: dict) -> str:
    """``residual on icd10 d1 · 15 shots · base minilm`` for tables and titles."""
    level = LevelSpec.from_config(config).label  # a field left out means the TrainConfig default
    start = f"init {Path(str(config['init'])).name}" if config.get("init") else f"base {config.get('base', 'minilm')}"
    shots = shots_text(config.get("shots", DEFAULT_SHOTS))
    return f"{config.get('encoder', 'residual')} on {level} · {shots} · {start}"


def queue_position(jobs: list[Job], job: Job) -> int | None:
    """1-based place of a queued ``job`` among the queued ``jobs`` (oldest first), else None."""
    queued = sorted((j for j in jobs if j.status == QUEUED), key=lambda j: (j.created_at, j.id))
    ids = [j.id for j in queued]
    return ids.index(job.id) + 1 if job.id in ids else None


def progress_stage(job: Job) -> tuple[str, float]:
    """What a started job is doing and the share of that stage done: ``("epoch 3/10", 0.3)``.

    Stages in order: embedding the level's names, epochs, then choosing the base weight;
    a finished job keeps its last epoch count.
    """
    p = job.progress or {}
    running = job.status == RUNNING
    if p.get("base_weight") and running:
        done, total = p["base_weight"]["done"], p["base_weight"]["total"]
        return f"choosing the base weight {done}/{total}", done / max(total, 1)
    if p.get("max_epochs"):
        return f"epoch {p.get('epoch', 0)}/{p['max_epochs']}", p.get("epoch", 0) / p["max_epochs"]
    if p.get("embedding") and running:
        done, total = p["embedding"]["done"], p["embedding"]["total"]
        return f"embedding {done:,}/{total:,} names", done / max(total, 1)
    return ("preparing data" if running else ""), 0.0


def job_row(job: Job, jobs: list[Job] | None = None, now: float | None = None) -> dict:
    """One line of the job table: status, progress, device, duration, key metric, ETA, what."""
    p = job.progress or {}
    if job.status == QUEUED:
        place = queue_position(jobs or [job], job)
        progress = f"waiting (#{place} in queue)" if place else "waiting"
    else:
        progress = progress_stage(job)[0]
    metric = ""
    if p.get("val_metric") is not None:
        metric = f"{p.get('val_name', 'val')} {p['val_metric']:.4g}"
    return {
        "job": job.id,
        "status": job.status,
        "progress": progress,
        "device": job.device or job.requested_device,
        "duration": _clock(job.duration_s(now)),
        "metric": metric,
        "eta": _clock(p.get("eta_s")) if job.status == RUNNING else "",
        "what": describe_config(job.config),
    }
