"""Train: launch few-shot training runs in the background and follow them while exploring.

Jobs run as their own processes (trainer.jobs.runner); this page only submits, lists and reads
them, so a reload, another tab or an app restart shows the same jobs and their history.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import streamlit as st

from bioviz.errors import BiovizError
from bioviz.evaluation.run_list import run_row, stored_results_rows
from bioviz.evaluation.store import read_run_evaluations
from bioviz.evaluation.tables import results_table
from bioviz.figures import base_weight_choice, baseline_vs_trained, export_config, training_curves
from bioviz.figures.pretraining import pretraining_curve
from bioviz.models.model_spec import ModelSpec, base_choices as bundled_bases
from bioviz.models.runs import NAME_MAX, distinct_labels, is_run_dir, list_runs, read_run, set_run_name
from bioviz.ontology.splits import DEFAULT_SHOTS
from trainer.base_mix import describe as describe_base_mix
from trainer.config import ENCODERS, OPTIONS, TrainConfig
from trainer.job_options import ENCODER_SUMMARIES, encoder_defaults, estimate_sizes, field_help, hyperparameters
from trainer.jobs.progress import (
    describe_config, eta_text, job_row, job_run_label, progress_stage, queue_position, read_progress, tail,
)
from trainer.jobs.pretrain_job import is_pretrain, resumable
from trainer.jobs.queue import DEVICE_CHOICES, Worker, gpu_count
from trainer.jobs.store import ACTIVE, CANCELLED, QUEUED, RUNNING, STARTING, SUCCEEDED
from ui import state
from ui.executor_info import show_executor
from ui.markdown import md, md_code
from ui.metric_row import metric_row
from ui.train_jobs import page_out_of_date, poll_interval
from ui.train_pretrain import KEYS as PRETRAIN_KEYS, pretrain_form
from ui.train_tables import score_columns

NEIGHBOURS_PAGE = "app_pages/4_Neighbours.py"
NEIGHBOURS_FILE = Path(__file__).resolve().parent / "4_Neighbours.py"
# The statuses of the jobs at the job panel's last look: a job that was active then and has
# finished since makes the whole page run again (its run joins the run list and the pickers).
SEEN_STATUSES = "train_seen_job_statuses"
# The settings named under a run's training curves, by their human titles.
CURVE_CAPTION_FIELDS = ("lr", "batch_size", "epochs", "patience", "hidden", "margin", "seed")
SHORT_CLASSES_SHOWN = 8  # classes named in the "fewer names than asked for" line; the rest counted
# The selected job. Streamlit drops the state of the "Selected job" widget when the user
# leaves the page while the job table refreshes itself, and later picks the newest job
# again, so the choice is kept under a key no widget owns and the widget is set from it.
SELECTED = "train_selected_job"
# Form widgets whose values survive a visit to another page (see ui.state.restore_form).
FORM_KEYS = ("train_mode", "train_all_names", "train_shots", "train_encoder", "train_start", "train_base",
             "train_init", "train_base_other", "train_device")
FORM_PREFIXES = ("train_hp_",)

state.restore_form("train")
# Widgets get their defaults through the session, never both a default and a kept value
# (Streamlit warns about a widget "created with a default value but also set via Session State").
st.session_state.setdefault("train_shots", DEFAULT_SHOTS)
if SELECTED not in st.session_state and st.query_params.get("job"):
    st.session_state[SELECTED] = st.query_params["job"]
view = state.current_view()
state.sync_url(job=st.session_state.get(SELECTED))

st.title("Train")
st.caption("Launch a training run on the selected ontology level; it runs in the background while you "
           "explore the other pages. Jobs wait in a queue (one per GPU, one on the CPU).")

# -- the form ----------------------------------------------------------------------------
MODES = ("Few-shot run on this level", "Pretrain a base model")
st.radio("What to train", MODES, key="train_mode", horizontal=True,
         help="A few-shot run trains on a few names per class of the level selected in the sidebar; "
              "pretraining turns a base model into a biomedical one on whole ontologies (synonyms, "
              "definitions, hierarchy) and gives a model every page can use, and few-shot runs can start from.")


def _bounds(option, kind) -> dict:
    """``min_value`` / ``max_value`` of a number widget from the option's inclusive bounds."""
    bounds = {}
    if option.min is not None and not option.min_exclusive:
        bounds["min_value"] = kind(option.min)
    if option.max is not None and not option.max_exclusive:
        bounds["max_value"] = kind(option.max)
    return bounds


