"""The Train page's job panel: the job table and the selected job (status, actions, figures, log).

What a job is (its description, the model it starts from, whether it resumes, which figures
it has) comes from its kind (:func:`trainer.jobs.kinds.kind_of`), never from its config's keys.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import streamlit as st

from bioviz.errors import BiovizError
from bioviz.evaluation.result import EvalResult
from bioviz.evaluation.store import read_run_evaluations
from bioviz.evaluation.tables import results_table
from bioviz.figures import base_weight_choice, baseline_vs_trained, export_config, training_curves
from bioviz.figures.pretraining import pretraining_curve
from bioviz.models.runs import is_run_dir, read_run
from trainer.base_mix import describe as describe_base_mix
from trainer.jobs.kinds import PRETRAIN, TRAIN, kind_of
from trainer.jobs.progress import (
    describe_config, eta_text, job_row, job_run_label, progress_stage, queue_position, read_progress, tail,
)
from trainer.jobs.queue import Worker, gpu_count
from trainer.jobs.store import ACTIVE, CANCELLED, QUEUED, RUNNING, STARTING, SUCCEEDED, Job, jobs_blocked_reason
from ui import state
from ui.markdown import md
from ui.train.polling import page_out_of_date, poll_interval
from ui.train.tables import score_columns

NEIGHBOURS_PAGE = "app_pages/4_Neighbours.py"
NEIGHBOURS_FILE = Path(__file__).resolve().parents[2] / NEIGHBOURS_PAGE
# The statuses of the jobs at the job panel's last look: a job that was active then and has
# finished since makes the whole page run again (its run joins the run list and the pickers).
SEEN_STATUSES = "train_seen_job_statuses"
# The selected job. Streamlit drops the state of the "Selected job" widget when the user
# leaves the page while the job table refreshes itself, and later picks a job again, so the
# choice is kept under a key no widget owns and the widget is set from it.
SELECTED = "train_selected_job"
# How many times the page itself has changed the selection (a launch, a resume). The widget's key
# carries it: a fragment rerun the browser asked for before it saw the page's new choice still
# carries the old choice, and under one key that stale value would fire the widget's on_change
# and select the older job again (a launch quickly after another showed the first, not the new one).
SELECTION_GENERATION = "train_selection_generation"
# Widths in pixels that add up to the main area at 1440 px with the sidebar open (about 980 px):
# left to the grid, the job id, the run name and the progress words push "base" out of the frame.
JOB_COLUMNS = {
    "job": st.column_config.TextColumn(width=135),
    "run": st.column_config.TextColumn(
        width=200, help="The run's readable name (rename it in the run list) and short id"),
    "status": st.column_config.TextColumn(width=75),
    "progress": st.column_config.TextColumn(width=170),
    "device": st.column_config.TextColumn(width=55),
    "duration": st.column_config.TextColumn(width=65),
    "class-retrieval mAP": st.column_config.TextColumn(
        width=130,
        help="Mean average precision of retrieving a name's own class among the training names: the trained "
             "run's test figure once finished, the latest validation figure while it trains"),
    "eta": st.column_config.TextColumn(
        "ETA", width=45, help="Time left if validation does not improve again (early stopping), and at most: all epochs"),
    "base": st.column_config.TextColumn(width=95, help="The model the run starts from"),
}


def jobs_blocked() -> str | None:
    """Why no job can be launched or listed here, in one line: BIOVIZ_HOME takes no writes; else None.

    The page says so once (this line, :func:`trainer.jobs.store.jobs_blocked_reason`'s words, as
    ``trainer jobs`` says them), disables Launch and leaves the job panel out, rather than
    showing the database's own error and a Launch button that fails when clicked.
    """
    reason = jobs_blocked_reason()
    return None if reason is None else f"{reason}. The runs already trained there are listed below."


def default_job(jobs: list[Job]) -> str:
    """The job shown when none is selected: the newest running one (its curves move), else the newest.

    ``jobs`` newest first. A job queued behind a running one would only say it waits.
    """
    running = [j for j in jobs if j.status in (STARTING, RUNNING)]
    return (running or jobs)[0].id


def _cancel(job_id: str) -> None:
    try:
        Worker().cancel(job_id, wait=False)  # the runner stops the trainer; the page stays responsive
    except BiovizError as error:
        st.session_state["train_message"] = str(error)


def _delete(job_id: str) -> None:
    try:
        Worker().delete(job_id, remove_run=bool(st.session_state.get("train_delete_run")))
        st.session_state.pop(SELECTED, None)
    except BiovizError as error:
        st.session_state["train_message"] = str(error)


def select_job(job_id: str) -> None:
    """Make ``job_id`` the selected job, as the page's own choice (after a launch or a resume).

    The selector gets a new key, so a value the browser sent before it drew this choice cannot undo it.
    """
    st.session_state[SELECTED] = job_id
    st.session_state[SELECTION_GENERATION] = st.session_state.get(SELECTION_GENERATION, 0) + 1


def job_selector_key() -> str:
    """The session key of the "Selected job" widget now (it changes with each choice the page makes)."""
    return f"train_job_{st.session_state.get(SELECTION_GENERATION, 0)}"


def _resume(job_id: str) -> None:
    try:
        select_job(Worker().resume(job_id).id)
    except BiovizError as error:
        st.session_state["train_message"] = str(error)


def _select(key: str) -> None:
    if key == job_selector_key():  # a widget of an older generation speaks for a choice since overruled
        st.session_state[SELECTED] = st.session_state[key]


def _log(job: Job) -> None:
    with st.expander("Log", expanded=job.status not in (SUCCEEDED, QUEUED)):
        st.code(tail(job.log_path, 60) or "(empty)", language=None)


def show_pretraining(job: Job) -> None:
    """A pretraining job's figures: its pairs and loss while it trains, validation before and after once done."""
    p = job.progress or {}
    cols = st.columns(4)
    if p.get("pairs") is not None:
        cols[0].metric("Training pairs", f"{p['pairs']:,}")
    if p.get("total_steps"):
        cols[1].metric("Steps", f"{p.get('step', 0):,}/{p['total_steps']:,}")
    if isinstance(p.get("loss"), (int, float)):
        cols[2].metric("Loss", f"{p['loss']:.3f}")
    if job.status == SUCCEEDED and is_run_dir(job.run_dir):
        validation = read_run(job.run_dir).metrics.get("validation") or {}
        before, after = validation.get("before") or {}, validation.get("after") or {}
        if isinstance(after.get("mrr"), (int, float)) and isinstance(before.get("mrr"), (int, float)):
            cols[3].metric("Validation MRR", f"{after['mrr']:.3f}", f"{after['mrr'] - before['mrr']:+.3f}",
                           help=f"Each of {after.get('pairs')} held-out pairs' anchor retrieving its own positive "
                                "among all validation positives, after vs before pretraining")
    caption = PRETRAIN.settings_caption(job.config)
    title = f"Pretraining loss · {job_run_label(job)} · {describe_config(job.config)}"
    st.plotly_chart(pretraining_curve(read_progress(job.progress_path), title, caption), width="stretch",
                    config=export_config(f"pretraining-loss-{job.id}"), key=f"train_pretraining_{job.id}")
    _log(job)


