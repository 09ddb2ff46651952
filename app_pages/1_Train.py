"""Train: launch few-shot training runs in the background and follow them while exploring.

Jobs run as their own processes (trainer.jobs.runner); this page only submits, lists and reads
them, so a reload, another tab or an app restart shows the same jobs and their history. Its
parts live in ui/train/: the two forms, the job panel and the run list.
"""

from __future__ import annotations

import streamlit as st

from bioviz.ontology.splits import DEFAULT_SHOTS
from ui import state
from ui.markdown import md
from ui.train.few_shot_form import few_shot_form
from ui.train.job_panel import SELECTED, jobs_blocked, show_jobs
from ui.train.pretrain_form import pretraining_section
from ui.train.runs_panel import runs_panel

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
if blocked := jobs_blocked():
    st.warning(md(blocked))  # once, here: the forms' Launch buttons are disabled and the job panel left out

MODES = ("Few-shot run on this level", "Pretrain a base model")
st.radio("What to train", MODES, key="train_mode", horizontal=True,
         help="A few-shot run trains on a few names per class of the level selected in the sidebar; "
              "pretraining turns a base model into a biomedical one on whole ontologies (synonyms, "
              "definitions, hierarchy) and gives a model every page can use, and few-shot runs can start from.")
if st.session_state["train_mode"] == MODES[1]:
    pretraining_section()
else:
    few_shot_form(view)

show_jobs()
runs_panel()
