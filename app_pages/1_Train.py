"""Train: launch few-shot training runs in the background and follow them while exploring.

Jobs run as their own processes (trainer.jobs.runner); this page only submits, lists and reads
them, so a reload, another tab or an app restart shows the same jobs and their history.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import streamlit as st

from bioviz.errors import BiovizError
from bioviz.server_paths import shared_model
from bioviz.evaluation.run_list import run_row, stored_results_rows
from bioviz.evaluation.store import read_run_evaluations
from bioviz.evaluation.tables import results_table
from bioviz.figures import base_weight_choice, baseline_vs_trained, export_config, training_curves
from bioviz.models.runs import is_run_dir, list_runs, read_run
from bioviz.ontology.splits import DEFAULT_SHOTS
from trainer.base_mix import describe as describe_base_mix
from trainer.config import ENCODERS, TrainConfig
from trainer.job_options import encoder_defaults, estimate_sizes, field_help, hyperparameters
from trainer.jobs.progress import describe_config, job_row, progress_stage, queue_position, read_progress, tail
from trainer.jobs.queue import DEVICE_CHOICES, Worker, gpu_count
from trainer.jobs.store import ACTIVE, CANCELLED, QUEUED, RUNNING, STARTING, SUCCEEDED
from ui import state
from ui.executor_info import show_executor
from ui.markdown import md, md_code

NEIGHBOURS_PAGE = "app_pages/4_Neighbours.py"
NEIGHBOURS_FILE = Path(__file__).resolve().parent / "4_Neighbours.py"
ENCODER_HELP = {
    "residual": "residual head, f(u) = (enc(u) + u) / 2, triplet loss (few-shot biomedical names)",
    "dan": "deep averaging head, f(u) = enc(u), trained on the level's classes (higher-level semantics)",
    "cca": "CCA projection onto class prototypes, then a DAN head (conceptual grounding)",
    "hierarchical": "head trained with a multi-similarity loss over the hierarchy (HiPrBERT)",
    "definitions": "fine-tunes the base model on name-definition pairs (BioLORD)",
}
# The selected job. Streamlit drops the state of the "Selected job" widget when the user
# leaves the page while the job table refreshes itself, and later picks the newest job
# again, so the choice is kept under a key no widget owns and the widget is set from it.
SELECTED = "train_selected_job"
# Form widgets whose values survive a visit to another page (see ui.state.restore_form).
FORM_KEYS = ("train_all_names", "train_shots", "train_encoder", "train_start", "train_base", "train_init",
             "train_base_other", "train_device")
FORM_PREFIXES = ("train_hp_",)

state.restore_form("train")
if SELECTED not in st.session_state and st.query_params.get("job"):
    st.session_state[SELECTED] = st.query_params["job"]
view = state.current_view()
state.sync_url(job=st.session_state.get(SELECTED))

st.title("Train")
st.caption("Launch a training run on the selected ontology level; it runs in the background while you "
           "explore the other pages. Jobs wait in a queue (one per GPU, one on the CPU).")

# -- the form ----------------------------------------------------------------------------
helps = field_help()
left, middle, right = st.columns(3)
with left:
    all_names = st.toggle("Train on all names", key="train_all_names", help=helps["shots"])
    shots = None if all_names else int(st.number_input("Shots per class", min_value=1, max_value=1000,
                                                       value=DEFAULT_SHOTS, key="train_shots", help=helps["shots"]))
    encoder = st.selectbox("Encoder", ENCODERS, key="train_encoder", help=helps["encoder"],
                           format_func=lambda e: f"{e} — {ENCODER_HELP.get(e, '')}")
with middle:
    runs = list_runs()
    start = st.radio("Start from", ["Base model", "Earlier run (continual learning)"], key="train_start",
                     horizontal=True, help=helps["init"], disabled=not runs)
    init = None
    if start.startswith("Earlier") and runs:
        by_label = {r.label: str(r.path) for r in runs}
        state.forget_stale_choice("train_init", by_label)
        init = by_label[st.selectbox("Earlier run", list(by_label), key="train_init", help=helps["init"])]
        base = encoder_defaults(encoder)["base"]
    else:
        base_choices = {"minilm (bundled)": "minilm", **{f"run {r.label}": str(r.path) for r in runs}}
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


def _bounds(option, kind) -> dict:
    """``min_value`` / ``max_value`` of a number widget from the option's inclusive bounds."""
    bounds = {}
    if option.min is not None and not option.min_exclusive:
        bounds["min_value"] = kind(option.min)
    if option.max is not None and not option.max_exclusive:
        bounds["max_value"] = kind(option.max)
    return bounds


