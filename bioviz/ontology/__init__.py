"""Ontology layer: one model, one loader per source, level views, level specs and few-shot splits."""

from bioviz.ontology.level_spec import LevelSpec
from bioviz.ontology.levels import LevelView, level_view, synonym_view
from bioviz.ontology.model import Concept, Ontology, normalise_name
from bioviz.ontology.sources import list_sources, load_source
from bioviz.ontology.splits import DEFAULT_SPLIT, Split, SplitSpec, make_split

__all__ = [
    "DEFAULT_SPLIT", "Concept", "LevelSpec", "LevelView", "Ontology", "Split", "SplitSpec", "level_view",
    "list_sources", "load_source", "make_split", "normalise_name", "synonym_view",
]
