"""A row of Streamlit metrics, one column each: the level's figures on Home, a split's sizes on Train."""

from __future__ import annotations

import streamlit as st


def metric_row(metrics: list[tuple]) -> None:
    """One ``st.metric`` per column.

    Parameters
    ----------
    metrics : list of tuple
        ``(label, value)`` or ``(label, value, options)``, ``options`` being ``st.metric``'s
        keyword arguments (``help``, ``delta`` ...). Labels are the app's own text.
    """
    for column, (label, value, *options) in zip(st.columns(len(metrics)), metrics):
        column.metric(label, value, **(options[0] if options else {}))
