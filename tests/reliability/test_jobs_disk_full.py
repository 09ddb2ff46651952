"""A job whose disk fills up fails with the reason, and its progress file never holds half an event (issue 32, 4).

Before: one failed progress write ended training with a traceback, the runner's own log line
then failed too and the job was recorded as ``interrupted`` ("the job's runner disappeared");
``progress.jsonl`` ended in half a line, onto which the next event was appended.
"""

from __future__ import annotations

import errno
import json
import os
from types import SimpleNamespace

import pytest

from bioviz import paths
from trainer.cli_common import EXIT_WRITE_REFUSED, run_cancellable
from trainer.jobs import queue, runner
from trainer.jobs.progress import read_progress
from trainer.jobs.store import FAILED
from trainer.train_command import ProgressWriter


def test_a_refused_progress_write_leaves_no_half_line_and_the_next_event_survives(tmp_path, monkeypatch):
    progress = tmp_path / "progress.jsonl"
    writer = ProgressWriter(str(progress))
    writer({"event": "start", "max_epochs": 3})
    real_write = os.write

    def half_then_full(fd, data):  # the disk fills up in the middle of the line
        real_write(fd, data[: len(data) // 2])
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(paths.os, "write", half_then_full)
    with pytest.raises(OSError) as refused:
        writer({"event": "epoch", "epoch": 1, "max_epochs": 3, "losses": {}, "val_name": "map",
                "val_metric": 0.5, "eta_s": 1.0})
    assert refused.value.errno == errno.ENOSPC and refused.value.filename == str(progress)
    assert progress.read_text().endswith("\n")  # cut back: no half event
    monkeypatch.setattr(paths.os, "write", real_write)  # room again
    writer({"event": "done"})
    assert [e["event"] for e in read_progress(progress)] == ["start", "done"]


def test_a_reader_trusts_only_lines_that_end_in_a_newline(tmp_path):
    progress = tmp_path / "progress.jsonl"
    progress.write_text(json.dumps({"event": "start"}) + "\n" + '{"event": "epoch", "epoch": 12}'[:-1])
    assert read_progress(progress) == [{"event": "start"}]
    progress.write_text(json.dumps({"event": "start"}) + "\n7")  # half of "72": valid JSON, never trusted
    assert read_progress(progress) == [{"event": "start"}]


def test_a_training_the_disk_refuses_ends_with_the_write_refused_code_and_one_event():
    events = []

    def work(cancel):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), "/home/runs/.x.partial/model.safetensors")

    code, summary = run_cancellable(work, events.append)
    assert (code, summary) == (EXIT_WRITE_REFUSED, None)
    assert events == [{"event": "error", "message": "cannot write: No space left on device "
                                                    "(/home/runs/.x.partial/model.safetensors)"}]
    code, _ = run_cancellable(work, lambda event: (_ for _ in ()).throw(OSError(errno.ENOSPC, "full")))
    assert code == EXIT_WRITE_REFUSED  # the event did not fit either: still the code, no traceback


def test_the_job_fails_with_no_space_left_on_device_when_even_its_error_event_did_not_fit(tmp_path, monkeypatch):
    (tmp_path / "progress.jsonl").write_text(json.dumps({"event": "start"}) + "\n")
    job = SimpleNamespace(progress_path=str(tmp_path / "progress.jsonl"), log_path=str(tmp_path / "log.txt"),
                          run_complete=False)
    monkeypatch.setattr(queue.os, "statvfs", lambda path: SimpleNamespace(f_bavail=0))
    assert queue.outcome(job, EXIT_WRITE_REFUSED) == (
        FAILED, "the trainer could not write its files: no space left on device")


def test_the_runners_own_log_line_on_a_full_disk_is_lost_not_raised():
    class FullLog:
        def write(self, data):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    runner._log_line(FullLog(), "[job x] failed: the trainer could not write its files")
