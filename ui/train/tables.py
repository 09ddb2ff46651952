"""One number format for the scores in the Train page's tables (and the job table's own text).

Every score on the page (mAP, retention, a stored evaluation's value and interval, the base
weight) is shown with three decimals, as :func:`trainer.jobs.progress.score_text` writes them,
so 0.4417 and 0.704 never stand side by side.
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

SCORE_FORMAT = "%.3f"


def score_columns(frame: pd.DataFrame) -> dict:
    """``column_config`` for ``st.dataframe``: every column of non-integer numbers as a three-decimal score.

    Integer columns (counts of names, stored evaluations) keep their own format.
    """
    return {name: st.column_config.NumberColumn(format=SCORE_FORMAT) for name in frame.columns
            if pd.api.types.is_float_dtype(frame[name])}
