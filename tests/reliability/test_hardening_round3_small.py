"""The smaller findings of issue 32's probe (finding 9), one test each."""

from __future__ import annotations

import json
import os
import stat
import tempfile

from bioviz.models.runs import list_runs, runs_dir
from bioviz.paths import current_umask, share_tree
from tests.support.partial_runs import partial_folder


def test_a_run_folder_is_shared_as_the_umask_says_not_0700(tmp_path):
    """mkdtemp's 0700 folder and a library's 0600 file become 0755/0644 under umask 022 (docs/security.md)."""
    old = os.umask(0o022)
    try:
        assert current_umask() == 0o022
        partial = tempfile.mkdtemp(dir=tmp_path)
        weights = os.path.join(partial, "model.safetensors")
        os.close(os.open(weights, os.O_CREAT | os.O_WRONLY, 0o600))
        share_tree(partial)
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(partial).st_mode) == 0o755
    assert stat.S_IMODE(os.stat(weights).st_mode) == 0o644


def test_a_run_that_links_outside_the_runs_folder_is_not_offered(tmp_home, tmp_path):
    outside = tmp_path / "elsewhere" / "stolen"
    outside.mkdir(parents=True)
    (outside / "run.json").write_text(json.dumps({"config": {}, "metrics": {}}))
    (runs_dir() / "stolen").symlink_to(outside)
    assert [run.path.name for run in list_runs(include_damaged=True)] == []


def test_an_obo_with_a_duplicate_term_id_is_refused_in_one_line(tmp_path):
    """obonet kept the last stanza of an id without a word; now the file is refused, naming both lines."""
    import pytest

    from bioviz.errors import SourceError
    from bioviz.ontology.obo import load_obo

    obo = tmp_path / "dup.obo"
    obo.write_text("format-version: 1.2\n\n[Term]\nid: X:1\nname: asthma\n\n[Term]\nid: X:1\nname: gout\n")
    with pytest.raises(SourceError, match=r"the term id 'X:1' has two \[Term\] stanzas \(lines 4 and 8\)"):
        load_obo(obo)