def option_widget(option, default, key: str):
    """The widget of one hyperparameter, chosen from its metadata; returns the value it gives."""
    if option.menu:
        # An "auto" value is resolved per encoder in the defaults shown; a field whose None
        # means "decided by the trainer" offers that word (e.g. base_weight: auto).
        choices = [*([option.none] if option.none else []), *(c for c in option.menu if c != "auto")]
        choice = st.selectbox(option.name, choices, key=key, help=option.help_text,
                              index=choices.index(option.none if default is None else default))
        return None if choice == option.none else choice
    if option.kind is bool:
        return st.checkbox(option.name, value=bool(default), key=key, help=option.help_text)
    if option.kind is float:
        return st.number_input(option.name, value=float(default), key=key, help=option.help_text, format="%g",
                               **_bounds(option, float))
    if default is None:  # optional integer (split_seed): empty = derived from another field
        return st.number_input(option.name, value=None, step=1, key=key, help=option.help_text,
                               **_bounds(option, int))
    return int(st.number_input(option.name, value=int(default), step=1, key=key, help=option.help_text,
                               **_bounds(option, int)))


defaults = encoder_defaults(encoder)
values: dict = {}
with st.expander("Hyperparameters (the papers' defaults for this encoder; base_weight auto: chosen on validation)"):
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
        cols = st.columns(5)
        cols[0].metric("Classes trained on", f"{sizes['classes']:,}")
        cols[1].metric("Training names", f"{sizes['train']:,}")
        cols[2].metric("Validation names", f"{sizes['validation']:,}")
        cols[3].metric("Test names", f"{sizes['test']:,}")
        cols[4].metric("Zero-shot names", f"{sizes['zero_shot']:,}")
        if sizes["short_classes"]:
            st.caption(f"{sizes['short_classes']} classes have fewer names than asked for; they give what they have.")
    except BiovizError as error:
        st.error(md(error))

if st.button("Launch training", type="primary", disabled=view is None or not base or not can_submit):
    try:
        # The selection's source passed the path policy with the view; a typed base model
        # (a path) must lie in a model folder too: the trainer itself accepts any path.
        config = {**state.selection().to_config(), "shots": shots, "encoder": encoder,
                  "base": shared_model(base).spec, "init": init, **{k: v for k, v in values.items() if v is not None}}
        with st.spinner("Checking the configuration…"):
            job = Worker().submit(config, device=device)
        st.session_state[SELECTED] = job.id
        st.success(md(f"Job {job.id} {'started' if job.status in (STARTING, RUNNING) else 'queued'}: "
                      f"{describe_config(job.config)}"))
    except BiovizError as error:
        st.error(md(error))


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


def _select() -> None:
    st.session_state[SELECTED] = st.session_state["train_job"]


