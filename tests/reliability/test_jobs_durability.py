"""Durability and agreement: fsync around atomic renames, a cancel racing a published run,
and job paths resolved where the job was submitted.

- ``bioviz.paths.atomic_path`` flushes the file before the rename and the directory after it
  (else a power loss can leave the new name on an empty file: a run that looks complete with
  an empty run.json);
- the run export (``trainer.runs.train_run``) flushes every file of the run before renaming
  it into place and the parent directory after, checked on the real trainer crashed right
  before and right after the rename;
- a cancel recorded before the runner records the end wins, and the run the trainer had
  already published is removed: a job is succeeded if and only if its run exists;
- a relative ``--source`` is resolved against the submitter's directory.
"""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from jobs_support import ROOT, invariant_problems, jobs_home, new_worker, settle  # noqa: F401
from tests.support.polling import wait_until

from bioviz.paths import write_text_atomic
from trainer.crash_points import CRASH_ENV, CRASH_EXIT_CODE
from trainer.jobs.store import CANCELLED, RUNNING, SUCCEEDED


@pytest.fixture
def disk_calls(monkeypatch):
    """Every os.fsync (by path) and os.replace, in order."""
    calls = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd):
        calls.append(("fsync", os.readlink(f"/proc/self/fd/{fd}")))
        real_fsync(fd)

    def replace(src, dst, *args, **kwargs):
        calls.append(("replace", os.fspath(src), os.fspath(dst)))
        real_replace(src, dst, *args, **kwargs)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    return calls


def test_an_atomic_write_is_flushed_before_and_after_its_rename(tmp_path, disk_calls):
    target = tmp_path / "run.json"
    write_text_atomic(target, '{"run_id": "x"}')
    assert [c[0] for c in disk_calls] == ["fsync", "replace", "fsync"]
    (_, flushed), (_, src, dst), (_, folder) = disk_calls
    assert flushed == src and dst == str(target)  # the data, under its temporary name
    assert folder == str(tmp_path)  # then the directory entry the rename made
    assert json.loads(target.read_text()) == {"run_id": "x"}


def test_a_failed_flush_leaves_the_old_file_and_no_temp(tmp_path, monkeypatch):
    target = tmp_path / "run.json"
    target.write_text("old")

    def broken(fd):
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(os, "fsync", broken)
    with pytest.raises(OSError, match="Input/output error"):
        write_text_atomic(target, "new")
    assert target.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["run.json"]


# The real train_run in a process of its own, every os.fsync and os.replace logged. Only what is
# slow and beside the point is replaced: the names' vectors are synthetic and the model files
# are small stand-ins (saving minilm writes 90 MB), so the export writes and renames for real.
_EXPORT = """
import json, os, sys
import numpy as np
from bioviz.ontology import level_view, load_source, make_split
from trainer.config import TrainConfig, validate
from trainer.data import TrainingData
import trainer.runs as runs

log = open(sys.argv[1], "a")
real_fsync, real_replace = os.fsync, os.replace
def fsync(fd):
    log.write(json.dumps(["fsync", os.readlink("/proc/self/fd/%d" % fd)]) + "\\n"); log.flush()
    real_fsync(fd)
def replace(src, dst, *args, **kwargs):
    log.write(json.dumps(["replace", os.fspath(src), os.fspath(dst)]) + "\\n"); log.flush()
    real_replace(src, dst, *args, **kwargs)
os.fsync, os.replace = fsync, replace

def synthetic(config, progress=None, **_):
    ontology = load_source(sys.argv[3])
    view = level_view(ontology, depth=1)
    rng = np.random.default_rng(0)
    vectors = rng.normal(size=(len(view.classes), 16))[view.labels] + rng.normal(size=(len(view.names), 16))
    vectors = (vectors / np.linalg.norm(vectors, axis=1, keepdims=True)).astype(np.float32)
    return TrainingData(ontology, view, make_split(view, shots=3, seed=0), vectors, "synthetic", "0" * 32, 0.0)

def save_model(model, base, folder):
    os.makedirs(folder / "1_Head", exist_ok=True)
    (folder / "modules.json").write_text("[]")
    (folder / "1_Head" / "head.safetensors").write_bytes(b"0" * 4096)

runs.prepare, runs.save_head_model = synthetic, save_model
config = validate(TrainConfig(source=sys.argv[3], depth=1, shots=3, hidden=32, epochs=1, device="cpu"))
runs.train_run(config, sys.argv[2], validated=True)
"""


@pytest.mark.slow  # over 5 s in a full run (CI lists the times)
def test_the_run_export_is_flushed_around_its_rename(tmp_home, tmp_path, data_dir):
    """train_run crashed right after renaming its run into place: the run is whole, and every
    file was flushed before the rename, the directory after it.

    (The crash right before the rename leaves complete files in a temporary folder and no
    run: test_jobs_crash_points checks what the queue makes of both, with the stand-in.)
    """
    out, log = tmp_path / "run", tmp_path / "disk.log"
    env = {**os.environ, "BIOVIZ_HOME": str(tmp_home), "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1",
           CRASH_ENV: "export:after-rename"}
    proc = subprocess.run([sys.executable, "-c", _EXPORT, str(log), str(out), str(data_dir / "trainer_tiny.tsv")],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == CRASH_EXIT_CODE, proc.stderr
    assert json.loads((out / "run.json").read_text())["run_id"] == out.name
    calls = [tuple(json.loads(line)) for line in log.read_text().splitlines()]
    [rename] = [i for i, c in enumerate(calls) if c[0] == "replace" and c[2] == str(out)]
    partial = calls[rename][1]
    assert Path(partial).name.startswith(f".{out.name}.partial-")
    flushed_before = {c[1] for c in calls[:rename] if c[0] == "fsync"}
    run_files = {f"{partial}/{p.relative_to(out)}" for p in out.rglob("*")}
    assert len(run_files) >= 4 and run_files | {partial} <= flushed_before  # every file and folder
    assert ("fsync", str(tmp_path)) in calls[rename + 1:]  # and the rename itself


def test_a_cancel_after_the_run_was_published_removes_the_run(jobs_home):
    """The trainer published its run, then the cancel came: the job is cancelled and has no run."""
    worker = new_worker()
    job = worker.submit({"epochs": 1, "epoch_s": 0.01, "linger_file": str(jobs_home / "never")}, validate=False)
    wait_until(lambda: (Path(job.run_dir) / "run.json").is_file(), what="the published run")
    assert worker.store.get(job.id).status == RUNNING  # the runner has not recorded the end yet
    cancelled = worker.cancel(job.id, grace_s=5)
    assert cancelled.status == CANCELLED and cancelled.settled
    assert not Path(job.run_dir).exists() and invariant_problems(worker, slots=1) == []


def test_a_relative_source_is_resolved_where_the_job_was_submitted(jobs_home, data_dir, monkeypatch):
    monkeypatch.chdir(data_dir)  # the user's directory; the job's trainer runs in the project root
    worker = new_worker()
    job = worker.submit({"source": "mini.obo", "shots": 1, "epochs": 1, "base": "minilm"}, validate=True)
    config = json.loads(Path(job.config_path).read_text())
    assert config["source"] == str(data_dir / "mini.obo") and config["base"] == "minilm"
    assert job.config["source"] == str(data_dir / "mini.obo")
    done = {j.id: j for j in settle(worker)}[job.id]
    assert done.status == SUCCEEDED, done.error  # the trainer found the file the submit validated