def test_two_racing_cancels_of_one_job_one_cancels_it_the_other_is_told_it_already_was(tmp_home):
    """Of two ``jobs cancel ID`` at once, exactly one says it cancelled the job, the other "already cancelled".

    Before: the loser was "error: job ID has already cancelled" with exit code 2, which reads as the
    command having failed (and, to a script running both, as neither having taken effect).
    """
    import subprocess
    import sys

    from tests.conftest import ROOT
    from trainer.jobs.store import CANCELLED, JobStore

    job = JobStore().create({"epochs": 1}, module="tests.trainer.standin_trainer")  # queued: nothing starts it
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    racing = [subprocess.Popen([sys.executable, "-m", "trainer", "jobs", "cancel", job.id], cwd=ROOT, env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    said = sorted((p.wait(120), *p.communicate()) for p in racing)
    assert said == [(0, f"{job.id}: already cancelled\n", ""), (0, f"{job.id}: cancelled\n", "")], said
    assert JobStore().get(job.id).status == CANCELLED


def test_cancels_racing_in_threads_change_the_job_once(tmp_home):
    """The cancel is one conditional UPDATE: of eight threads, one cancels, seven are told it already was."""
    import threading

    import pytest

    from trainer.jobs.queue import AlreadyCancelled, Worker
    from trainer.jobs.store import JobStore

    job = JobStore().create({"epochs": 1}, module="tests.trainer.standin_trainer")
    start, outcomes = threading.Barrier(8), []

    def cancel() -> None:
        start.wait()
        try:
            outcomes.append(Worker(module="tests.trainer.standin_trainer").cancel(job.id).status)
        except AlreadyCancelled:
            outcomes.append("already")

    threads = [threading.Thread(target=cancel) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert sorted(outcomes) == ["already"] * 7 + ["cancelled"], outcomes
    with pytest.raises(AlreadyCancelled, match=f"job {job.id} was already cancelled"):
        Worker().cancel(job.id)




def test_listing_the_runs_removes_the_partial_folders_of_dead_writers_only(tmp_home):
    """A killed direct ``trainer train --out`` left ``.<name>.partial-*`` (~100 MB) forever; now the next listing
    removes it when its writer is gone, and never one whose writer still runs (or runs on another machine)."""
    import socket
    import subprocess
    import sys

    from bioviz.models.run_partials import boot_id, pid_namespace, record_owner
    from bioviz.processes import proc_start_time

    runs = runs_dir()
    ended = subprocess.Popen([sys.executable, "-c", "pass"])
    ended.wait()  # its pid is free now: the writer that was killed
    host = socket.gethostname()
    here = {"boot": boot_id(), "pidns": pid_namespace()}  # written in this boot and PID namespace (issue 41)
    dead = partial_folder(runs, "dead", {"pid": ended.pid, "start": "12345", "host": host, **here})
    # a pid since reused by another process
    reused = partial_folder(runs, "reused", {"pid": os.getpid(), "start": "1", "host": host, **here})
    live = partial_folder(runs, "live", None)
    record_owner(live)  # this very process writes it
    assert json.loads((live / ".owner.json").read_text())["start"] == proc_start_time(os.getpid())
    remote = partial_folder(runs, "remote", {"pid": ended.pid, "start": "12345", "host": host + "-elsewhere"})
    fresh_orphan = partial_folder(runs, "fresh", None)  # no record yet: created an instant ago
    old_orphan = partial_folder(runs, "old", None, age_s=2 * 24 * 3600)  # left by a trainer before the records
    assert list_runs() == []
    assert not dead.exists() and not reused.exists() and not old_orphan.exists()
    assert live.exists() and remote.exists() and fresh_orphan.exists()


def test_trainer_train_out_on_a_full_disk_is_one_line_not_a_traceback(tmp_home, data_dir, tmp_path, monkeypatch,
                                                                       capsys):
    """The export refused by the disk (and the progress file with it): exit 75, one ``error:`` line, no traceback.

    Before: with ``--progress-file`` on the full disk the error event raised in the file write and
    never reached stderr, so the command ended with exit code 75 and said nothing.
    """
    import errno

    from trainer import runs, train_command
    from trainer.cli import main
    from trainer.cli_common import EXIT_WRITE_REFUSED

    out = tmp_path / "run-a"

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(out.with_name(".run-a.partial-x") / "head.bin"))

    monkeypatch.setattr(runs, "train_run", full)
    monkeypatch.setattr(train_command, "append_line", full)  # the progress file's disk is full too
    code = main(["train", "--source", str(data_dir / "trainer_tiny.tsv"), "--depth", "1", "--shots", "3",
                 "--base", "minilm", "--out", str(out), "--progress-file", str(tmp_path / "progress.jsonl")])
    err = capsys.readouterr().err
    assert code == EXIT_WRITE_REFUSED and "Traceback" not in err, err
    where = out.parent / ".run-a.partial-x" / "head.bin"
    assert err.strip().splitlines()[-1] == f"error: cannot write: No space left on device ({where})"


def test_an_export_outside_the_runs_folder_removes_only_partials_it_can_prove_abandoned(tmp_path):
    """Beside a ``--out`` in a user's own folder only a folder with a dead owner record goes, however old the others."""
    import socket
    import subprocess
    import sys

    from bioviz.models.run_partials import boot_id, pid_namespace, sweep_partials

    ended = subprocess.Popen([sys.executable, "-c", "pass"])
    ended.wait()
    dead = partial_folder(tmp_path, "dead", {"pid": ended.pid, "start": "12345", "host": socket.gethostname(),
                                       "boot": boot_id(), "pidns": pid_namespace()})
    foreign = partial_folder(tmp_path, "someone-elses", None, age_s=30 * 24 * 3600)
    assert sweep_partials(tmp_path, orphan_age_s=None) == [dead]
    assert foreign.exists()
