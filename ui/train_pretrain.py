"""The Train page's "Pretrain a base model" form: sources, objectives, pairs, base, leakage, seed.

It submits a pretrain job (:mod:`trainer.jobs.pretrain_job`) to the same queue as few-shot
runs; the finished model is a run every model picker lists. The level selected in the
sidebar is the one whose held-out names are kept out (``--exclude-level`` with the split
given here), so a later few-shot run and evaluation on it stay honest.
"""

from __future__ import annotations

import streamlit as st

from bioviz.errors import BiovizError
from bioviz.models.model_spec import base_choices as bundled_bases
from bioviz.ontology.level_spec import LevelSpec
from bioviz.ontology.splits import DEFAULT_SPLIT
from bioviz.models.model_spec import ModelSpec
from bioviz.server_paths import shared_source
from trainer.job_options import OBJECTIVE_SUMMARIES
from trainer.jobs.progress import describe_config
from trainer.jobs.queue import Worker
from trainer.jobs.store import RUNNING, STARTING
from trainer.pretrain.config import PretrainConfig
from ui import state
from ui.markdown import md

# Widget keys of the form (kept across page visits with the page's other form values).
KEYS = ("pretrain_sources", "pretrain_objectives", "pretrain_all_pairs", "pretrain_max_pairs", "pretrain_base",
        "pretrain_exclude", "pretrain_shots", "pretrain_split_seed", "pretrain_tpc", "pretrain_zero",
        "pretrain_seed", "pretrain_epochs", "pretrain_batch_size", "pretrain_lr", "pretrain_save_steps",
        "pretrain_max_seq_length")
DEFAULT_MAX_PAIRS = PretrainConfig.max_pairs
OBJECTIVES = tuple(OBJECTIVE_SUMMARIES)


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
    s.setdefault("pretrain_max_pairs", DEFAULT_MAX_PAIRS)
    s.setdefault("pretrain_exclude", True)
    # The split starts as the few-shot form's (its shots), so a run launched next on this level matches.
    shots = s.get("train_shots") if isinstance(s.get("train_shots"), int) else DEFAULT_SPLIT.shots
    for key, value in (("pretrain_shots", shots), ("pretrain_split_seed", DEFAULT_SPLIT.seed),
                       ("pretrain_tpc", DEFAULT_SPLIT.test_per_class), ("pretrain_zero", 0.0),
                       ("pretrain_seed", PretrainConfig.seed), ("pretrain_epochs", PretrainConfig.epochs),
                       ("pretrain_batch_size", PretrainConfig.batch_size), ("pretrain_lr", PretrainConfig.lr),
                       ("pretrain_save_steps", PretrainConfig.save_steps), ("pretrain_max_seq_length", 0)):
        s.setdefault(key, value)


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
        max_pairs = None if all_pairs else int(st.number_input(
            "Max pairs", min_value=2, step=1000, key="pretrain_max_pairs",
            help="Training pairs sampled in equal shares per source and objective (20,000: about 27 minutes on "
                 "one CPU core with max tokens 32, under a minute on a GPU)"))
        base_choices = {**bundled_bases(), **{f"run {label}": path for label, path in runs_by_label.items()}}
        state.forget_stale_choice("pretrain_base", base_choices)
        base = base_choices[st.selectbox("Base model", list(base_choices), key="pretrain_base",
                                         help="The sentence-transformers model pretraining starts from")]
        seed = int(st.number_input("Seed", min_value=0, step=1, key="pretrain_seed",
                                   help="Seeds the sampling of pairs, the validation slice and training"))

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
    cols = st.columns(4)
    shots = int(cols[0].number_input("Shots of that split", min_value=1, max_value=1000, key="pretrain_shots",
                                     disabled=not keep_out, help="As your few-shot runs on this level will use"))
    split_seed = int(cols[1].number_input("Split seed", min_value=0, step=1, key="pretrain_split_seed",
                                          disabled=not keep_out))
    test_per_class = int(cols[2].number_input("Test names per class", min_value=1, max_value=50, key="pretrain_tpc",
                                              disabled=not keep_out))
    zero = float(cols[3].number_input("Zero-shot classes", min_value=0.0, step=0.05, format="%g",
                                      key="pretrain_zero", disabled=not keep_out,
                                      help="A fraction when below 1, else a count"))
    with st.expander("Training (BioLORD's defaults: one epoch, batches of 64, AdamW 2e-5)"):
        cols = st.columns(5)
        epochs = int(cols[0].number_input("Epochs", min_value=1, step=1, key="pretrain_epochs"))
        batch_size = int(cols[1].number_input("Batch size", min_value=2, step=1, key="pretrain_batch_size",
                                              help="In-batch negatives: larger batches give more of them"))
        lr = float(cols[2].number_input("Learning rate", min_value=1e-7, format="%g", key="pretrain_lr"))
        save_steps = int(cols[3].number_input("Checkpoint every (steps)", min_value=1, step=50,
                                              key="pretrain_save_steps",
                                              help="An interrupted job resumes from its last checkpoint"))
        max_seq = int(cols[4].number_input("Max tokens per text (0: the base's)", min_value=0, step=8,
                                           key="pretrain_max_seq_length",
                                           help="Truncates long definitions while training only (they cost most)"))

    if not st.button("Launch pretraining", type="primary", disabled=not (sources and objectives and can_submit)):
        return None
    try:
        # Paths pass the server's policy (data folders, model folders): the command itself accepts any path.
        config = {"kind": "pretrain", "sources": [shared_source(s) for s in sources], "objectives": objectives,
                  "max_pairs": max_pairs,
                  "base": ModelSpec.shared(base).spec, "seed": seed, "epochs": epochs, "batch_size": batch_size,
                  "lr": lr, "save_steps": save_steps, "max_seq_length": max_seq or None,
                  "exclude_levels": [exclude] if keep_out else []}
        if keep_out:
            config.update({"shots": shots, "split_seed": split_seed, "test_per_class": test_per_class,
                           "zero_shot_classes": zero if zero < 1 else int(zero)})
        with st.spinner("Checking the configuration…"):
            job = Worker().submit(config, device=device)
    except BiovizError as error:
        st.error(md(error))
        return None
    st.success(md(f"Job {job.id} {'started' if job.status in (STARTING, RUNNING) else 'queued'}: "
                  f"{describe_config(job.config)}"))
    return job
