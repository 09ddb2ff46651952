"""A row of Streamlit metrics, one column each: the level's figures on Home, a split's sizes on Train."""

from __future__ import annotations

import streamlit as st


def metric_row(metrics: list[tuple]) -> None:
    """One ``st.metric`` per column.

    Parameters
    ----------
    metrics : list of tuple
        ``(label, value)`` or ``(label, value, options)``, ``options`` being ``st.metric``'s
        keyword arguments (``help``, ``delta`` ...). Labels are the app's own text; a number
        is shown with thousands separators (:func:`shown`).
    """
    for column, (label, value, *options) in zip(st.columns(len(metrics)), metrics):
        column.metric(label, shown(value), **(options[0] if options else {}))


def shown(value) -> str:
    """A tile's value: whole numbers with thousands separators (12,345), text as given."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return value
    return f"{value:,}" if float(value).is_integer() else f"{value:,.3f}"
