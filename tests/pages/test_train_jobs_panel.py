"""The Train page's job panel: it polls only while a job is active, and a job that finishes
refreshes the whole page (the run list, the run pickers) once (issue 14, bugs 1 and 3)."""

from __future__ import annotations

import json

import pytest
import streamlit
from streamlit.runtime.forward_msg_queue import ForwardMsgQueue

from tests.pages.test_train import PAGE, STANDIN, table
from tests.support.polling import wait_for
from trainer.jobs.queue import Worker
from trainer.jobs.store import RUNNING, SUCCEEDED
from ui.train.polling import POLL_S, newly_finished, page_out_of_date, poll_interval


def _record_timers(monkeypatch) -> list[float]:
    """The intervals of the fragment timers the page asks the browser for (``run_every``)."""
    timers: list[float] = []
    enqueue = ForwardMsgQueue.enqueue

    def recording(queue, msg):
        if msg.HasField("auto_rerun"):
            timers.append(msg.auto_rerun.interval)
        return enqueue(queue, msg)

    monkeypatch.setattr(ForwardMsgQueue, "enqueue", recording)
    return timers


def _record_reruns(monkeypatch) -> list[str]:
    """The scopes of the page's ``st.rerun`` calls (each still reruns)."""
    scopes: list[str] = []
    rerun = streamlit.rerun

    def recording(*, scope="app"):
        scopes.append(scope)
        rerun(scope=scope)

    monkeypatch.setattr(streamlit, "rerun", recording)
    return scopes


def test_the_panel_polls_while_a_job_runs_and_goes_idle_when_all_have_finished(tmp_home, data_dir, open_app,
                                                                                monkeypatch, tmp_path):
    worker = Worker(module=STANDIN)
    gate = tmp_path / "go"
    job = worker.submit({"source": "mini", "epochs": 1, "wait_file": str(gate)}, validate=False)
    wait_for(worker, job.id, lambda j: j.status == RUNNING)
    timers = _record_timers(monkeypatch)
    at = open_app(PAGE, {"source": str(data_dir / "mini.obo")}, timeout=120).run()
    assert not at.exception and timers and set(timers) == {POLL_S}
    curves = json.loads(at.get("plotly_chart")[0].proto.spec)  # titled by the run's label, settings in words
    title = curves["layout"]["title"]["text"].replace("<br>", " ")
    assert title.startswith(f"Training curves · {table(at)[0]['run']} · ")
    assert any("maximum epochs 1" in a["text"] for a in curves["layout"]["annotations"])
    gate.touch()
    wait_for(worker, job.id, lambda j: j.finished)
    timers.clear()
    at.run()
    assert table(at)[0]["status"] == SUCCEEDED
    assert timers == []  # nothing can change: no timer, the page is idle


def test_a_job_that_finishes_refreshes_the_run_list_once(tmp_home, data_dir, open_app, monkeypatch, tmp_path):
    worker = Worker(module=STANDIN)
    gate = tmp_path / "go"
    job = worker.submit({"source": "mini", "epochs": 1, "wait_file": str(gate)}, validate=False)
    wait_for(worker, job.id, lambda j: j.status == RUNNING)
    at = open_app(PAGE, {"source": str(data_dir / "mini.obo")}, timeout=120).run()
    assert any("No complete runs yet" in i.value for i in at.info)
    reruns = _record_reruns(monkeypatch)
    gate.touch()
    wait_for(worker, job.id, lambda j: j.finished)
    at.run()  # what the panel's timer does: it sees the job finished and reruns the whole page
    assert reruns == ["app"]
    assert not any("No complete runs yet" in i.value for i in at.info)
    assert job.id in set(at.dataframe[-1].value["run"])  # the run list
    at.run()
    assert reruns == ["app"]  # once, not on every look


def test_poll_interval_and_newly_finished(tmp_home):
    from dataclasses import replace

    from trainer.jobs.store import CANCELLED, FAILED, QUEUED, JobStore

    job = JobStore().create({"source": "mini"})
    assert poll_interval([job]) == POLL_S  # queued: it will start
    assert poll_interval([replace(job, status=RUNNING)]) == POLL_S
    assert poll_interval([replace(job, status=SUCCEEDED)]) is None
    assert newly_finished({job.id: QUEUED}, [replace(job, status=CANCELLED)]) == [job.id]
    assert newly_finished({job.id: SUCCEEDED}, [replace(job, status=SUCCEEDED)]) == []
    assert newly_finished(None, [replace(job, status=SUCCEEDED)]) == []  # first look: drawn fresh anyway
    # A job deleted from the panel (its run perhaps with it) leaves the run list out of date too.
    assert page_out_of_date({job.id: SUCCEEDED}, [])
    assert page_out_of_date({job.id: RUNNING}, [replace(job, status=SUCCEEDED)])
    assert not page_out_of_date({job.id: RUNNING}, [replace(job, status=FAILED)])  # no run: nothing else changed
    assert not page_out_of_date({job.id: QUEUED}, [replace(job, status=CANCELLED)])
    assert not page_out_of_date({}, [job])
    assert not page_out_of_date({job.id: SUCCEEDED}, [replace(job, status=SUCCEEDED)])


@pytest.mark.slow  # over 5 s in a full run (CI lists the times)
def test_a_running_job_shows_when_early_stopping_ends_it_and_an_eta_range(tmp_home, data_dir, open_app, tmp_path):
    worker = Worker(module=STANDIN)
    gate = tmp_path / "go"
    job = worker.submit({"source": "mini", "epochs": 8, "patience": 2, "hold_at": 2, "epoch_s": 1.0,
                         "wait_file": str(gate)}, validate=False)
    wait_for(worker, job.id, lambda j: j.progress.get("epoch") == 2)
    at = open_app(PAGE, {"source": str(data_dir / "mini.obo")}, timeout=120).run()
    [bar] = at.get("progress")
    text = bar.proto.text
    assert text.startswith("epoch 2/8 · stops at epoch 4 unless validation improves · ETA ")
    assert "(at most " in text  # never all 8 epochs as if they were certain
    assert table(at)[0]["eta"] == text.split("· ETA ")[1]
    gate.touch()
    done = wait_for(worker, job.id, lambda j: j.finished)
    at.run()
    assert done.status == SUCCEEDED and table(at)[0]["progress"] == "epoch 8/8 (best 8)"
