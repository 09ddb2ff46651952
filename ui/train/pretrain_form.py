"""The Train page's "Pretrain a base model" form: sources, objectives, pairs, base, leakage, seed.

The numeric settings are :class:`~trainer.pretrain.config.PretrainConfig`'s options, each drawn
by :func:`ui.train.option_widgets.option_widget` from its metadata.

It submits a pretrain job (:mod:`trainer.jobs.pretrain_job`) to the same queue as few-shot
runs; the finished model is a run every model picker lists. The level selected in the
sidebar is the one whose held-out names are kept out (``--exclude-level`` with the split
given here), so a later few-shot run and evaluation on it stay honest.
"""

from __future__ import annotations

import streamlit as st

from bioviz.errors import BiovizError
from bioviz.models.model_spec import ModelSpec, base_choices as bundled_bases
from bioviz.models.runs import distinct_labels, list_runs
from bioviz.ontology.level_spec import LevelSpec
from bioviz.ontology.splits import DEFAULT_SPLIT
from bioviz.server_paths import shared_source
from trainer.job_options import OBJECTIVE_SUMMARIES
from trainer.jobs.kinds import PRETRAIN
from trainer.jobs.progress import describe_config
from trainer.jobs.queue import DEVICE_CHOICES, Worker, gpu_count
from trainer.jobs.store import RUNNING, STARTING
from trainer.pretrain.config import OPTIONS
from ui import state
from ui.markdown import md
from ui.train.executor_info import show_executor
from ui.train.job_panel import jobs_blocked, select_job
from ui.train.option_widgets import option_widget

# The settings drawn from their option metadata (ui.train.option_widgets), each under "pretrain_<field>".
SPLIT_FIELDS = ("shots", "split_seed", "test_per_class", "zero_shot_classes")
TRAINING_FIELDS = ("epochs", "batch_size", "lr", "save_steps", "max_seq_length")
# Issue 31's candidate encoders: the loss, the negatives, the relatedness term, WiSE-FT interpolation.
CANDIDATE_FIELDS = ("loss", "hard_negatives", "relatedness_weight", "relatedness_pairs", "relatedness_teacher",
                    "interpolate")
GENERATED = ("max_pairs", "seed", *SPLIT_FIELDS, *TRAINING_FIELDS, *CANDIDATE_FIELDS)
# Widget keys of the form (kept across page visits with the page's other form values).
KEYS = ("pretrain_sources", "pretrain_objectives", "pretrain_all_pairs", "pretrain_base", "pretrain_exclude",
        *(f"pretrain_{name}" for name in GENERATED))
OBJECTIVES = tuple(OBJECTIVE_SUMMARIES)


def _widget(name: str, **widget_args):
    """The generated widget of PretrainConfig field ``name`` (its default: the field's)."""
    return option_widget(OPTIONS[name], OPTIONS[name].default, f"pretrain_{name}", **widget_args)


def exclude_level_text(level: LevelSpec) -> str | None:
    """``SOURCE:ROOT:DEPTH`` of ``level`` for ``--exclude-level``; None for a view that form cannot name.

    Synonym sets and UMLS loader options are other views of a source than ``SOURCE:ROOT:DEPTH``
    loads, so their held-out names could not be drawn the same way.

    >>> exclude_level_text(LevelSpec("hpo", root="HP:0000118", depth=1)), exclude_level_text(LevelSpec("icd10"))
    ('hpo:HP:0000118:1', 'icd10::1')
    """
    if level.synonyms or level.options or level.keep_ambiguous:
        return None
    return f"{level.source}:{level.root or ''}:{level.depth}"


def _defaults() -> None:
    s = st.session_state
    source = s.get("source")
    s.setdefault("pretrain_sources", [source] if source else ["hpo"])
    s.setdefault("pretrain_objectives", ["synonyms", "hierarchy"])
    s.setdefault("pretrain_all_pairs", False)
    s.setdefault("pretrain_exclude", True)
    # The split starts as the few-shot form's (its shots), so a run launched next on this level matches.
    s.setdefault("pretrain_shots", s.get("train_shots") if isinstance(s.get("train_shots"), int) else DEFAULT_SPLIT.shots)


def _row(names: tuple[str, ...], **widget_args) -> dict:
    """``field -> value`` of the generated widgets of ``names``, side by side."""
    values = {}
    for name, column in zip(names, st.columns(len(names))):
        with column:
            values[name] = _widget(name, **widget_args)
    return values


