"""Small app-side helpers shared by the comparison pages (Projection, Similarity matrix, Hierarchy).

Page parameters are set with ``state.page_params`` (so a shared link reopens the same view)
and written back with ``state.sync_url(**url_values(keys))``; every figure is shown with the same
toolbar export settings and a CSV download of its numbers.
"""

from __future__ import annotations

import streamlit as st

from bioviz.csv_export import frame_to_csv
from bioviz.figures import export_config_as
from ui import state


def url_values(keys) -> dict[str, str]:
    """``key -> str(value)`` of page keys, for ``state.sync_url(**...)``; also keeps them (``state.keep``)."""
    state.keep(keys)
    return {key: str(st.session_state[key]) for key in keys if key in st.session_state}


def changed_url_values(defaults: dict) -> dict[str, str]:
    """URL strings of the page keys whose values differ from ``defaults`` (bools as ``1``/``0``); keeps them all."""
    state.keep(defaults)
    return {key: ("1" if value is True else "0" if value is False else str(value))
            for key in defaults if (value := st.session_state[key]) != defaults[key]}


def image_format() -> str:
    """Sidebar switch for what the figures' camera button saves: ``png`` (2x) or ``svg``."""
    with st.sidebar:
        st.header("Export")
        label = st.radio("Camera button saves", ["PNG (2x)", "SVG"], horizontal=True, key="_image_format",
                         help="Toolbar camera icon of each figure. CSV buttons under the figures give the numbers.")
    return "svg" if label == "SVG" else "png"


def show_figure(fig, name: str, fmt: str, frame=None, *, key: str | None = None, rows: int | None = None,
                **chart_kwargs):
    """Render a figure with the export toolbar, and a CSV download of ``frame`` under it.

    ``frame`` is a DataFrame, or a callable returning one (then give ``rows`` for the
    button's label): the CSV of a 20k-point projection takes a noticeable part of a rerun,
    so it is built only when the button is clicked, and that click does not rerun the page.

    Returns what ``st.plotly_chart`` returns (the selection event when ``on_select`` is set).
    """
    event = st.plotly_chart(fig, width="stretch", config=export_config_as(name, fmt), key=key, **chart_kwargs)
    if frame is not None:
        deferred = callable(frame)
        count = rows if deferred else len(frame)
        st.download_button(f"Download numbers (CSV, {count:,} rows)",
                           (lambda: frame_to_csv(frame())) if deferred else frame_to_csv(frame),
                           f"{name}.csv", "text/csv", key=f"csv-{name}-{key or ''}",
                           on_click="ignore" if deferred else "rerun")
    return event
