"""Small app-side helpers shared by the comparison pages (Projection, Similarity matrix, Hierarchy).

Page parameters are read from the URL once per session (so a shared link reopens the same
view) and written back with ``state.sync_url``; every figure is shown with the same
toolbar export settings and a CSV download of its numbers.
"""

from __future__ import annotations

from typing import Callable

import streamlit as st

from bioviz.figures import export_config_as
from ui import state


def init_params(defaults: dict, casts: dict[str, Callable] | None = None, choices: dict[str, list] | None = None,
                url_names: dict[str, str] | None = None) -> None:
    """Set each page key once: from the URL when it has a valid value, else as last used, else the default.

    Widget keys are dropped by Streamlit when the user moves to another page; the values
    :func:`url_values` keeps under ``_keep_<key>`` bring them back on return, so a view's
    settings (a point cap, say) survive a trip to another page.

    Parameters
    ----------
    defaults : dict
        ``session key -> default`` (the key is also the URL parameter name).
    casts : dict, optional
        ``key -> callable`` turning the URL string into the value (default: the default's type).
    choices : dict, optional
        ``key -> allowed values``; a URL value outside them falls back to the default.
    url_names : dict, optional
        ``key -> URL parameter`` where the two differ (e.g. ``nb_k`` is ``k`` in the URL).
    """
    casts = casts or {}
    choices = choices or {}
    url_names = url_names or {}
    entering = state.entered_page()
    for key, default in defaults.items():
        if key in st.session_state and not (entering and f"_keep_{key}" in st.session_state):
            continue  # set on this page's earlier runs (on entering, a reset widget's value is stale)
        value = st.session_state.get(f"_keep_{key}", default)
        raw = st.query_params.get(url_names.get(key, key))
        if raw is not None:
            cast = casts.get(key, type(default))
            try:
                value = cast(raw)
            except (TypeError, ValueError):
                value = default
            if key in choices and value not in choices[key]:
                value = default
        st.session_state[key] = value


def keep(keys) -> None:
    """Keep the current values of page keys under ``_keep_<key>`` (see :func:`init_params`)."""
    for key in keys:
        if key in st.session_state:
            st.session_state[f"_keep_{key}"] = st.session_state[key]


def url_values(keys) -> dict[str, str]:
    """``key -> str(value)`` of page keys, for ``state.sync_url(**...)``; also keeps them (:func:`keep`)."""
    keep(keys)
    return {key: str(st.session_state[key]) for key in keys if key in st.session_state}


def image_format() -> str:
    """Sidebar switch for what the figures' camera button saves: ``png`` (2x) or ``svg``."""
    with st.sidebar:
        st.header("Export")
        label = st.radio("Camera button saves", ["PNG (2x)", "SVG"], horizontal=True, key="_image_format",
                         help="Toolbar camera icon of each figure. CSV buttons under the figures give the numbers.")
    return "svg" if label == "SVG" else "png"


def show_figure(fig, name: str, fmt: str, frame=None, key: str | None = None, rows: int | None = None,
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
                           (lambda: frame().to_csv(index=False)) if deferred else frame.to_csv(index=False),
                           f"{name}.csv", "text/csv", key=f"csv-{name}-{key or ''}",
                           on_click="ignore" if deferred else "rerun")
    return event
