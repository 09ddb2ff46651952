"""The smaller findings of issue 32's probe (finding 9), one test each."""

from __future__ import annotations

import json
import os
import stat
import tempfile

from bioviz.models.runs import list_runs, runs_dir
from bioviz.paths import current_umask, share_tree


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
