"""Pretraining as a job (trainer.jobs.pretrain_job): validation on submit, progress, resume, publication.

The whole pipeline with a real model (kill, resume, the model in a picker) is
tests/pages/test_train_pretrain.py; these run no model.
"""

from __future__ import annotations

import json

import pytest

from bioviz.errors import BiovizError
from bioviz.models import runs
from trainer.jobs import pretrain_job
from trainer.jobs.progress import describe_config, job_row, summarise_progress
from trainer.jobs.queue import Worker
from trainer.jobs.runner import train_command
from trainer.jobs.store import CANCELLED, QUEUED, JobError


@pytest.fixture
def queue_only(tmp_home, monkeypatch):
    """A worker with no slot: jobs stay queued, nothing trains."""
    monkeypatch.setenv("BIOVIZ_JOB_SLOTS", "cpu=0,cuda=0")
    return Worker()


def pretrain_values(data_dir, **changes):
    return {"kind": "pretrain", "sources": [str(data_dir / "mini.obo"), "hpo"], "objectives": ["synonyms"],
            "max_pairs": 2000, **changes}


def test_a_pretrain_job_from_a_pair_file_keeps_its_absolute_path_and_says_so(queue_only, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "all.pairs.json.gz").write_bytes(b"")  # read when the job runs, not on submit
    job = queue_only.submit({"kind": "pretrain", "pairs_file": "all.pairs.json.gz", "max_pairs": None}, device="cpu")
    saved = json.loads(open(job.config_path).read())
    assert saved["pairs_file"] == str(tmp_path / "all.pairs.json.gz") and saved["sources"] == []
    assert describe_config(job.config) == ("pretrain on pair file all.pairs.json.gz · every objective · "
                                                 "all pairs · base minilm")
    with pytest.raises(BiovizError, match="do not apply to --pairs"):
        queue_only.submit({"kind": "pretrain", "pairs_file": "all.pairs.json.gz", "exclude_levels": ["hpo::1"]},
                          device="cpu")


def test_the_kind_is_the_one_the_library_lists_as_pretrained_and_every_objective_is_explained():
    from trainer.job_options import OBJECTIVE_SUMMARIES
    from trainer.pretrain.pairs import OBJECTIVES

    assert pretrain_job.PRETRAIN_KIND == runs.PRETRAIN_KIND
    assert tuple(OBJECTIVE_SUMMARIES) == tuple(OBJECTIVES)


def test_a_pretrain_job_is_validated_and_runs_the_pretrain_module(queue_only, data_dir, tmp_path, monkeypatch):
    monkeypatch.chdir(data_dir)  # a relative source is made absolute: the job runs in the project's folder
    job = queue_only.submit(pretrain_values(data_dir, sources=["mini.obo"], exclude_levels=["mini.obo::1"],
                                            shots=1), device="cpu")
    assert job.status == QUEUED
    saved = json.loads(open(job.config_path).read())
    assert saved["sources"] == [str(data_dir / "mini.obo")] and saved["batch_size"] == 64  # defaults filled in
    assert saved["kind"] == "pretrain" and "device" not in saved and saved["shots"] == 1
    assert saved["exclude_levels"] == [f"{data_dir / 'mini.obo'}::1"]
    command = train_command(job)
    assert command[1:4] == ["-m", pretrain_job.MODULE, "train"] and "--progress-file" in command
    row = job_row(job, [job])
    assert row["run"].startswith("pretrained minilm: synonyms, 2k pairs (")
    assert describe_config(job.config) == "pretrain on mini.obo · synonyms · 2k pairs · base minilm"


@pytest.mark.parametrize("changes, reason", [
    ({"objectives": ["synonyms", "typo"]}, "unknown objective 'typo'"),
    ({"sources": ["nowhere.obo"]}, "unknown source 'nowhere.obo'"),
    ({"batch_size": 1}, "--batch-size must be >= 2"),
    ({"exclude_levels": ["hpo"]}, "expected SOURCE:ROOT:DEPTH"),
    ({"epoch": 2}, "unknown pretraining option 'epoch'"),
])
def test_a_bad_pretrain_job_is_refused_in_one_line_and_not_queued(queue_only, data_dir, changes, reason):
    with pytest.raises(BiovizError, match=reason):
        queue_only.submit(pretrain_values(data_dir, **changes))
    assert queue_only.store.list() == []


def test_step_events_make_the_job_tables_progress_and_eta():
    events = [{"event": "pairs", "train": 640, "validation": 64, "excluded": 3},
              {"event": "start", "total_steps": 10, "max_epochs": 1, "device": "cpu", "resumed_from_step": 4},
              {"event": "step", "step": 6, "total_steps": 10, "loss": 1.25, "eta_s": 42.0, "elapsed_s": 9.0}]
    summary = summarise_progress(events)
    assert (summary["pairs"], summary["step"], summary["total_steps"], summary["eta_s"]) == (640, 6, 10, 42.0)
    assert summary["loss"] == 1.25


def test_only_an_unfinished_pretrain_job_with_a_run_to_continue_resumes(queue_only, data_dir):
    few_shot = queue_only.submit({"source": "mini", "epochs": 1}, validate=False)
    with pytest.raises(JobError, match="not a pretraining job"):
        queue_only.resume(few_shot.id)
    job = queue_only.submit(pretrain_values(data_dir))
    with pytest.raises(JobError, match="only an interrupted, cancelled or failed job resumes"):
        queue_only.resume(job.id)
    assert queue_only.cancel(job.id).status == CANCELLED
    with pytest.raises(JobError, match="left no pretraining run to resume"):
        queue_only.resume(job.id)  # cancelled before it started: nothing trained
    work = pretrain_job.work_dir(job.config_path)
    work.mkdir()
    (work / "pretrain-config.json").write_text("{}")
    again = queue_only.resume(job.id)
    assert again.config["resume_from"] == str(work) and again.status == QUEUED
    assert "resumed" in describe_config(again.config)


def test_a_checkpoint_cut_short_is_dropped_and_the_one_before_kept(tmp_path):
    checkpoints = tmp_path / "work" / "checkpoints"
    for step, state in ((2, '{"global_step": 2}'), (4, '{"glo'), (6, None)):
        (checkpoints / f"checkpoint-{step}").mkdir(parents=True)
        if state is not None:
            (checkpoints / f"checkpoint-{step}" / pretrain_job.TRAINER_STATE).write_text(state)
    assert pretrain_job.drop_incomplete_checkpoints(tmp_path / "work") == ["checkpoint-4", "checkpoint-6"]
    assert [p.name for p in checkpoints.iterdir()] == ["checkpoint-2"]


def test_adopting_an_interrupted_run_moves_it_once(tmp_path):
    old, new = tmp_path / "a" / "pretrain", tmp_path / "b" / "pretrain"
    old.mkdir(parents=True)
    (old / "pretrain-config.json").write_text("{}")
    new.parent.mkdir()
    assert pretrain_job.adopt(str(old), new) and (new / "pretrain-config.json").is_file() and not old.exists()
    assert pretrain_job.adopt(str(old), new)  # a restart after the move finds it in place
    with pytest.raises(BiovizError, match="nothing to resume"):
        pretrain_job.adopt(str(old), tmp_path / "c" / "pretrain")
    assert not pretrain_job.adopt(None, tmp_path / "d" / "pretrain")
