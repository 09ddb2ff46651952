"""Streamlit caching of library results, in one place.

``st.cache_resource`` for shared objects (ontologies, models, indexes), ``st.cache_data``
with ``max_entries`` for tables and coordinates. Keys are the arguments that made them.
"""

from __future__ import annotations

import streamlit as st

from bioviz.ontology import level_view, load_source, synonym_view
from bioviz.ontology.levels import LevelView
from bioviz.ontology.model import Ontology


@st.cache_resource(max_entries=6, show_spinner="Loading ontology…")
def ontology(source: str, options: tuple = ()) -> Ontology:
    """The parsed source (cached across reruns and sessions)."""
    return load_source(source, **dict(options))


@st.cache_resource(max_entries=12, show_spinner="Cutting the concept level…")
def view(source: str, root: str | None, depth: int, synonyms: bool = False, keep_ambiguous: bool = False,
         options: tuple = ()) -> LevelView:
    """The level view (or synonym-set view) of a source."""
    onto = ontology(source, options)
    if synonyms:
        return synonym_view(onto, root=root, keep_ambiguous=keep_ambiguous)
    return level_view(onto, depth=depth, root=root, keep_ambiguous=keep_ambiguous)
