"""The selection shared by every page (source, root, depth, models) and its URL form.

The selection lives in ``st.session_state`` (initialised once) and is mirrored in
``st.query_params`` so a link reopens the same view. Pages call :func:`selection_sidebar`
to show and edit it, then :func:`current_view` to get the level view.
"""

from __future__ import annotations

import streamlit as st

from bioviz.errors import BiovizError
from bioviz.ontology import list_sources
from bioviz.ontology.levels import LevelView
from ui import cache

BUNDLED = [s["name"] for s in list_sources() if s["kind"] == "bundled"]
DEFAULTS = {"source": "icd10", "root": "", "depth": 1, "synonyms": False, "keep_ambiguous": False}
DEFAULT_ROOTS = {s["name"]: s["default_root"] for s in list_sources() if s["kind"] == "bundled"}


def init_state() -> None:
    """Initialise the shared keys once per session, from the URL when it has them."""
    if st.session_state.get("_bioviz_init"):
        return
    params = st.query_params
    st.session_state["source"] = params.get("source", DEFAULTS["source"])
    st.session_state["root"] = params.get("root", DEFAULTS["root"])
    try:
        st.session_state["depth"] = max(1, int(params.get("depth", DEFAULTS["depth"])))
    except ValueError:
        st.session_state["depth"] = DEFAULTS["depth"]
    st.session_state["synonyms"] = params.get("synonyms", "0") == "1"
    st.session_state["keep_ambiguous"] = params.get("keep_ambiguous", "0") == "1"
    st.session_state["_bioviz_init"] = True


def sync_url(**extra: str) -> None:
    """Write the shared selection (and a page's own ``extra`` keys) into the URL."""
    values = {
        "source": st.session_state["source"],
        "depth": str(st.session_state["depth"]),
    }
    if st.session_state.get("root"):
        values["root"] = st.session_state["root"]
    if st.session_state.get("synonyms"):
        values["synonyms"] = "1"
    if st.session_state.get("keep_ambiguous"):
        values["keep_ambiguous"] = "1"
    values.update({k: v for k, v in extra.items() if v not in (None, "")})
    for key, value in values.items():
        if st.query_params.get(key) != value:
            st.query_params[key] = value


def selection_sidebar() -> None:
    """Sidebar widgets for source, root and depth, bound to the shared session keys."""
    init_state()
    with st.sidebar:
        st.header("Ontology")
        choices = BUNDLED + ([st.session_state["source"]] if st.session_state["source"] not in BUNDLED else [])
        st.selectbox("Source", choices, key="source", help="Bundled ontologies, or a file loaded on the home page")
        default_root = DEFAULT_ROOTS.get(st.session_state["source"], "")
        st.text_input("Root concept id", key="root", placeholder=default_root or "default root",
                      help="Classes are the concepts `depth` levels below this root; empty = the source's default")
        st.number_input("Depth", min_value=1, max_value=12, step=1, key="depth",
                        help="1 = the root's children are the classes (e.g. ICD-10 chapters)")
        st.toggle("Synonym sets (each concept its own class)", key="synonyms")
        st.toggle("Keep ambiguous names", key="keep_ambiguous",
                  help="Names found under several classes are dropped unless this is on")


def current_view() -> LevelView | None:
    """The level view for the shared selection, or None after showing a one-line error."""
    init_state()
    try:
        return cache.view(
            st.session_state["source"],
            st.session_state["root"].strip() or None,
            int(st.session_state["depth"]),
            bool(st.session_state["synonyms"]),
            bool(st.session_state["keep_ambiguous"]),
        )
    except BiovizError as error:
        st.error(str(error))
        return None