def option_widget(option, default, key: str):
    """The widget of one hyperparameter, chosen from its metadata; returns the value it gives.

    Its label is the option's human title; its help says what it does and the config field
    it sets (the name ``--config`` files and the command line use). The default goes into the
    session before the widget is drawn, never as the widget's own default as well.
    """
    label, help_text = option.title, f"{option.help_text} (config field `{option.name}`)"
    if option.menu:
        # An "auto" value is resolved per encoder in the defaults shown; a field whose None
        # means "decided by the trainer" offers that word (e.g. base_weight: auto).
        choices = [*([option.none] if option.none else []), *(c for c in option.menu if c != "auto")]
        st.session_state.setdefault(key, option.none if default is None else default)
        choice = st.selectbox(label, choices, key=key, help=help_text)
        return None if choice == option.none else choice
    if option.kind is bool:
        st.session_state.setdefault(key, bool(default))
        return st.checkbox(label, key=key, help=help_text)
    if option.kind is float:
        st.session_state.setdefault(key, float(default))
        return st.number_input(label, key=key, help=help_text, format="%g", **_bounds(option, float))
    if default is None:  # optional integer (split_seed): empty = derived from another field
        return st.number_input(label, value=None, step=1, key=key, help=help_text, **_bounds(option, int))
    st.session_state.setdefault(key, int(default))
    return int(st.number_input(label, step=1, key=key, help=help_text, **_bounds(option, int)))


def few_shot_form() -> None:
    """The few-shot form: shots, encoder, start, device, the hyperparameters, the split estimate, Launch."""
    helps = field_help()
    left, middle, right = st.columns(3)
    with left:
        all_names = st.toggle("Train on all names", key="train_all_names", help=helps["shots"])
        shots = None if all_names else int(st.number_input("Shots per class", min_value=1, max_value=1000,
                                                           key="train_shots", help=helps["shots"]))
        encoder = st.selectbox("Encoder", ENCODERS, key="train_encoder",
                               help="\n".join(f"- **{e}**: {text}" for e, text in ENCODER_SUMMARIES.items()))
        st.caption(ENCODER_SUMMARIES.get(encoder, ""))
    with middle:
        runs = list_runs()
        start = st.radio("Start from", ["Base model", "Earlier run (continual learning)"], key="train_start",
                         horizontal=True, help=helps["init"], disabled=not runs)
        init = None
        labels = distinct_labels(runs)
        if start.startswith("Earlier") and runs:
            by_label = {labels[r.path]: str(r.path) for r in runs}
            state.forget_stale_choice("train_init", by_label)
            init = by_label[st.selectbox("Earlier run", list(by_label), key="train_init", help=helps["init"])]
            base = encoder_defaults(encoder)["base"]
        else:
            base_choices = {**bundled_bases(), **{f"run {labels[r.path]}": str(r.path) for r in runs}}
            state.forget_stale_choice("train_base", [*base_choices, "other…"])
            base_label = st.selectbox("Base model", [*base_choices, "other…"], key="train_base", help=helps["base"])
            base = base_choices.get(base_label) or st.text_input(
                "Sentence-transformers directory or hub id", key="train_base_other",
                placeholder="FremyCompany/BioLORD-2023").strip()
    with right:
        gpus = gpu_count()
        device = st.selectbox("Device", DEVICE_CHOICES, key="train_device",
                              help=f"auto = a GPU when present, else the CPU ({gpus} CUDA devices here)")
        can_submit = show_executor()  # this machine, or the Ray cluster (one error line when unreachable)

    defaults = encoder_defaults(encoder)
    values: dict = {}
    with st.expander("Hyperparameters (the papers' defaults for this encoder; base weight auto: chosen on validation)"):
        columns = st.columns(4)
        shown = [o for o in hyperparameters(encoder) if o.name != "shots"]
        for i, option in enumerate(shown):
            key = f"train_hp_{encoder}_{option.name}" if option.per_encoder else f"train_hp_{option.name}"
            with columns[i % 4]:
                values[option.name] = option_widget(option, defaults.get(option.name, option.default), key)

    state.keep_form("train", FORM_KEYS, FORM_PREFIXES)

    if view is not None:
        # The split the job will draw (its seed: split_seed, else seed), as the trainer derives it.
        split = TrainConfig(source=state.selection().source, shots=shots, **values).split
        try:
            sizes = estimate_sizes(view, split)
            metric_row([("Classes trained on", f"{sizes['classes']:,}"), ("Training names", f"{sizes['train']:,}"),
                        ("Validation names", f"{sizes['validation']:,}"), ("Test names", f"{sizes['test']:,}"),
                        ("Zero-shot names", f"{sizes['zero_shot']:,}")])
            if short := sizes["short_class_names"]:
                named = ", ".join(f"{name} ({n} names)" for name, n in short[:SHORT_CLASSES_SHOWN])
                more = f" and {len(short) - SHORT_CLASSES_SHOWN} more" if len(short) > SHORT_CLASSES_SHOWN else ""
                which = "1 class has" if len(short) == 1 else f"{len(short)} classes have"
                gives = "gives what it has" if len(short) == 1 else "give what they have"
                st.caption(md(f"{which} fewer names than asked for and {gives}: {named}{more}."))
        except BiovizError as error:
            st.error(md(error))

    if st.button("Launch training", type="primary", disabled=view is None or not base or not can_submit):
        try:
            # The selection's source passed the path policy with the view; a typed base model
            # (a path) must lie in a model folder too: the trainer itself accepts any path.
            config = {**state.selection().to_config(), "shots": shots, "encoder": encoder,
                      "base": ModelSpec.shared(base).spec, "init": init,
                      **{k: v for k, v in values.items() if v is not None}}
            with st.spinner("Checking the configuration…"):
                job = Worker().submit(config, device=device)
            st.session_state[SELECTED] = job.id
            st.success(md(f"Job {job.id} {'started' if job.status in (STARTING, RUNNING) else 'queued'}: "
                          f"{describe_config(job.config)}"))
        except BiovizError as error:
            st.error(md(error))