def _run_figures(job: Job) -> None:
    """A finished training run's figures: baseline vs trained, the base-weight choice, stored evaluations."""
    run = read_run(job.run_dir)
    trained_from = run.input
    base = (trained_from and (trained_from.label or trained_from.spec)) or kind_of(job.config).input_model(job.config)
    metrics = run.metrics
    if isinstance(metrics.get("baseline"), dict) and isinstance(metrics.get("trained"), dict):
        fig = baseline_vs_trained(metrics["baseline"], metrics["trained"],
                                  f"Class-retrieval mAP · {base} vs {run.label} · {describe_config(run.config)}",
                                  caption=(f"best epoch {metrics.get('best_epoch')} of "
                                           f"{len(metrics.get('history', []))}"
                                           + (" (stopped early)" if metrics.get("stopped_early") else "")
                                           + (f" · {describe_base_mix(metrics.get('base_mix'))}"
                                              if metrics.get("base_mix") else "")),
                                  labels=(f"baseline ({base})", "trained"))
        st.plotly_chart(fig, width="stretch", config=export_config(f"baseline-vs-trained-{job.id}"),
                        key=f"train_scores_{job.id}")
    mixing = metrics.get("base_mix") or {}
    if len(mixing.get("candidates") or []) > 1:  # an automatic choice: show what it weighed
        fig = base_weight_choice(mixing, f"Base weight · {run.label} · {describe_config(run.config)}",
                                 describe_base_mix(mixing))
        st.plotly_chart(fig, width="stretch", config=export_config(f"base-weight-{job.id}"),
                        key=f"train_base_weight_{job.id}")
    stored = read_run_evaluations(job.run_dir)
    if stored:
        st.markdown("**Evaluations stored with this run** (from the Evaluation page or `python -m bioviz eval`)")
        # stored as dicts on disk; the tables read typed results
        table = pd.DataFrame(results_table([EvalResult.from_dict(r) for r in stored])).drop(columns=["key"])
        st.dataframe(table, hide_index=True, width="stretch", column_config=score_columns(table))


def show_training(job: Job) -> None:
    """A training job's figures: its curves as it trains, then the run's figures once done."""
    title = f"Training curves · {job_run_label(job)} · {describe_config(job.config)}"
    caption = kind_of(job.config).settings_caption(job.config)
    st.plotly_chart(training_curves(read_progress(job.progress_path), title, caption), width="stretch",
                    config=export_config(f"training-curves-{job.id}"), key=f"train_curves_{job.id}")
    if job.status == SUCCEEDED and is_run_dir(job.run_dir):
        _run_figures(job)
    _log(job)


