"""The Train page's *Few-shot run on this level* form: shots, encoder, start, device, the
hyperparameters (one generated widget per :class:`~trainer.config.TrainConfig` option), the
split estimate and Launch."""

from __future__ import annotations

import streamlit as st

from bioviz.errors import BiovizError
from bioviz.models.model_spec import ModelSpec, base_choices as bundled_bases
from bioviz.models.runs import distinct_labels, list_runs
from bioviz.ontology.levels import LevelView
from trainer.config import ENCODERS, TrainConfig
from trainer.job_options import ENCODER_SUMMARIES, encoder_defaults, estimate_sizes, field_help, hyperparameters
from trainer.jobs.progress import describe_config
from trainer.jobs.queue import DEVICE_CHOICES, Worker, gpu_count
from trainer.jobs.store import RUNNING, STARTING
from ui import state
from ui.markdown import md
from ui.metric_row import metric_row
from ui.train.executor_info import show_executor
from ui.train.job_panel import jobs_blocked, select_job
from ui.train.option_widgets import option_widget

# Form widgets whose values survive a visit to another page (see ui.state.restore_form).
FORM_KEYS = ("train_mode", "train_all_names", "train_shots", "train_encoder", "train_start", "train_base",
             "train_init", "train_base_other", "train_device")
FORM_PREFIXES = ("train_hp_",)
SHORT_CLASSES_SHOWN = 8  # classes named in the "fewer names than asked for" line; the rest counted


def _start_from(encoder: str, helps: dict) -> tuple[str, str | None]:
    """The start widgets: ``(base, init)``: a base model (bundled, a run, a typed one) or an earlier run."""
    runs = list_runs()
    start = st.radio("Start from", ["Base model", "Earlier run (continual learning)"], key="train_start",
                     horizontal=True, help=helps["init"], disabled=not runs)
    labels = distinct_labels(runs)
    if start.startswith("Earlier") and runs:
        by_label = {labels[r.path]: str(r.path) for r in runs}
        state.forget_stale_choice("train_init", by_label)
        init = by_label[st.selectbox("Earlier run", list(by_label), key="train_init", help=helps["init"])]
        return encoder_defaults(encoder)["base"], init
    base_choices = {**bundled_bases(), **{f"run {labels[r.path]}": str(r.path) for r in runs}}
    state.forget_stale_choice("train_base", [*base_choices, "other…"])
    base_label = st.selectbox("Base model", [*base_choices, "other…"], key="train_base", help=helps["base"])
    base = base_choices.get(base_label) or st.text_input(
        "Sentence-transformers directory or hub id", key="train_base_other",
        placeholder="FremyCompany/BioLORD-2023").strip()
    return base, None


def _hyperparameters(encoder: str) -> dict:
    """The encoder's hyperparameter widgets, four to a row, starting at the papers' defaults."""
    defaults = encoder_defaults(encoder)
    values: dict = {}
    with st.expander("Hyperparameters (the papers' defaults for this encoder; base weight auto: chosen on validation)"):
        columns = st.columns(4)
        shown = [o for o in hyperparameters(encoder) if o.name != "shots"]
        for i, option in enumerate(shown):
            key = f"train_hp_{encoder}_{option.name}" if option.per_encoder else f"train_hp_{option.name}"
            with columns[i % 4]:
                values[option.name] = option_widget(option, defaults.get(option.name, option.default), key)
    return values


def _split_estimate(view: LevelView, shots: int | None, values: dict) -> None:
    """The sizes of the split the job will draw (its seed: split_seed, else seed), as the trainer derives it."""
    split = TrainConfig(source=state.selection().source, shots=shots, **values).split
    try:
        sizes = estimate_sizes(view, split)
    except BiovizError as error:
        st.error(md(error))
        return
    metric_row([("Classes trained on", f"{sizes['classes']:,}"), ("Training names", f"{sizes['train']:,}"),
                ("Validation names", f"{sizes['validation']:,}"), ("Test names", f"{sizes['test']:,}"),
                ("Zero-shot names", f"{sizes['zero_shot']:,}")])
    if short := sizes["short_class_names"]:
        named = ", ".join(f"{name} ({n} names)" for name, n in short[:SHORT_CLASSES_SHOWN])
        more = f" and {len(short) - SHORT_CLASSES_SHOWN} more" if len(short) > SHORT_CLASSES_SHOWN else ""
        which = "1 class has" if len(short) == 1 else f"{len(short)} classes have"
        gives = "gives what it has" if len(short) == 1 else "give what they have"
        st.caption(md(f"{which} fewer names than asked for and {gives}: {named}{more}."))


def few_shot_form(view: LevelView | None) -> None:
    """Draw the few-shot form on the selected level's ``view`` (None: it cannot be loaded); Launch queues a job."""
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
        base, init = _start_from(encoder, helps)
    with right:
        device = st.selectbox("Device", DEVICE_CHOICES, key="train_device",
                              help=f"auto = a GPU when present, else the CPU ({gpu_count()} CUDA devices here)")
        can_submit = show_executor()  # this machine, or the Ray cluster (one error line when unreachable)
        can_submit = can_submit and not jobs_blocked()  # a read-only home: the page said why, once
    values = _hyperparameters(encoder)
    state.keep_form("train", FORM_KEYS, FORM_PREFIXES)
    if view is not None:
        _split_estimate(view, shots, values)
    if not st.button("Launch training", type="primary", disabled=view is None or not base or not can_submit):
        return
    try:
        # The selection's source passed the path policy with the view; a typed base model
        # (a path) must lie in a model folder too: the trainer itself accepts any path.
        config = {**state.selection().to_config(), "shots": shots, "encoder": encoder,
                  "base": ModelSpec.shared(base).spec, "init": init, **{k: v for k, v in values.items() if v is not None}}
        with st.spinner("Checking the configuration…"):
            job = Worker().submit(config, device=device)
        select_job(job.id)
        st.success(md(f"Job {job.id} {'started' if job.status in (STARTING, RUNNING) else 'queued'}: "
                      f"{describe_config(job.config)}"))
    except BiovizError as error:
        st.error(md(error))
