"""The Train page's line saying where training jobs run (this machine, or a Ray cluster)."""

from __future__ import annotations

import streamlit as st

from bioviz.errors import BiovizError
from bioviz.ray_cluster import describe_executor
from ui.markdown import md


def show_executor() -> bool:
    """Draw where jobs run (``BIOVIZ_EXECUTOR``, ``RAY_ADDRESS``); False, after one error line, when they cannot.

    Returns
    -------
    bool
        True when jobs can be submitted (the page disables its launch button otherwise).
    """
    try:
        where = describe_executor()
    except BiovizError as error:
        st.error(md(error))
        return False
    st.caption(md(f"Jobs run on: {where}"))
    return True
