"""The Train page's run list: every complete run, its editable name and what is stored with it."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from bioviz.errors import BiovizError
from bioviz.evaluation.run_list import run_row, stored_results_rows
from bioviz.models.runs import NAME_MAX, distinct_labels, list_runs, read_run, set_run_name
from ui.markdown import md, md_code
from ui.train.tables import SCORE_FORMAT, score_columns

_column, _score = st.column_config.Column, st.column_config.NumberColumn
# Widths (px) that add up to the main area at 1440 px with the sidebar open (about 980 px);
# short headers, the full words in each column's help.
RUN_COLUMNS = {
    "name": _column(width=170),
    "run": _column(width=135),
    "encoder": _column(width=70),
    "trained on": _column(width=100),
    "shots": _column(width=50),
    "base": _column(width=95),
    "created (UTC)": _column("created", width=110, help="When the run was made (UTC)"),
    "test mAP base": _score("mAP base", format=SCORE_FORMAT, width=65,
                            help="Class-retrieval mAP of the base model on the run's held-out test names"),
    "test mAP trained": _score("mAP run", format=SCORE_FORMAT, width=65,
                               help="Class-retrieval mAP of the trained run on its held-out test names"),
    "base weight": _score("weight", format=SCORE_FORMAT, width=55,
                          help="Base weight: how much of its input model's vectors a head run keeps"),
    "stored evaluations": _score("evals", format="%d", width=55,
                                 help="Evaluations stored with the run (Evaluation page or python -m bioviz eval)"),
}


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
    columns = {**score_columns(table), **{name: RUN_COLUMNS[name] for name in table.columns if name in RUN_COLUMNS}}
    st.dataframe(table, hide_index=True, width="stretch", column_config=columns)
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
