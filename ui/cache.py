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


@st.cache_data(max_entries=16, show_spinner=False)
def evaluation_results(selection: tuple, models: tuple, tasks: tuple, split: tuple, settings: tuple) -> list[dict]:
    """Results of the ontology protocols (:func:`bioviz.evaluation.evaluate`) for the selected view.

    ``split`` and ``settings`` are the fields of ``SplitSpec`` and ``EvalSettings``; results
    also live in the disk result cache (``BIOVIZ_HOME/eval``) and, for runs, in the run.
    """
    from bioviz.evaluation import EvalSettings, SplitSpec, evaluate

    v = view(*selection)
    return evaluate(v, SplitSpec(*split).make(v), list(models), list(tasks), ontology(selection[0]),
                    EvalSettings(*settings))


@st.cache_data(max_entries=16, show_spinner=False)
def benchmark_results(models: tuple, benchmarks: tuple, settings: tuple) -> list[dict]:
    """Spearman's rho of the models on relatedness benchmarks (names or stored upload paths)."""
    from bioviz.evaluation import EvalSettings, evaluate_benchmarks

    return evaluate_benchmarks(list(models), list(benchmarks), EvalSettings(*settings))


@st.cache_data(max_entries=8, show_spinner=False)
def cross_level_table(selection: tuple, models: tuple, depths: tuple, split: tuple, settings: tuple) -> dict:
    """Ranking mAP of the models on each level under the selected root (higher-level-semantics Table 4)."""
    from bioviz.evaluation import EvalSettings, SplitSpec, cross_level

    source, root, _, _, keep_ambiguous = selection
    table = cross_level(ontology(source), list(models), list(depths), root, SplitSpec(*split), keep_ambiguous,
                        EvalSettings(*settings))
    table.pop("results")
    return table
