"""Tiny ontologies written in a test, for the vocabulary and query-reading tests."""

from __future__ import annotations

import networkx as nx

from bioviz.ontology.model import Concept, Ontology


def flat_ontology(source: str, concepts: list[Concept], root: str = "ROOT") -> Ontology:
    """A flat ontology: ``root`` above every concept."""
    by_id = {root: Concept(root, "root concept"), **{c.id: c for c in concepts}}
    graph = nx.DiGraph()
    graph.add_edges_from((root, c.id) for c in concepts)
    return Ontology(source, "1", by_id, graph, root)
