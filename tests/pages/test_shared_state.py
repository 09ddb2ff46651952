"""AppTest of the selection shared by every page (ui/state.py)."""

from __future__ import annotations

from streamlit.testing.v1 import AppTest

from bioviz.models.model_spec import BASELINE_MODEL


def page_with_the_sidebar():
    """A page as the app's pages start; "lose the keys" makes the next run start without them."""
    import streamlit as st

    from ui import state

    if st.session_state.pop("lose", False):
        # What Streamlit does to the keys bound to the sidebar widgets when the Train page's
        # st.fragment(run_every=2) reruns as the user leaves the page (streamlit#10805): in
        # the browser the next page failed with a KeyError on "source".
        for key in state.SHARED_KEYS:
            st.session_state.pop(key, None)
    state.init_state()
    state.selection_sidebar()
    view = state.current_view()
    st.markdown(f"{st.session_state['source']} · depth {st.session_state['depth']} · {len(view.classes)} classes")
    st.button("lose the keys", on_click=lambda: st.session_state.update(lose=True))


def test_the_selection_survives_when_streamlit_drops_its_widget_keys(tmp_home, data_dir):
    at = AppTest.from_function(page_with_the_sidebar, default_timeout=120)
    at.query_params["source"] = str(data_dir / "mini.obo")
    at.run()
    at.sidebar.number_input(key="depth").set_value(2).run()
    assert at.markdown[0].value == f"{data_dir / 'mini.obo'} · depth 2 · 1 classes"
    at.query_params.clear()  # a link in the page list opens a page without parameters
    at.button[0].click().run()
    assert not at.exception, at.exception
    assert at.markdown[0].value == f"{data_dir / 'mini.obo'} · depth 2 · 1 classes"
    assert at.sidebar.number_input(key="depth").value == 2
    assert at.session_state["model_b"] == BASELINE_MODEL  # the default compared model