def pretrain_form(runs_by_label: dict[str, str], device: str, can_submit: bool):
    """Draw the form and its Launch button; a click queues a pretrain job (one-line error when refused).

    Parameters
    ----------
    runs_by_label : dict
        ``label -> run directory`` of the finished runs (offered as the base model).
    device : str
        The device chosen on the page (``auto``, ``cpu``, ``cuda``).
    can_submit : bool
        The executor can take jobs now.

    Returns
    -------
    trainer.jobs.store.Job or None
        The job queued on this run, if any.
    """
    _defaults()
    level = state.selection()
    sources_offered = list(dict.fromkeys([*state.BUNDLED, level.source, *st.session_state["pretrain_sources"]]))
    left, middle = st.columns(2)
    with left:
        sources = st.multiselect(
            "Sources", sources_offered, key="pretrain_sources", format_func=state.source_display,
            help="Bundled ontologies, and the file or UMLS release selected in the sidebar (load another on the "
                 "Home page). Every concept of each gives pairs; a UMLS release is read with its default options.")
        objectives = st.multiselect(
            "Objectives", OBJECTIVES, key="pretrain_objectives",
            help="\n".join(f"- **{name}**: {text}" for name, text in OBJECTIVE_SUMMARIES.items()))
        for name in objectives:
            st.caption(md(f"**{name}**: {OBJECTIVE_SUMMARIES[name]}"))
    with middle:
        all_pairs = st.toggle("Every pair", key="pretrain_all_pairs",
                              help="Train on every pair the sources give: the three bundled ontologies give 323k pairs, "
                                   "6 minutes on one H100, about 6 hours on one CPU core")
        max_pairs = None if all_pairs else _widget("max_pairs", step=1000)
        base_choices = {**bundled_bases(), **{f"run {label}": path for label, path in runs_by_label.items()}}
        state.forget_stale_choice("pretrain_base", base_choices)
        base = base_choices[st.selectbox("Base model", list(base_choices), key="pretrain_base",
                                         help="The sentence-transformers model pretraining starts from")]
        seed = _widget("seed")

    exclude = exclude_level_text(level)
    keep_out = st.toggle(
        f"Keep the evaluation level's held-out names out ({level.label})", key="pretrain_exclude",
        disabled=exclude is None,
        help="Its validation and test names (and zero-shot classes) under the split below are left out of every "
             "pair, so few-shot runs and evaluations on this level stay held out. The Evaluation page marks "
             "results on a level or split that was not kept out.") and exclude is not None
    if exclude is None:
        st.caption("Synonym sets, kept ambiguous names and UMLS loader options are views this option cannot "
                   "name: choose a plain level in the sidebar to keep its held-out names out.")
    split = _row(SPLIT_FIELDS, disabled=not keep_out)
    with st.expander("Training (BioLORD's defaults: one epoch, batches of 64, AdamW 2e-5)"):
        training = _row(TRAINING_FIELDS)
        st.caption("Candidates (docs/pretraining.md): a false-negative-aware loss, mined hard negatives, a term "
                   "keeping the base's relatedness, and the published weights interpolated with the base's.")
        training.update(_row(CANDIDATE_FIELDS))

    if not st.button("Launch pretraining", type="primary", disabled=not (sources and objectives and can_submit)):
        return None
    try:
        # Paths pass the server's policy (data folders, model folders): the command itself accepts any path.
        config = {"kind": PRETRAIN.name, "sources": [shared_source(s) for s in sources], "objectives": objectives,
                  "max_pairs": max_pairs, "base": ModelSpec.shared(base).spec, "seed": seed, **training,
                  "exclude_levels": [exclude] if keep_out else []}
        if keep_out:
            zero = split["zero_shot_classes"]
            config.update(split, zero_shot_classes=zero if zero < 1 else int(zero))
        with st.spinner("Checking the configuration…"):
            job = Worker().submit(config, device=device)
    except BiovizError as error:
        st.error(md(error))
        return None
    st.success(md(f"Job {job.id} {'started' if job.status in (STARTING, RUNNING) else 'queued'}: "
                  f"{describe_config(job.config)}"))
    return job


def pretraining_section() -> None:
    """The form with the device and the executor beside it; a queued job becomes the selected one."""
    runs = list_runs()
    labels = distinct_labels(runs)
    left, right = st.columns(2)
    with left:
        device = st.selectbox("Device", DEVICE_CHOICES, key="train_device",
                              help=f"auto = a GPU when present, else the CPU ({gpu_count()} CUDA devices here)")
    with right:
        can_submit = show_executor() and not jobs_blocked()  # a read-only home: the page said why, once
    job = pretrain_form({labels[r.path]: str(r.path) for r in runs}, device, can_submit)
    if job is not None:
        select_job(job.id)
    state.keep_form("train", ("train_mode", "train_device", *KEYS))