# Each kind's figures, by its name.
FIGURES = {TRAIN.name: show_training, PRETRAIN.name: show_pretraining}


def _status(job: Job, jobs: list[Job], label: str) -> None:
    if job.status == QUEUED:
        st.info(f"Waiting in the queue (#{queue_position(jobs, job)}): it starts when a "
                f"{'GPU' if job.requested_device != 'cpu' and gpu_count() else 'CPU'} slot is free.")
    elif job.status in (STARTING, RUNNING):
        text, done = progress_stage(job)
        eta = eta_text(job.progress or {})
        st.progress(min(1.0, done), text=md(text + (f" · ETA {eta}" if eta else "")))
    elif job.status == SUCCEEDED:
        row = job_row(job)
        st.success(md(f"Finished in {row['duration']} ({row['progress']}): {label}"))
    elif job.status == CANCELLED:
        st.warning(md(job.error or "cancelled"))
    else:
        st.error(md(f"{job.status}: {job.error}"))


def _actions(job: Job) -> None:
    kind = kind_of(job.config)
    actions = st.columns([1, 1, 2, 2])
    if job.status in ACTIVE:
        actions[0].button("Cancel", key=f"train_cancel_{job.id}", on_click=_cancel, args=(job.id,))
    else:
        actions[0].button("Delete", key=f"train_delete_{job.id}", on_click=_delete, args=(job.id,))
        actions[1].checkbox("with its run", key="train_delete_run", help="also delete the trained run directory")
    if kind.can_resume(job):
        actions[3].button("Resume", key=f"train_resume_{job.id}", on_click=_resume, args=(job.id,),
                          help="Continue this pretraining from its last checkpoint, as a new job")
    if job.status == SUCCEEDED and is_run_dir(job.run_dir) and NEIGHBOURS_FILE.exists():
        if actions[2].button("Open in views", type="primary", key=f"train_open_{job.id}",
                             help="Compare this run with its base model on the other pages"):
            st.session_state["model_b"] = job.run_dir
            st.session_state["model_a"] = kind.input_model(job.config)
            st.switch_page(NEIGHBOURS_PAGE)


def show_job(job: Job, jobs: list[Job]) -> None:
    """Status, actions, live curves, final figures and log of one job."""
    label = job_run_label(job)
    st.markdown(f"**{md(label)}** · job {md(job.id)} · {md(describe_config(job.config))}")
    _status(job, jobs, label)
    _actions(job)
    FIGURES[kind_of(job.config).name](job)


def jobs_panel() -> None:
    """The job table and the selected job; refreshes itself while a job is active (see :func:`show_jobs`)."""
    st.subheader("Jobs")
    if message := st.session_state.pop("train_message", None):
        st.error(md(message))
    try:
        jobs = Worker().reconcile()[::-1]  # newest first; reconcile reaps dead jobs, starts queued ones
    except BiovizError as error:  # the fragment reruns on its own, outside the router's error handling
        st.error(md(error))
        return
    previous = st.session_state.get(SEEN_STATUSES)
    st.session_state[SEEN_STATUSES] = {j.id: j.status for j in jobs}
    if page_out_of_date(previous, jobs):
        # The run list and the form's run pickers were drawn before this job ended or went away.
        st.rerun(scope="app")
    if not jobs:
        st.info("No training jobs yet: set the options above and launch one.")
        return
    st.dataframe(pd.DataFrame([job_row(j, jobs) for j in jobs]), hide_index=True, width="stretch",
                 column_config=JOB_COLUMNS)
    by_id = {j.id: j for j in jobs}
    if st.session_state.get(SELECTED) not in by_id:
        st.session_state[SELECTED] = default_job(jobs)
    key = job_selector_key()
    st.session_state[key] = st.session_state[SELECTED]
    selected = st.selectbox("Selected job", list(by_id), key=key, on_change=_select, args=(key,),
                            format_func=lambda i: f"{job_run_label(by_id[i])} · {by_id[i].status} · job {i}")
    state.sync_url(job=selected)
    try:
        show_job(by_id[selected], jobs)
    except BiovizError as error:  # e.g. its run directory damaged since: the job list stays usable
        st.warning(md(f"job {selected}: {error}"))


def show_jobs() -> None:
    """The job panel, as a fragment that re-runs every few seconds only while a job is queued or running.

    With every job finished the page goes idle (no timer, no redrawn charts); launching a
    job re-runs the page, which starts the timer again.
    """
    if jobs_blocked():
        return  # the page said why once (jobs_blocked); the job database cannot be opened here
    try:
        interval = poll_interval(Worker().store.list())
    except BiovizError:  # the panel itself says what is wrong
        interval = None
    st.fragment(jobs_panel, run_every=interval)()
