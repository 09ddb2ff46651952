"""bioviz: the app's router. Registers the pages, sets the page config and draws the shared sidebar once per run.

``streamlit run app.py``. The pages (``app_pages/``, listed in ``ui.navigation.PAGES``) then
only gather their own inputs, call the library and render.
"""

from __future__ import annotations

import streamlit as st

from bioviz import paths
from bioviz.errors import BiovizError
from ui import navigation, state, upload_memory, warmup_banner
from ui.markdown import md

upload_memory.install()  # bound the server's upload memory (idempotent; python -m ui.serve does it at start)
page, streamlit_page = navigation.navigate()
st.set_page_config(page_title="bioviz" if page.is_home else f"{page.title} · bioviz", page_icon="🧬",
                   layout="wide")
if not page.own_home_notice and not st.session_state.get("_home_notice") and not paths.check_home_writable():
    # Said once a session: every page works from what is cached. Not on a page that says its own
    # (Train: jobs need a writable home); the next other page says it then.
    st.session_state["_home_notice"] = True
    st.warning(md(paths.refused_writes() or "BIOVIZ_HOME is read-only: nothing will be saved"))
warmup_banner.start_once()  # the bundled levels' first encoding, in the background: once per server
warmup_banner.banner()
try:
    state.init_state(page.url_path)
    state.selection_sidebar()
    state.model_pickers(page.models)
    streamlit_page.run()
except BiovizError as error:
    # Bad input a page did not catch itself: the same one line the page would have shown,
    # never a traceback (st.stop and st.rerun are not BiovizErrors and pass through).
    st.error(md(error))
