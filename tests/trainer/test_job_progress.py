"""Honest job progress: the ETA of a loop that stops early, how a finished job's epochs ended,
the class-retrieval mAP and the run's readable label in the job table (issue 14)."""

from __future__ import annotations

import json
from dataclasses import replace

from bioviz.models.runs import set_run_name
from trainer.jobs.progress import job_row, progress_stage, read_progress, summarise_progress
from trainer.jobs.store import CANCELLED, RUNNING, SUCCEEDED, JobStore
from trainer.loop import Trainer


def _job(progress: dict, status: str = RUNNING, **config):
    job = JobStore().create({"source": "hpo", "depth": 1, "shots": 15, "encoder": "residual", **config})
    return replace(job, status=status, progress=progress)


def _summary(tmp_path, *events) -> dict:
    path = tmp_path / "progress.jsonl"
    path.write_text("".join(json.dumps(e) + "\n" for e in events))
    return summarise_progress(read_progress(path))


def test_the_loop_announces_when_early_stopping_ends_it(tiny_data, tiny_config):
    events = []
    config = tiny_config(encoder="dan", epochs=60, patience=2, hidden=16)
    result = Trainer(config, tiny_data, callbacks=[events.append]).run()
    epochs = [e for e in events if e["event"] == "epoch"]
    assert result.stopped_early and len(epochs) < 60
    for e in epochs:  # unless validation improves, the loop stops patience epochs after the best one
        assert e["stop_by"] == min(60, e["best_epoch"] + 2) and 0 <= e["eta_stop_s"] <= e["eta_s"]
    assert epochs[-1]["stop_by"] == epochs[-1]["epoch"] and epochs[-1]["eta_stop_s"] == 0
    # The base model's validation mAP, for the curves to measure training against.
    assert events[0]["event"] == "start"
    assert events[0]["baseline_val_mAP"] == result.metrics["baseline"]["validation"]["mAP"]


def test_a_running_job_gives_its_eta_as_a_range_up_to_all_epochs(tmp_home, tmp_path):
    summary = _summary(tmp_path, {"event": "start", "max_epochs": 100},
                       {"event": "epoch", "epoch": 12, "max_epochs": 100, "val_metric": 0.3, "val_name": "loss",
                        "val_mAP": 0.61234, "elapsed_s": 24.0, "eta_s": 176.0, "best_epoch": 10, "stop_by": 20,
                        "eta_stop_s": 16.0})
    row = job_row(_job(summary))
    assert row["eta"] == "0:16 (at most 2:56)"
    assert row["progress"] == "epoch 12/100 · stops at epoch 20 unless validation improves"
    assert row["class-retrieval mAP"] == "0.612 (validation)"  # the mAP, not the loss it stops on
    # A trainer of before: one estimate, no range.
    old = _summary(tmp_path, {"event": "epoch", "epoch": 3, "max_epochs": 10, "eta_s": 70, "val_name": "mAP",
                              "val_metric": 0.5})
    assert job_row(_job(old))["eta"] == "1:10" and job_row(_job(old))["class-retrieval mAP"] == "0.500 (validation)"


def test_a_finished_job_says_it_stopped_early_not_epoch_46_of_100(tmp_home, tmp_path):
    events = [{"event": "epoch", "epoch": 46, "max_epochs": 100, "best_epoch": 36, "stop_by": 46, "eta_s": 100.0},
              {"event": "done", "run_dir": "x", "summary": {"epochs": 46, "best_epoch": 36,
                                                            "trained": {"test": {"mAP": 0.70412}}}}]
    finished = _job(_summary(tmp_path, *events), SUCCEEDED)
    assert progress_stage(finished) == ("stopped early at epoch 46 (best 36)", 1.0)
    row = job_row(finished)
    assert row["progress"] == "stopped early at epoch 46 (best 36)" and row["eta"] == ""
    assert row["class-retrieval mAP"] == "0.704 (test)"
    all_epochs = _job(_summary(tmp_path, {"event": "epoch", "epoch": 5, "max_epochs": 5, "best_epoch": 4}), SUCCEEDED)
    assert progress_stage(all_epochs)[0] == "epoch 5/5 (best 4)"
    cancelled = _job(_summary(tmp_path, {"event": "epoch", "epoch": 7, "max_epochs": 100}), CANCELLED)
    assert progress_stage(cancelled)[0] == "cancelled at epoch 7/100"


def test_the_job_table_names_the_run_by_its_label(tmp_home, tmp_path):
    job = _job({})
    assert job_row(job)["run"] == f"residual · HPO d1 · 15-shot ({job.id.rsplit('-', 1)[1]})"
    run_dir = tmp_home / "runs" / job.id
    run_dir.mkdir(parents=True)
    (run_dir / "run.json").write_text(json.dumps({"run_id": job.id, "config": job.config}))
    set_run_name(run_dir, "my HPO run")
    done = replace(job, status=SUCCEEDED, run_dir=str(run_dir))
    assert job_row(done)["run"] == f"my HPO run ({job.id.rsplit('-', 1)[1]})"


def test_a_job_waiting_for_the_warm_ups_encoding_says_so_with_that_encodings_time_left(tmp_home, tmp_path):
    from bioviz.models.shared_encoding import EncodingProgress
    from trainer.runs import _EmbeddingProgress

    events = []
    report = _EmbeddingProgress([events.append], None, every_s=0.0)
    for done in (1_000, 1_234):  # as encode_shared tells a waiter: whom it waits for first, then the count
        report.encoding(EncodingProgress("minilm", done, 5_000, 95.0, 40.0, "the background warm-up", waiting=True))
        report(done, 5_000)
    assert events[-1] == {"event": "embedding", "done": 1_234, "total": 5_000, "waiting_for": "the background warm-up",
                          "eta_s": 40.0}, "the claimant's time left, not a rate of polled counts"
    row = job_row(_job(_summary(tmp_path, *events)))
    assert row["progress"] == "waiting for the warm-up's encoding: 1,234 / 5,000 names, about 40 s left"
    assert row["eta"] == "0:40"
    report.encoding(EncodingProgress("minilm", 5_000, 5_000, None, None, "a training job"))  # the claim is free
    report(5_000, 5_000)
    assert "waiting_for" not in events[-1] and events[-1]["eta_s"] == 0.0
    assert job_row(_job(_summary(tmp_path, *events)))["progress"] == "embedding 5,000/5,000 names"
