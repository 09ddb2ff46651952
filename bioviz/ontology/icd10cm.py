"""ICD-10-CM from the simple-icd-10-cm package, with inclusion terms as synonyms."""

from __future__ import annotations

from importlib.metadata import version

import networkx as nx

from bioviz.ontology.model import Concept, Ontology

ROOT = "ICD10CM"


def load_icd10cm() -> Ontology:
    """Load ICD-10-CM with a synthetic root ``ICD10CM`` over its 22 chapters.

    Chapters (``1`` ... ``22``), blocks, categories and (extended) subcategories become
    concepts; each code's inclusion terms become its synonyms.

    Returns
    -------
    Ontology
        About 98.5k codes.
    """
    import simple_icd_10_cm as icd  # imported here: it loads its code table on import (seconds)

    concepts = {ROOT: Concept(ROOT, "ICD-10-CM")}
    graph = nx.DiGraph()
    for code in icd.get_all_codes(with_dots=True):
        synonyms = tuple(icd.get_inclusion_term(code))
        concepts[code] = Concept(code, icd.get_description(code), synonyms)
        # A block holding a single category shares its code (B10 is both), so the
        # library names the code its own parent: attach it to the next ancestor instead.
        parent = next((a for a in icd.get_ancestors(code) if a != code), ROOT)
        graph.add_edge(parent, code)
    return Ontology("icd10cm", f"simple-icd-10-cm {version('simple-icd-10-cm')}", concepts, graph, ROOT)
