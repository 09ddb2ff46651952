"""Corruption matrix for the job queue's state: jobs.sqlite, job handles, progress lines, table columns.

A damaged database is reported in one line that says where it is and what to do, and is left
exactly as it was (it is the user's job history). Damaged handles, progress lines and columns
are tolerated: the job table still lists, and a job that cannot be followed is marked so.
"""

from __future__ import annotations

import json
import random
import sqlite3
import time
from dataclasses import replace
from pathlib import Path

import pytest
from jobs_support import STANDIN, jobs_home  # noqa: F401

from bioviz.errors import BiovizError
from trainer.cli import main
from trainer.jobs.progress import job_row, progress_stage, read_progress, summarise_progress
from trainer.jobs.queue import Worker
from trainer.jobs.store import INTERRUPTED, RUNNING, JobStore


def _database_with_jobs(home: Path, count: int = 6) -> Path:
    """A job table of several pages (the rows carry a long note), all in the main file."""
    store = JobStore()
    for i in range(count):
        job = store.create({"source": "icd10", "epochs": i + 1, "note": "x" * 5000}, module=STANDIN)
        store.update(job.id, status="cancelled", settled=1)
    with sqlite3.connect(store.path) as conn:  # everything into the main file, no -wal left
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    for side in ("-wal", "-shm"):
        Path(f"{store.path}{side}").unlink(missing_ok=True)
    return store.path


def _garbage(path: Path) -> None:
    path.write_bytes(random.Random(13).randbytes(8192))


def _truncated(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def _header_only(path: Path) -> None:
    path.write_bytes(path.read_bytes()[:100])


@pytest.mark.parametrize("damage", [_garbage, _truncated, _header_only])
def test_a_damaged_job_database_is_one_line_and_left_as_it_is(jobs_home, capsys, damage):
    path = _database_with_jobs(jobs_home)
    damage(path)
    before = path.read_bytes()
    commands = (["jobs", "list"], ["jobs", "status", "20990101-000000-dead"], ["jobs", "submit", "--source", "icd10"])
    for command in commands:
        assert main(command) == 2, command
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith(f"error: the job database {path} is damaged"), err
        assert f"mv {path} {path}.damaged-" in err[0]  # what to do, and nothing done behind the user's back
        assert path.read_bytes() == before
    with pytest.raises(BiovizError, match="is damaged"):  # what the Train page gets
        Worker().reconcile()
    assert sorted(p.name for p in jobs_home.iterdir() if p.name.startswith("jobs.sqlite")) == ["jobs.sqlite"]


@pytest.mark.parametrize("handle", [
    "not json", "", "null", "[1, 2]", '{"pid": "1234"}', '{"pid": true}', '{"pid": -1}', '{"pid": 0}',
    '{"pid": 1}', '{"pid": 99999999999}', '{"start": "1"}', '{"pid": 1.5}', '{"pid": 2}',
])
def test_a_damaged_job_handle_is_tolerated(jobs_home, capsys, handle):
    worker = Worker(module=STANDIN, slots={"cpu": 1, "cuda": 0})
    job = worker.store.create({"epochs": 1}, module=STANDIN)
    worker.store.update(job.id, status=RUNNING, device="cpu", started_at=time.time(), handle=handle)
    other = worker.store.create({"epochs": 1}, module=STANDIN)
    worker.store.update(other.id, status=RUNNING, device="cpu", started_at=time.time(), handle=handle)

    assert worker.cancel(other.id).status == "cancelled"  # nothing to signal, nothing sent to a stranger
    worker.reconcile()
    dead = worker.store.get(job.id)
    assert dead.status == INTERRUPTED and dead.settled
    # Unreadable, or a live process it cannot vouch for (no start time): never taken for the job's.
    assert "cannot be followed" in dead.error or "disappeared" in dead.error
    assert main(["jobs", "list"]) == 0 and job.id in capsys.readouterr().out
    worker.delete(job.id)
    worker.delete(other.id)


PROGRESS_LINES = [
    b"[1, 2]", b'"text"', b"null", b"42", b"true", b"{",
    b'{"event": "epoch", "epoch": "three", "max_epochs": 4, "val_metric": "high", "losses": [1], "eta_s": "soon"}',
    b'{"event": "epoch", "epoch": 2.5, "max_epochs": true, "elapsed_s": {}, "val_name": 7}',
    b'{"event": "embedding", "done": "a", "total": null, "eta_s": "x"}',
    b'{"event": "base_weight", "done": [], "total": {}}',
    b'{"event": "start", "max_epochs": "many", "device": 3}',
    b'{"event": "epoch", "epoch": 2, "max_epochs": 4, "eta_s": 1e400}',
    b'\xff\xfe\x00 not utf-8 {"event"',
    b'{"event": "done", "summary": [1]}',
    b'{"event": "error", "message": {"nested": 1}}',
    b'{"event": null}', b'{"event": ["epoch"]}',
]


def test_progress_lines_that_are_not_what_the_trainer_writes_are_tolerated(jobs_home, capsys):
    """Each damaged line after two good ones: the good ones still count, nothing raises, the job lists."""
    worker = Worker(module=STANDIN, slots={"cpu": 1, "cuda": 0})
    good = b'{"event": "start", "max_epochs": 4, "device": "cpu"}\n' \
           b'{"event": "epoch", "epoch": 1, "max_epochs": 4, "val_metric": 0.5, "val_name": "mAP", "eta_s": 3}\n'
    for line in PROGRESS_LINES:
        job = worker.store.create({"epochs": 1}, module=STANDIN)
        Path(job.progress_path).write_bytes(good + line + b"\n")
        summary = summarise_progress(read_progress(job.progress_path))
        assert summary["max_epochs"] == 4 and summary["val_metric"] == 0.5, line
        for status in ("running", "interrupted", "succeeded"):
            shown = replace(job, status=status, progress=summary, started_at=time.time())
            job_row(shown)
            progress_stage(shown)
        # The whole chain: a running job whose process is gone is summarised, stored and listed.
        worker.store.update(job.id, status=RUNNING, device="cpu", started_at=time.time(),
                            handle=json.dumps({"pid": 2**22 + 12345, "start": "1"}))
    assert main(["jobs", "list"]) == 0
    listing = capsys.readouterr().out
    assert all(job.id in listing for job in worker.store.list())
    assert all(job.finished for job in worker.store.list())


@pytest.mark.parametrize("column, value", [("config", "not json"), ("config", "[]"), ("progress", "{oops"),
                                           ("progress", "null")])
def test_a_damaged_json_column_still_lists(jobs_home, capsys, column, value):
    job = JobStore().create({"source": "icd10", "epochs": 2}, module=STANDIN)
    JobStore().update(job.id, status="cancelled", settled=1)  # listed, not started
    with sqlite3.connect(jobs_home / "jobs.sqlite") as conn:
        conn.execute(f"UPDATE jobs SET {column} = ? WHERE id = ?", (value, job.id))
    assert getattr(JobStore().get(job.id), column) == {}
    assert main(["jobs", "list"]) == 0 and job.id in capsys.readouterr().out
