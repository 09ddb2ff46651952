"""The ontology subtree drawn on the Hierarchy page, and what a node's details need.

The subtree holds the concepts between the level view's root and its classes (``depth``
IS-A steps down), on the same consistent taxonomy the level view was cut from (cycles and
shortcut edges removed). A concept with several parents is drawn once, under its first
parent (by id) one level up, so the drawing is a tree. A class node's size is its number
of names in the view; an inner node's size is the sum over its children, so branches that
lead to no class (dead ends) are left out.

Also: names under a node, nearest names to a text, and the hypernym ranking of a mention
(all class names ranked by cosine; higher-level-semantics Table 6).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from functools import cached_property

import networkx as nx
import numpy as np
import pandas as pd

from bioviz.errors import BiovizError, UnknownConceptError
from bioviz.ontology.levels import LevelView
from bioviz.ontology.model import Ontology

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Tree:
    """A drawn subtree: one row per node.

    Attributes
    ----------
    nodes : pandas.DataFrame
        ``id``, ``parent`` ("" for the root), ``label``, ``depth``, ``names`` (names in the
        view under the node), ``classes`` (classes under it), ``class_index`` (-1 for inner
        nodes), ``extra_parents`` (parents not drawn). Parents come before children.
    root : str
    depth : int
    """

    nodes: pd.DataFrame
    root: str
    depth: int

    def __len__(self) -> int:
        return len(self.nodes)

    @cached_property
    def _children(self) -> dict[str, list[str]]:
        children: dict[str, list[str]] = {}
        for nid, parent in zip(self.nodes["id"], self.nodes["parent"]):
            children.setdefault(parent, []).append(nid)
        return children

    @cached_property
    def _class_index(self) -> dict[str, int]:
        return dict(zip(self.nodes["id"], self.nodes["class_index"].astype(int)))

    def class_rows(self, node_id: str) -> list[int]:
        """Class indices of the view under ``node_id`` (itself when it is a class).

        Raises
        ------
        UnknownConceptError
            If the node is not in the drawn tree.
        """
        if node_id not in self._class_index:
            raise UnknownConceptError(f"{node_id!r} is not in the drawn subtree under {self.root}")
        out, stack = [], [node_id]
        while stack:
            current = stack.pop()
            if self._class_index[current] >= 0:
                out.append(self._class_index[current])
            stack.extend(self._children.get(current, []))
        return sorted(out)


def level_tree(ontology: Ontology, view: LevelView) -> Tree:
    """The subtree from the view's root down to its classes.

    Parameters
    ----------
    ontology : Ontology
        The ontology the view was cut from.
    view : LevelView
        A level view (not a synonym-set view).

    Raises
    ------
    BiovizError
        For a synonym-set view, which has no levels to draw.
    """
    if view.mode != "level":
        raise BiovizError("the hierarchy needs a concept level: turn off synonym sets")
    graph, _, _ = ontology.taxonomy()
    distance = nx.single_source_shortest_path_length(graph, view.root, cutoff=view.depth)
    sizes = view.class_sizes()
    class_index = {c: i for i, c in enumerate(view.classes)}
    parent_of: dict[str, str] = {}
    extra: dict[str, int] = {}
    for node, d in distance.items():
        if d == 0:
            continue
        parents = sorted(p for p in graph.predecessors(node) if distance.get(p) == d - 1)
        parent_of[node] = parents[0]
        extra[node] = len(parents) - 1
    # Sizes bottom-up: classes carry their names, inner nodes the sum over their children.
    names = {c: int(sizes[i]) for c, i in class_index.items() if c in distance}
    classes_under = {c: 1 for c in names}
    for node in sorted(distance, key=lambda n: -distance[n]):
        if node in parent_of and node in names:
            parent = parent_of[node]
            names[parent] = names.get(parent, 0) + names[node]
            classes_under[parent] = classes_under.get(parent, 0) + classes_under[node]
    kept = sorted((n for n in names if names[n] > 0), key=lambda n: (distance[n], n))
    rows = [{
        "id": n,
        "parent": parent_of.get(n, ""),
        "label": ontology.concepts[n].name if n in ontology.concepts else n,
        "depth": distance[n],
        "names": names[n],
        "classes": classes_under.get(n, 0),
        "class_index": class_index.get(n, -1) if distance[n] == view.depth else -1,
        "extra_parents": extra.get(n, 0),
    } for n in kept]
    return Tree(pd.DataFrame(rows), view.root, view.depth)


# The most nodes a drawing holds: the figure measures every node's label (PIL, a few ms per
# node) and the browser lays out every node it is sent (11,056 nodes of a 200k-name level at
# depth 7 took 21 s to build, 2.6 MB of JSON; 783 nodes 1.3-5 s on the loaded machine).
MAX_DRAWN_NODES = 1_000
# What the Hierarchy page sends to the browser at most: rows of a node's names table, options
# of the Node picker without a search (the shallowest nodes), options of the Mention picker.
MAX_LISTED_NAMES = 1_000
MAX_NODE_OPTIONS = 1_000
MAX_MENTIONS = 300


@dataclass(frozen=True)
class DrawnPart:
    """The part of a large tree that is drawn at once.

    Attributes
    ----------
    tree : Tree
        The drawn nodes (the whole tree when it is small enough): the path from the root to
        the opened node, then the opened node's descendants ``levels`` levels deep (the
        opened node's level counted), parents before children as in the whole tree.
    rows : numpy.ndarray
        Positions of the drawn nodes in the whole tree's ``nodes``.
    opened : str
        The node the drawing opens at.
    levels : int
        Levels from the opened node that were kept (counting the opened node's own).
    total : int
        Nodes of the whole tree.
    """

    tree: Tree
    rows: np.ndarray
    opened: str
    levels: int
    total: int

    @property
    def cut(self) -> bool:
        """Whether nodes were left out."""
        return len(self.tree) < self.total


def drawn_part(tree: Tree, focus: str | None, levels: int, max_nodes: int | None = None) -> DrawnPart:
    """At most ``max_nodes`` nodes of ``tree`` to draw, opened at ``focus``.

    A tree with at most ``max_nodes`` nodes is drawn whole (the figure's ``maxdepth`` shows
    ``levels`` of it at once and a click goes deeper). A larger one keeps the path from the
    root to the opened node (``focus``, or its parent when ``focus`` is a leaf, as the figure
    opens it) and the opened node's descendants ``levels`` levels deep (deeper while they fit,
    so a click can still open them), one level fewer while they are too many (down to its
    children); children beyond the cap are left out, the smallest first.

    Raises
    ------
    UnknownConceptError
        If ``focus`` is not in the tree.
    """
    max_nodes = MAX_DRAWN_NODES if max_nodes is None else max_nodes
    ids = list(tree.nodes["id"])
    focus = focus or tree.root
    if focus not in tree._class_index:
        raise UnknownConceptError(f"{focus!r} is not in the drawn subtree under {tree.root}")
    parent_of = dict(zip(ids, tree.nodes["parent"]))
    children = tree._children
    opened = focus if focus == tree.root or children.get(focus) else parent_of[focus]
    levels = max(2, int(levels))  # the figure shows the opened node and its children at least
    if len(ids) <= max_nodes:
        return DrawnPart(tree, np.arange(len(ids)), opened, levels, len(ids))
    path = [opened]
    while parent_of[path[-1]]:
        path.append(parent_of[path[-1]])
    room = max_nodes - len(path) + 1  # the opened node is on the path
    by_level = [[opened]]
    while below := [c for n in by_level[-1] for c in children.get(n, [])]:
        # ``levels`` levels are shown at once; deeper ones are kept while they fit, for a click to open
        if len(by_level) >= levels and sum(map(len, by_level)) + len(below) > room:
            break
        by_level.append(below)
    while len(by_level) > 2 and sum(map(len, by_level)) > room:
        by_level.pop()
    if len(by_level) > 1 and 1 + len(by_level[1]) > room:
        size = dict(zip(ids, tree.nodes["names"]))
        by_level[1] = sorted(by_level[1], key=lambda n: (-size[n], n))[: max(0, room - 1)]
    keep = set(path) | {n for level in by_level for n in level}
    rows = np.asarray([i for i, n in enumerate(ids) if n in keep], dtype=np.int64)
    part = Tree(tree.nodes.iloc[rows].reset_index(drop=True), tree.root, tree.depth)
    return DrawnPart(part, rows, opened, len(by_level), len(ids))


def node_scores(tree: Tree, class_scores: np.ndarray, class_sizes: np.ndarray) -> np.ndarray:
    """A value per tree node from per-class values (e.g. per-class mAP gain).

    Class nodes get their own value; inner nodes the mean over the classes below them,
    weighted by each class's number of names (NaN classes left out; NaN when none is left).

    Parameters
    ----------
    tree : Tree
    class_scores : numpy.ndarray
        One value per class of the view.
    class_sizes : numpy.ndarray
        Names per class of the view (``LevelView.class_sizes()``).
    """
    class_scores = np.asarray(class_scores, dtype=float)
    class_sizes = np.asarray(class_sizes, dtype=float)
    out = []
    for node in tree.nodes["id"]:
        classes = tree.class_rows(node)
        values, weights = class_scores[classes], class_sizes[classes]
        ok = ~np.isnan(values) & (weights > 0)
        out.append(float(np.average(values[ok], weights=weights[ok])) if ok.any() else np.nan)
    return np.asarray(out)


def search_nodes(tree: Tree, text: str, limit: int = 20) -> list[str]:
    """Node ids whose id or label contains ``text`` (case-insensitive), exact id first."""
    needle = text.strip().casefold()
    if not needle:
        return []
    ids, labels = list(tree.nodes["id"]), list(tree.nodes["label"])
    hits = [i for i, label in zip(ids, labels) if needle in i.casefold() or needle in label.casefold()]
    hits.sort(key=lambda i: (i.casefold() != needle, len(labels[ids.index(i)])))
    return hits[:limit]


def nearest(vectors: np.ndarray, query: np.ndarray, k: int = 10, exclude: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Rows of the ``k`` rows of ``vectors`` most cosine-similar to ``query`` (unit vectors).

    Returns
    -------
    (rows, scores)
        Best first; ``exclude`` rows are never returned.
    """
    scores = np.asarray(vectors, dtype=np.float32) @ np.asarray(query, dtype=np.float32)
    if exclude is not None and len(exclude):
        scores[np.asarray(exclude, dtype=np.int64)] = -np.inf
    k = min(k, int(np.isfinite(scores).sum()))
    if k <= 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
    top = np.argpartition(-scores, k - 1)[:k]
    top = top[np.argsort(-scores[top], kind="stable")]
    return top.astype(np.int64), scores[top]


