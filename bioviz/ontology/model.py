"""The one ontology model every source is loaded into.

Nothing downstream knows which source an :class:`Ontology` came from: concepts carry an
id, a preferred name, synonyms and an optional definition; IS-A edges live in a
``networkx.DiGraph`` pointing from parent to child.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from functools import cached_property

import networkx as nx

from bioviz.errors import SourceError, UnknownConceptError, shown
from bioviz.text_clean import MAX_NAME_BYTES
from bioviz.ontology.taxonomy import consistent_taxonomy, without_edges

logger = logging.getLogger(__name__)


def normalise_name(name: str) -> str:
    """Return the key under which a name is compared: case-folded, inner spaces collapsed.

    Two names that differ only in case or spacing are the same name for grouping and
    ambiguity (the papers lower-case their input too).

    >>> normalise_name("  Urinary   Hesitancy ")
    'urinary hesitancy'
    """
    return " ".join(name.split()).casefold()


@dataclass(frozen=True)
class Concept:
    """One concept of an ontology.

    Attributes
    ----------
    id : str
        The source's identifier (``A00.1``, ``HP:0001250``, a CUI, ...).
    name : str
        Preferred name.
    synonyms : tuple of str
        Other names (exact/related synonyms, inclusion terms, UMLS atoms), without the
        preferred name.
    definition : str or None
        Textual definition when the source has one.
    """

    id: str
    name: str
    synonyms: tuple[str, ...] = ()
    definition: str | None = None

    @cached_property
    def names(self) -> tuple[str, ...]:
        """The preferred name followed by the synonyms, duplicates (by normalised form) removed."""
        seen: set[str] = set()
        out: list[str] = []
        for text in (self.name, *self.synonyms):
            key = normalise_name(text)
            if key and key not in seen:
                seen.add(key)
                out.append(text.strip())
        return tuple(out)


def check_name_sizes(concepts) -> None:
    """Refuse a source with a name or synonym over :data:`bioviz.text_clean.MAX_NAME_BYTES` (64 KiB of UTF-8).

    Every name is encoded, indexed and searched: one of megabytes cost a server process 2 GB
    and half a minute (issue 32). Checked when any source is built or read back from its cache.

    Raises
    ------
    SourceError
        One line naming the concept and the size.
    """
    for concept in concepts:
        for name in (concept.name, *concept.synonyms):
            # len() first: a name of fewer characters than a quarter of the bound cannot exceed it in UTF-8
            if len(name) * 4 <= MAX_NAME_BYTES:
                continue
            size = len(name.encode("utf-8", "surrogatepass"))
            if size > MAX_NAME_BYTES:
                raise SourceError(f"concept {shown(concept.id)} has a name of {size:,} bytes; a name is at most "
                                  f"{MAX_NAME_BYTES:,} bytes: not a source this server reads")


@dataclass
class Ontology:
    """Concepts plus IS-A edges (parent -> child) and a name index.

    Parameters
    ----------
    source : str
        Short source label (``icd10``, ``hpo``, a file name, ...), used in titles.
    version : str
        Version of the release or package the concepts were read from.
    concepts : dict
        ``id -> Concept``.
    graph : networkx.DiGraph
        IS-A edges from parent to child. Every concept is a node.
    default_root : str
        Root used when the user names none (a synthetic root when the source has several
        top concepts).
    removed_edges : (list, list), optional
        The cyclic and shortcut edges of ``graph``, when already known (the parsed-source
        cache stores them); found on first use of :meth:`taxonomy` otherwise.
    """

    source: str
    version: str
    concepts: dict[str, Concept]
    graph: nx.DiGraph
    default_root: str
    removed_edges: tuple[list, list] | None = field(default=None, repr=False, compare=False)
    _name_index: dict[str, list[str]] | None = field(default=None, repr=False, compare=False)
    _taxonomy: tuple | None = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        check_name_sizes(self.concepts.values())
        missing = [c for c in self.concepts if c not in self.graph]
        self.graph.add_nodes_from(missing)

    def __len__(self) -> int:
        return len(self.concepts)

    def __contains__(self, concept_id: object) -> bool:
        return concept_id in self.concepts

    @property
    def label(self) -> str:
        """``source version`` for titles and captions."""
        return f"{self.source} {self.version}".strip()

    def concept(self, concept_id: str) -> Concept:
        """Return the concept with ``concept_id``.

        Raises
        ------
        UnknownConceptError
            If the id is not in the ontology.
        """
        try:
            return self.concepts[concept_id]
        except KeyError:
            raise UnknownConceptError(
                f"unknown concept id {concept_id!r} in {self.source} ({len(self)} concepts)"
            ) from None

    def children(self, concept_id: str) -> list[str]:
        """Direct children of a concept, sorted by id."""
        self.concept(concept_id)
        return sorted(self.graph.successors(concept_id))

    def parents(self, concept_id: str) -> list[str]:
        """Direct parents of a concept, sorted by id."""
        self.concept(concept_id)
        return sorted(self.graph.predecessors(concept_id))

    def path_to_root(self, concept_id: str) -> list[str]:
        """One shortest path from the concept up to a top concept (the concept first)."""
        self.concept(concept_id)
        path = [concept_id]
        seen = {concept_id}
        current = concept_id
        while True:
            parents = [p for p in sorted(self.graph.predecessors(current)) if p not in seen]
            if not parents:
                return path
            current = parents[0]
            seen.add(current)
            path.append(current)

    def taxonomy(self) -> tuple[nx.DiGraph, list, list]:
        """The IS-A graph without cyclic and shortcut edges, and the removed edges of each kind.

        Computed once per ontology (see :mod:`bioviz.ontology.taxonomy`); every level view
        and hierarchy of the ontology shares it. Treat the graph as read-only.

        Returns
        -------
        (graph, cyclic, shortcuts)
        """
        if self._taxonomy is None:
            if self.removed_edges is None:
                self._taxonomy = consistent_taxonomy(self.graph)
                self.removed_edges = self._taxonomy[1:]
            else:
                cycles, shortcuts = self.removed_edges
                self._taxonomy = (without_edges(self.graph, cycles, shortcuts), cycles, shortcuts)
        return self._taxonomy

    @property
    def name_index(self) -> dict[str, list[str]]:
        """Normalised name -> ids of the concepts that carry it (built once, on first use)."""
        if self._name_index is None:
            index: dict[str, list[str]] = {}
            for concept in self.concepts.values():
                for text in concept.names:
                    index.setdefault(normalise_name(text), []).append(concept.id)
            self._name_index = index
        return self._name_index

    def lookup(self, name: str) -> list[Concept]:
        """Concepts that carry ``name`` (compared after :func:`normalise_name`)."""
        return [self.concepts[i] for i in self.name_index.get(normalise_name(name), [])]

    def search(self, text: str, limit: int = 20) -> list[Concept]:
        """Concepts whose id or name contains ``text`` (case-insensitive), ids first."""
        needle = normalise_name(text)
        if not needle:
            return []
        exact = [self.concepts[text.strip()]] if text.strip() in self.concepts else []
        hits = [c for c in self.concepts.values() if needle in normalise_name(c.name)]
        hits.sort(key=lambda c: (len(c.name), c.id))
        return (exact + [c for c in hits if c not in exact])[:limit]
