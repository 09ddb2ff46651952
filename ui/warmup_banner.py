"""The background first encoding in the app: started once per server, its progress on every page.

The router (app.py) calls :func:`start_once` and :func:`banner` on every run. The warm-up
itself (:mod:`bioviz.warmup`) runs in a process of its own; the banner only reads the
small state file it writes, so drawing it costs a file read.

The banner's fragment cannot rerun while the page's own run is busy (a level being encoded
or waited for): :func:`refresh`, called by such a long step's progress bar, redraws it.
"""

from __future__ import annotations

import logging

import streamlit as st

from bioviz import warmup

logger = logging.getLogger(__name__)

POLL_S = 3  # seconds between the banner's updates while the warm-up runs
_SLOT = "_warmup_banner_slot"  # session key of the banner's element in this run (None when not drawn)


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
        if state.get("waiting_for"):  # the level was being encoded already: its encoder's progress, not encoded twice
            text += f" (encoded by {state['waiting_for']}; the warm-up waits for it)"
    return text + ". Pages work meanwhile; a level not prepared yet is encoded when a page needs it."


def _draw(slot, state: dict) -> None:
    total = max(int(state.get("total") or 0), 1)
    slot.progress(min(int(state.get("done") or 0) / total, 1.0), text=progress_text(state))


@st.fragment(run_every=POLL_S)
def _live_banner() -> None:
    """The banner, redrawn every few seconds; once the warm-up has ended, the whole page reruns without it."""
    _reap()
    state = warmup.read_state()
    if not warmup.is_running(state):
        st.rerun()  # the next run draws no fragment: nothing polls any more
    st.session_state[_SLOT] = st.empty()
    _draw(st.session_state[_SLOT], state)


def banner() -> None:
    """Show the warm-up's progress while it runs; draw nothing (and poll nothing) otherwise."""
    _reap()
    st.session_state[_SLOT] = None  # a previous run's element is not this run's
    if warmup.is_running(warmup.read_state()):
        _live_banner()


def refresh() -> None:
    """Redraw the banner now, from a long step of the page's run (its fragment waits for that run to end)."""
    slot = st.session_state.get(_SLOT)
    if slot is None:
        return
    state = warmup.read_state()
    if warmup.is_running(state):
        _draw(slot, state)
    else:
        slot.empty()