def hypernym_candidates(view: LevelView) -> tuple[list[str], np.ndarray]:
    """Every hypernym name of the level (the class concepts' own names) and its class index."""
    names, classes = [], []
    for i, class_id in enumerate(view.classes):
        for name in view.hypernym_names.get(class_id, []):
            names.append(name)
            classes.append(i)
    if not names:
        raise BiovizError(f"{view.title} has no hypernym names to rank")
    return names, np.asarray(classes, dtype=np.int64)


def hypernym_ranking(mention_vector: np.ndarray, hypernym_vectors: np.ndarray, *, hypernym_names: list[str],
                     hypernym_classes: np.ndarray, true_class: int, view: LevelView, k: int = 10) -> pd.DataFrame:
    """All hypernym names ranked by cosine to a mention, top ``k`` kept plus the first correct one.

    Parameters
    ----------
    mention_vector : numpy.ndarray
        Unit vector of the mention.
    hypernym_vectors : numpy.ndarray
        Unit vectors of ``hypernym_names``.
    hypernym_names : list of str
    hypernym_classes : numpy.ndarray
        Class index of each hypernym name.
    true_class : int
        The mention's class; its hypernym names are the correct answers.
    view : LevelView
        For class ids and labels.
    k : int
        Rows kept from the top.

    Returns
    -------
    pandas.DataFrame
        ``rank``, ``hypernym``, ``class``, ``class_label``, ``cosine``, ``correct``; the
        first correct hypernym is appended when it ranks below ``k``.
    """
    scores = np.asarray(hypernym_vectors, dtype=np.float32) @ np.asarray(mention_vector, dtype=np.float32)
    order = np.argsort(-scores, kind="stable")
    correct = hypernym_classes[order] == true_class
    keep = list(range(min(k, len(order))))
    first = int(np.argmax(correct)) if correct.any() else -1
    if first >= k:
        keep.append(first)
    rows = [{
        "rank": pos + 1,
        "hypernym": hypernym_names[order[pos]],
        "class": view.classes[hypernym_classes[order[pos]]],
        "class_label": view.class_labels[hypernym_classes[order[pos]]],
        "cosine": round(float(scores[order[pos]]), 4),
        "correct": bool(correct[pos]),
    } for pos in keep]
    return pd.DataFrame(rows)


def largest_gain_node(tree: Tree, values: np.ndarray | None) -> str:
    """The class with the largest finite value (the page's default node); the root without values.

    The root's nearest names ("ICD-10 (WHO 2019)") say nothing; the most improved class is
    where a reader looks first.
    """
    if values is None:
        return tree.root
    values = np.asarray(values, dtype=float)
    is_class = (tree.nodes["class_index"].to_numpy() >= 0) & np.isfinite(values)
    if not is_class.any():
        return tree.root
    best = np.flatnonzero(is_class)[int(np.argmax(values[is_class]))]
    return str(tree.nodes["id"].iloc[best])
