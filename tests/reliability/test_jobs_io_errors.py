"""I/O errors in the job queue: a full disk (a patched sqlite3) and a file size limit (``ulimit -f``).

Every ``jobs`` command answers one line on stderr with exit code 2, leaves no partial file
(no job folder, no config.json, no empty database), and what was saved before (the job
table) is unchanged.
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import types
from pathlib import Path

import pytest
from jobs_support import ROOT, STANDIN, jobs_home, new_worker, settle  # noqa: F401

import trainer.jobs.store as store_module
from trainer.cli import main
from trainer.jobs.store import QUEUED, SUCCEEDED, JobStore

WRITES = ("INSERT", "UPDATE", "DELETE")


class _FullDisk:
    """A connection whose writes fail as SQLite's do when the disk is full."""

    def __init__(self, conn):
        object.__setattr__(self, "_conn", conn)

    def __getattr__(self, name):
        return getattr(self._conn, name)

    def __setattr__(self, name, value):
        setattr(self._conn, name, value)

    def execute(self, sql, *args):
        if sql.lstrip().upper().startswith(WRITES):
            raise sqlite3.OperationalError("database or disk is full")
        return self._conn.execute(sql, *args)


def _fill_the_disk(monkeypatch) -> None:
    """From now on, the job store's writes fail with "database or disk is full"."""
    patched = types.SimpleNamespace(**vars(sqlite3))
    patched.connect = lambda *args, **kwargs: _FullDisk(sqlite3.connect(*args, **kwargs))
    monkeypatch.setattr(store_module, "sqlite3", patched)


@pytest.fixture
def full_disk(monkeypatch):
    _fill_the_disk(monkeypatch)


def _one_error_line(capsys) -> str:
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), captured.err
    return lines[0]


def test_submit_on_a_full_disk_is_one_line_and_leaves_no_job(jobs_home, data_dir, capsys, full_disk):
    code = main(["jobs", "submit", "--source", str(data_dir / "mini.obo"), "--shots", "1", "--epochs", "1"])
    assert code == 2
    line = _one_error_line(capsys)
    assert "cannot write the job database" in line and "database or disk is full" in line
    assert list((jobs_home / "jobs").iterdir()) == []  # neither the job folder nor its config.json


def test_list_on_a_full_disk_is_one_line_and_keeps_the_queue(jobs_home, capsys, monkeypatch):
    job = JobStore().create({"epochs": 1}, module=STANDIN)
    _fill_the_disk(monkeypatch)
    assert main(["jobs", "list"]) == 2  # reconcile cannot claim the queued job
    assert "database or disk is full" in _one_error_line(capsys)
    monkeypatch.setattr(store_module, "sqlite3", sqlite3)  # room again
    again = JobStore().get(job.id)
    assert again.status == QUEUED and again.token is None  # the failed claim was rolled back whole


def _jobs_cli(home: Path, *args: str, limit_kb: int = 0) -> subprocess.CompletedProcess:
    """``python -m trainer jobs ...`` under ``ulimit -f`` (output to pipes, which the limit spares)."""
    command = " ".join([f"ulimit -f {limit_kb};", "exec", sys.executable, "-m", "trainer", "jobs", *args])
    env = {"BIOVIZ_HOME": str(home), "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "BIOVIZ_JOB_DEVICES": "cpu",
           "PATH": "/usr/bin:/bin", "TOKENIZERS_PARALLELISM": "false"}
    return subprocess.run(["bash", "-c", command], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)


def _files(home: Path) -> dict[str, bytes]:
    """Every file under ``home`` with its content, SQLite's own -wal/-shm side files aside."""
    return {str(p.relative_to(home)): p.read_bytes() for p in sorted(home.rglob("*"))
            if p.is_file() and not p.name.endswith(("-wal", "-shm"))}


def _assert_one_line_exit_2(proc: subprocess.CompletedProcess) -> str:
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1 and lines[0].startswith("error: "), proc.stderr
    return lines[0]


def test_a_file_size_limit_on_a_fresh_home_leaves_no_database(tmp_path):
    home = tmp_path / "home"  # `jobs submit` opens the store the same way, first
    line = _assert_one_line_exit_2(_jobs_cli(home, "list"))
    assert line.startswith(f"error: cannot write the job database {home / 'jobs.sqlite'}")
    assert [p for p in home.rglob("*") if p.is_file()] == []  # not even an empty jobs.sqlite


def test_a_file_size_limit_during_submit_keeps_the_saved_jobs(jobs_home, data_dir):
    worker = new_worker()
    done = worker.submit({"source": str(data_dir / "mini.obo"), "shots": 1, "epochs": 1, "epoch_s": 0.01}
                         | {"hidden": 32}, validate=False)
    assert [j.status for j in settle(worker)] == [SUCCEEDED]
    from bioviz.ontology import load_source

    load_source(str(data_dir / "mini.obo"))  # cached now: validation needs no write
    before = _files(jobs_home)
    proc = _jobs_cli(jobs_home, "submit", "--source", str(data_dir / "mini.obo"), "--shots", "1", "--epochs", "1")
    line = _assert_one_line_exit_2(proc)
    assert "File too large" in line or "job database" in line
    assert _files(jobs_home) == before  # no job folder, no config.json, the database as it was
    with sqlite3.connect(jobs_home / "jobs.sqlite") as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert [j.id for j in JobStore().list()] == [done.id]