def pretraining_form() -> None:
    """The "Pretrain a base model" form (ui.train_pretrain), with the device and the executor beside it."""
    runs = list_runs()
    labels = distinct_labels(runs)
    left, right = st.columns(2)
    with left:
        device = st.selectbox("Device", DEVICE_CHOICES, key="train_device",
                              help=f"auto = a GPU when present, else the CPU ({gpu_count()} CUDA devices here)")
    with right:
        can_submit = show_executor()
    job = pretrain_form({labels[r.path]: str(r.path) for r in runs}, device, can_submit)
    if job is not None:
        st.session_state[SELECTED] = job.id
    state.keep_form("train", ("train_mode", "train_device", *PRETRAIN_KEYS))


if st.session_state["train_mode"] == MODES[1]:
    pretraining_form()
else:
    few_shot_form()


# -- the jobs ----------------------------------------------------------------------------
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


def _resume(job_id: str) -> None:
    try:
        st.session_state[SELECTED] = Worker().resume(job_id).id
    except BiovizError as error:
        st.session_state["train_message"] = str(error)


def show_pretraining(job) -> None:
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
    config = job.config
    caption = (f"batch {config.get('batch_size')} · lr {config.get('lr'):g} · {config.get('epochs')} epoch(s) · "
               f"seed {config.get('seed')}" if isinstance(config.get("lr"), (int, float)) else None)
    title = f"Pretraining loss · {job_run_label(job)} · {describe_config(config)}"
    st.plotly_chart(pretraining_curve(read_progress(job.progress_path), title, caption), width="stretch",
                    config=export_config(f"pretraining-loss-{job.id}"), key=f"train_pretraining_{job.id}")
    with st.expander("Log", expanded=job.status not in (SUCCEEDED, QUEUED)):
        st.code(tail(job.log_path, 60) or "(empty)", language=None)


def _select() -> None:
    st.session_state[SELECTED] = st.session_state["train_job"]


