"""The background first encoding in the app: started once per server, its progress on every page.

The router (app.py) calls :func:`start_once` and :func:`banner` on every run. The warm-up
itself (:mod:`bioviz.models.warmup`) runs in a process of its own; the banner only reads the
small state file it writes, so drawing it costs a file read.
"""

from __future__ import annotations

import logging

import streamlit as st

from bioviz.models import warmup

logger = logging.getLogger(__name__)

POLL_S = 3  # seconds between the banner's updates while the warm-up runs


@st.cache_resource(show_spinner=False)
def start_once():
    """Start the warm-up process, once per server (a cached resource: not once per session).

    Returns the process (None when ``BIOVIZ_WARMUP=0``, or when it could not start: the app
    works without it, encoding levels when a page needs them); kept so the server reaps it.
    """
    try:
        return warmup.start_background()
    except OSError:  # BIOVIZ_HOME not writable, no process to spare: logged, not the user's problem
        logger.exception("the background warm-up could not start")
        return None


def _reap() -> None:
    """Collect the warm-up process once it has ended, so its pid is no longer taken for a live one."""
    process = start_once()
    if process is not None:
        process.poll()


def _minutes(seconds: float) -> str:
    return f"about {seconds / 60:.0f} min" if seconds >= 90 else f"about {seconds:.0f} s"


def progress_text(state: dict) -> str:
    """One line: which level (of how many), how many of its names are ready, the rate and the time left."""
    levels = state.get("levels") or []
    where = f"{state.get('level')} (level {int(state.get('level_index') or 0) + 1} of {len(levels)})"
    text = "Preparing the bundled model's vectors in the background: "
    if not state.get("total"):
        text += f"loading {where}"
    else:
        text += f"{where}, {state.get('done', 0):,} of {state['total']:,} names"
        if state.get("rate"):
            text += f" · {state['rate']:,.0f} names/s"
        if state.get("eta_s") is not None:
            text += f" · {_minutes(state['eta_s'])} left"
    return text + ". Pages work meanwhile; a level not prepared yet is encoded when a page needs it."


@st.fragment(run_every=POLL_S)
def _live_banner() -> None:
    """The banner, redrawn every few seconds; once the warm-up has ended, the whole page reruns without it."""
    _reap()
    state = warmup.read_state()
    if not warmup.is_running(state):
        st.rerun()  # the next run draws no fragment: nothing polls any more
    total = max(int(state.get("total") or 0), 1)
    st.progress(min(int(state.get("done") or 0) / total, 1.0), text=progress_text(state))


def banner() -> None:
    """Show the warm-up's progress while it runs; draw nothing (and poll nothing) otherwise."""
    _reap()
    if warmup.is_running(warmup.read_state()):
        _live_banner()