def show_job(job, jobs) -> None:
    """Status, actions, live curves, final figures and log of one job."""
    st.markdown(f"**{md(job.id)}** · {md(describe_config(job.config))}")
    if job.status == QUEUED:
        st.info(f"Waiting in the queue (#{queue_position(jobs, job)}): it starts when a "
                f"{'GPU' if job.requested_device != 'cpu' and gpu_count() else 'CPU'} slot is free.")
    elif job.status in (STARTING, RUNNING):
        row = job_row(job)
        text, done = progress_stage(job)
        st.progress(min(1.0, done), text=md(text + (f" · ETA {row['eta']}" if job.progress.get("eta_s") else "")))
    elif job.status == SUCCEEDED:
        st.success(md(f"Finished in {job_row(job)['duration']}: run directory {job.run_dir}"))
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
    if job.status == SUCCEEDED and is_run_dir(job.run_dir) and NEIGHBOURS_FILE.exists():
        if actions[2].button("Open in views", type="primary", key=f"train_open_{job.id}",
                             help="Compare this run with its base model on the other pages"):
            st.session_state["model_b"] = job.run_dir
            st.session_state["model_a"] = job.config.get("init") or job.config.get("base", "minilm")
            st.switch_page(NEIGHBOURS_PAGE)

    title = f"Training curves · {describe_config(job.config)} · job {job.id}"
    caption = " · ".join(f"{k} {job.config[k]}" for k in ("lr", "batch_size", "epochs", "hidden", "margin", "seed")
                         if job.config.get(k) is not None)
    st.plotly_chart(training_curves(read_progress(job.progress_path), title, caption or None), width="stretch",
                    config=export_config(f"training-curves-{job.id}"), key=f"train_curves_{job.id}")
    if job.status == SUCCEEDED and is_run_dir(job.run_dir):
        run = read_run(job.run_dir)
        base = run.config.get("input_label") or run.config.get("input_model") or job.config.get("base", "base")
        metrics = run.metrics
        if isinstance(metrics.get("baseline"), dict) and isinstance(metrics.get("trained"), dict):
            fig = baseline_vs_trained(metrics["baseline"], metrics["trained"],
                                      f"Class retrieval · {base} vs run {run.run_id} · {describe_config(run.config)}",
                                      f"best epoch {metrics.get('best_epoch')} of {len(metrics.get('history', []))}"
                                      + (" (stopped early)" if metrics.get("stopped_early") else "")
                                      + (f" · {describe_base_mix(metrics.get('base_mix'))}"
                                         if metrics.get("base_mix") else ""),
                                      labels=(f"baseline ({base})", "trained"))
            st.plotly_chart(fig, width="stretch", config=export_config(f"baseline-vs-trained-{job.id}"),
                            key=f"train_scores_{job.id}")
        mixing = metrics.get("base_mix") or {}
        if len(mixing.get("candidates") or []) > 1:  # an automatic choice: show what it weighed
            fig = base_weight_choice(mixing, f"Base weight · run {run.run_id} · {describe_config(run.config)}",
                                     describe_base_mix(mixing))
            st.plotly_chart(fig, width="stretch", config=export_config(f"base-weight-{job.id}"),
                            key=f"train_base_weight_{job.id}")
        stored = read_run_evaluations(job.run_dir)
        if stored:
            st.markdown("**Evaluations stored with this run** (from the Evaluation page or `python -m bioviz eval`)")
            st.dataframe(pd.DataFrame(results_table(stored)).drop(columns=["key"]), hide_index=True,
                         width="stretch")
    with st.expander("Log", expanded=job.status not in (SUCCEEDED, QUEUED)):
        st.code(tail(job.log_path, 60) or "(empty)", language=None)


@st.fragment(run_every=2)
def jobs_panel() -> None:
    """The job table and the selected job; refreshes itself every two seconds."""
    st.subheader("Jobs")
    if message := st.session_state.pop("train_message", None):
        st.error(md(message))
    try:
        jobs = Worker().reconcile()[::-1]  # newest first; reconcile reaps dead jobs, starts queued ones
    except BiovizError as error:  # the fragment reruns on its own, outside the router's error handling
        st.error(md(error))
        return
    if not jobs:
        st.info("No training jobs yet: set the options above and launch one.")
        return
    st.dataframe(pd.DataFrame([job_row(j, jobs) for j in jobs]), hide_index=True, width="stretch")
    by_id = {j.id: j for j in jobs}
    if st.session_state.get(SELECTED) not in by_id:
        st.session_state[SELECTED] = jobs[0].id
    st.session_state["train_job"] = st.session_state[SELECTED]
    selected = st.selectbox("Selected job", list(by_id), key="train_job", on_change=_select,
                            format_func=lambda i: f"{i} · {by_id[i].status} · {describe_config(by_id[i].config)}")
    state.sync_url(job=selected)
    try:
        show_job(by_id[selected], jobs)
    except BiovizError as error:  # e.g. its run directory damaged since: the job list stays usable
        st.warning(md(f"job {selected}: {error}"))


jobs_panel()


# -- the run list --------------------------------------------------------------------------
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
    st.dataframe(table, hide_index=True, width="stretch")
    by_path = {str(r.path): r for r in found if not r.damaged}
    if not by_path:
        return
    chosen = st.selectbox("Run", list(by_path), key="train_run", format_func=lambda p: by_path[p].label)
    rows = stored_results_rows(chosen)
    if rows:
        st.markdown(f"**Evaluations stored with {md(by_path[chosen].run_id)}**")
        st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch")
    else:
        st.info("No evaluations stored with this run yet: evaluate it on the Evaluation page or with "
                f"{md_code(f'python -m bioviz eval --model {chosen} --source ... --task all')}.")


runs_panel()