def show_job(job, jobs) -> None:
    """Status, actions, live curves, final figures and log of one job."""
    label = job_run_label(job)
    st.markdown(f"**{md(label)}** · job {md(job.id)} · {md(describe_config(job.config))}")
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

    actions = st.columns([1, 1, 2, 2])
    if job.status in ACTIVE:
        actions[0].button("Cancel", key=f"train_cancel_{job.id}", on_click=_cancel, args=(job.id,))
    else:
        actions[0].button("Delete", key=f"train_delete_{job.id}", on_click=_delete, args=(job.id,))
        actions[1].checkbox("with its run", key="train_delete_run", help="also delete the trained run directory")
    if is_pretrain(job.config) and job.finished and job.status != SUCCEEDED and resumable(job.config_path):
        actions[3].button("Resume", key=f"train_resume_{job.id}", on_click=_resume, args=(job.id,),
                          help="Continue this pretraining from its last checkpoint, as a new job")
    if job.status == SUCCEEDED and is_run_dir(job.run_dir) and NEIGHBOURS_FILE.exists():
        if actions[2].button("Open in views", type="primary", key=f"train_open_{job.id}",
                             help="Compare this run with its base model on the other pages"):
            st.session_state["model_b"] = job.run_dir
            st.session_state["model_a"] = job.config.get("init") or job.config.get("base", "minilm")
            st.switch_page(NEIGHBOURS_PAGE)

    if is_pretrain(job.config):
        show_pretraining(job)
        return
    title = f"Training curves · {label} · {describe_config(job.config)}"
    caption = " · ".join(f"{OPTIONS[k].title.lower()} {job.config[k]:g}" for k in CURVE_CAPTION_FIELDS
                         if isinstance(job.config.get(k), (int, float)) and not isinstance(job.config[k], bool))
    st.plotly_chart(training_curves(read_progress(job.progress_path), title, caption or None), width="stretch",
                    config=export_config(f"training-curves-{job.id}"), key=f"train_curves_{job.id}")
    if job.status == SUCCEEDED and is_run_dir(job.run_dir):
        run = read_run(job.run_dir)
        base = run.config.get("input_label") or run.config.get("input_model") or job.config.get("base", "base")
        metrics = run.metrics
        if isinstance(metrics.get("baseline"), dict) and isinstance(metrics.get("trained"), dict):
            fig = baseline_vs_trained(metrics["baseline"], metrics["trained"],
                                      f"Class-retrieval mAP · {base} vs {run.label} · {describe_config(run.config)}",
                                      f"best epoch {metrics.get('best_epoch')} of {len(metrics.get('history', []))}"
                                      + (" (stopped early)" if metrics.get("stopped_early") else "")
                                      + (f" · {describe_base_mix(metrics.get('base_mix'))}"
                                         if metrics.get("base_mix") else ""),
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
            table = pd.DataFrame(results_table(stored)).drop(columns=["key"])
            st.dataframe(table, hide_index=True, width="stretch", column_config=score_columns(table))
    with st.expander("Log", expanded=job.status not in (SUCCEEDED, QUEUED)):
        st.code(tail(job.log_path, 60) or "(empty)", language=None)


JOB_COLUMNS = {
    "class-retrieval mAP": st.column_config.TextColumn(
        help="Mean average precision of retrieving a name's own class among the training names: the trained "
             "run's test figure once finished, the latest validation figure while it trains"),
    "eta": st.column_config.TextColumn(
        "ETA", help="Time left if validation does not improve again (early stopping), and at most: all epochs"),
    "run": st.column_config.TextColumn(help="The run's readable name (rename it in the run list) and short id"),
}


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
        st.session_state[SELECTED] = jobs[0].id
    st.session_state["train_job"] = st.session_state[SELECTED]
    selected = st.selectbox("Selected job", list(by_id), key="train_job", on_change=_select,
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
    try:
        interval = poll_interval(Worker().store.list())
    except BiovizError:  # the panel itself says what is wrong
        interval = None
    st.fragment(jobs_panel, run_every=interval)()


show_jobs()


# -- the run list --------------------------------------------------------------------------
def _rename(path: str, key: str) -> None:
    """Give the run the name typed under ``key`` (blank: its default name); a bad name is refused in one line."""
    try:
        st.session_state[key] = set_run_name(path, st.session_state[key]).name
    except BiovizError as error:
        st.session_state["train_run_message"] = str(error)
        st.session_state[key] = read_run(path).name  # the field shows the name the run still has


def rename_widget(run) -> None:
    """The run's name, editable: a text field that renames the run when changed, its id beside it."""
    key = f"train_run_name_{run.path.name}"
    st.session_state.setdefault(key, run.name)
    left, right = st.columns([3, 2])
    left.text_input("Name", key=key, on_change=_rename, args=(str(run.path), key), max_chars=NAME_MAX,
                    help="The name shown for this run in tables, legends, titles and exports; clear it to go back "
                         f"to the default name ({run.default_name}).")
    right.markdown(f"run id  \n{md_code(run.run_id)}")
    if message := st.session_state.pop("train_run_message", None):
        st.error(md(message))


def runs_panel() -> None:
    """Every complete run under BIOVIZ_HOME/runs (from jobs or the command line) and what is stored with it."""
    st.subheader("Runs")
    found = list_runs(include_damaged=True)  # a damaged run is listed with its reason, never fatal
    if not found:
        st.info("No complete runs yet: a finished job, or `python -m trainer train --out BIOVIZ_HOME/runs/NAME`, "
                "adds one here.")
        return
    st.caption("Every complete run directory under BIOVIZ_HOME/runs, newest first; test mAP is the trainer's own "
               "class-retrieval figure on its held-out test names.")
    table = pd.DataFrame([run_row(r) for r in found]).drop(columns=["path"])
    if table["damaged"].isna().all():
        table = table.drop(columns=["damaged"])
    st.dataframe(table, hide_index=True, width="stretch", column_config=score_columns(table))
    by_path = {str(r.path): r for r in found if not r.damaged}
    if not by_path:
        return
    labels = distinct_labels(by_path.values())
    chosen = st.selectbox("Run", list(by_path), key="train_run",
                          format_func=lambda p: labels[by_path[p].path])
    rename_widget(by_path[chosen])
    rows = stored_results_rows(chosen)
    if rows:
        st.markdown(f"**Evaluations stored with {md(by_path[chosen].label)}**")
        frame = pd.DataFrame(rows)
        st.dataframe(frame, hide_index=True, width="stretch", column_config=score_columns(frame))
    else:
        st.info("No evaluations stored with this run yet: evaluate it on the Evaluation page or with "
                f"{md_code(f'python -m bioviz eval --model {chosen} --source ... --task all')}.")


runs_panel()
