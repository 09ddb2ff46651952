"""Cosine-similarity matrices of a list of terms under two models, and where terms come from.

Term lists are typed or pasted (one per line), taken from a class of the level view or from
a concept with its synonyms and siblings, or read from the example sets in
``assets/examples/*.txt`` (one term per line, ``#`` comments, a blank line between groups;
BioLORD's Appendix B list among them). Each term may carry a group (an example set's group,
the class in the level view, the concept it names) used to colour and order the rows.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.cluster.hierarchy import leaves_list, linkage
from scipy.spatial.distance import squareform

from bioviz.errors import BiovizError, ModelError
from bioviz.models.vectors_coverage import Coverage, covered_terms
from bioviz.ontology.levels import LevelView
from bioviz.ontology.model import Ontology, normalise_name

logger = logging.getLogger(__name__)

EXAMPLES_DIR = Path(__file__).resolve().parents[2] / "assets" / "examples"
MAX_TERMS = 200  # beyond this a heatmap is unreadable and the page says so
ORDERS = ("given", "group", "cluster")


@dataclass(frozen=True)
class TermList:
    """Terms with an optional group per term (same length) and where they came from."""

    terms: tuple[str, ...]
    groups: tuple[str, ...]
    origin: str

    def __len__(self) -> int:
        return len(self.terms)


def _dedupe(terms, groups) -> tuple[tuple[str, ...], tuple[str, ...]]:
    seen: set[str] = set()
    out_terms, out_groups = [], []
    for term, group in zip(terms, groups):
        key = normalise_name(term)
        if key and key not in seen:
            seen.add(key)
            out_terms.append(" ".join(term.split()))
            out_groups.append(group)
    return tuple(out_terms), tuple(out_groups)


def parse_terms(text: str, origin: str = "typed") -> TermList:
    """Terms from pasted text: one per line (or separated by ``;``), ``#`` lines ignored.

    A blank line starts a new group, so a pasted example set keeps its groups. Commas are
    not separators: biomedical names contain them ("fracture of hip, unspecified").
    Duplicates (after case and space folding) are dropped.
    """
    terms: list[str] = []
    groups: list[str] = []
    group = 1
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("#"):
            continue
        if not stripped:
            if terms and groups[-1] == f"group {group}":
                group += 1
            continue
        for part in stripped.split(";"):
            if part.strip():
                terms.append(part.strip())
                groups.append(f"group {group}")
    deduped, grouped = _dedupe(terms, groups)
    if len(set(grouped)) == 1:  # no blank lines: one group says nothing
        grouped = ("",) * len(deduped)
    return TermList(deduped, grouped, origin)


def example_sets() -> dict[str, Path]:
    """``name -> path`` of the shipped example term lists (``assets/examples/*.txt``)."""
    return {p.stem: p for p in sorted(EXAMPLES_DIR.glob("*.txt"))}


def load_example(name: str) -> TermList:
    """One shipped example set by name (its file stem).

    Raises
    ------
    BiovizError
        If no example set has that name.
    """
    sets = example_sets()
    if name not in sets:
        raise BiovizError(f"unknown example set {name!r}: choose one of {', '.join(sets) or 'none'}")
    return parse_terms(sets[name].read_text(encoding="utf-8"), origin=f"example {name}")


def class_terms(view: LevelView, class_id: str, limit: int = 25, seed: int = 0) -> TermList:
    """Up to ``limit`` names of one class of the level view (a seeded sample when more)."""
    if class_id not in view.classes:
        raise BiovizError(f"{class_id!r} is not a class of {view.title}")
    index = view.classes.index(class_id)
    rows = np.flatnonzero(view.labels == index)
    if len(rows) > limit:
        rows = np.sort(np.random.default_rng(seed).choice(rows, size=limit, replace=False))
    terms = [view.names[r] for r in rows]
    groups = [view.name_concepts[r] for r in rows]
    deduped, grouped = _dedupe(terms, groups)
    return TermList(deduped, grouped, f"class {class_id} ({view.class_labels[index]})")


# The most classes a class picker lists at once: a deep level of a large ontology has tens of
# thousands, and a selectbox sends every option to the browser.
MAX_CLASS_OPTIONS = 1_000


def find_classes(view: LevelView, text: str = "", limit: int | None = None) -> list[str]:
    """Up to ``limit`` (default :data:`MAX_CLASS_OPTIONS`) class ids of ``view`` matching ``text``.

    A class matches when ``text`` (case-insensitive) is in its id or label; an exact id comes
    first, then the level's order. Empty ``text``: the level's first classes.
    """
    limit = MAX_CLASS_OPTIONS if limit is None else limit
    needle = text.strip().casefold()
    if not needle:
        return list(view.classes[:limit])
    hits = [c for c, label in zip(view.classes, view.class_labels) if needle in c.casefold() or needle in label.casefold()]
    hits.sort(key=lambda c: c.casefold() != needle)  # stable: the level's order otherwise
    return hits[:limit]


def concept_family_terms(ontology: Ontology, concept_id: str, max_siblings: int = 8) -> TermList:
    """A concept's names (preferred + synonyms), then its siblings' names, grouped by concept.

    Siblings are the other children of the concept's parents, in id order; each contributes
    its preferred name and synonyms.
    """
    concept = ontology.concept(concept_id)
    terms = list(concept.names)
    groups = [concept.id] * len(terms)
    siblings = sorted({s for p in ontology.parents(concept_id) for s in ontology.children(p)} - {concept_id})
    for sibling_id in siblings[:max_siblings]:
        sibling = ontology.concepts[sibling_id]
        terms += list(sibling.names)
        groups += [sibling.id] * len(sibling.names)
    deduped, grouped = _dedupe(terms, groups)
    return TermList(deduped, grouped, f"{concept.id} ({concept.name}) with {min(len(siblings), max_siblings)} siblings")


def view_groups(view: LevelView, terms) -> tuple[str, ...]:
    """Class id of each term in the level view ("" for terms the view does not hold)."""
    out = []
    for term in terms:
        label = view.class_of(term)
        out.append("" if label is None else view.classes[label])
    return tuple(out)


def cosine_matrix(vectors: np.ndarray) -> np.ndarray:
    """Pairwise cosine similarities of L2-normalised rows, clipped to [-1, 1]."""
    vectors = np.asarray(vectors, dtype=np.float64)
    return np.clip(vectors @ vectors.T, -1.0, 1.0)


def cluster_order(similarity: np.ndarray) -> np.ndarray:
    """Row order from average-linkage hierarchical clustering on ``1 - similarity``.

    Uses scipy's optimal leaf ordering, so neighbours in the order are similar.
    """
    n = len(similarity)
    if n < 3:
        return np.arange(n)
    distance = np.clip(1.0 - np.asarray(similarity, dtype=np.float64), 0.0, 2.0)
    distance = (distance + distance.T) / 2.0
    np.fill_diagonal(distance, 0.0)
    tree = linkage(squareform(distance, checks=False), method="average", optimal_ordering=True)
    return leaves_list(tree).astype(np.int64)


def group_order(groups) -> np.ndarray:
    """Row order that keeps the given order but brings each group's terms together.

    Groups appear in order of first appearance; terms without a group go last.
    """
    first: dict[str, int] = {}
    for i, group in enumerate(groups):
        first.setdefault(group, i)
    return np.array(sorted(range(len(groups)), key=lambda i: (groups[i] == "", first[groups[i]], i)), dtype=np.int64)


@dataclass(frozen=True)
class SimilarityComparison:
    """Two similarity matrices over the same ordered terms, and their difference.

    Attributes
    ----------
    terms, groups : tuple of str
        Terms in display order and their groups.
    a, b : numpy.ndarray
        Cosine similarity under the baseline and the compared model.
    model_a, model_b : str
    order : str
        How the terms were ordered (``given``, ``group``, ``cluster``).
    """

    terms: tuple[str, ...]
    groups: tuple[str, ...]
    a: np.ndarray
    b: np.ndarray
    model_a: str
    model_b: str
    order: str

    @property
    def difference(self) -> np.ndarray:
        """``b - a``: positive where the compared model finds terms more similar."""
        return self.b - self.a

    def long_table(self):
        """One row per ordered term pair (i < j) with both similarities and the difference."""
        i, j = np.triu_indices(len(self.terms), k=1)
        return pd.DataFrame({
            "term_1": [self.terms[k] for k in i], "group_1": [self.groups[k] for k in i],
            "term_2": [self.terms[k] for k in j], "group_2": [self.groups[k] for k in j],
            "similarity_a": self.a[i, j].round(4), "similarity_b": self.b[i, j].round(4),
            "difference": (self.b - self.a)[i, j].round(4),
        })


def compare_terms(terms: TermList, vectors_a: np.ndarray, vectors_b: np.ndarray, *, model_a: str, model_b: str,
                  order: str = "given") -> SimilarityComparison:
    """Similarity matrices of ``terms`` under two models, in the chosen order.

    Parameters
    ----------
    terms : TermList
    vectors_a, vectors_b : numpy.ndarray
        L2-normalised vectors of the terms (same order as ``terms.terms``).
    model_a, model_b : str
        Model labels for titles.
    order : str
        ``given`` (as listed), ``group`` (groups together), ``cluster`` (hierarchical
        clustering of the compared model's similarities, so its structure shows as blocks).

    Raises
    ------
    BiovizError
        Fewer than two terms, too many, or an unknown order.
    """
    if len(terms) < 2:
        raise BiovizError("give at least two terms to compare")
    if len(terms) > MAX_TERMS:
        raise BiovizError(f"{len(terms)} terms: at most {MAX_TERMS} fit in a readable matrix")
    if order not in ORDERS:
        raise BiovizError(f"unknown order {order!r}: use one of {', '.join(ORDERS)}")
    sim_a, sim_b = cosine_matrix(vectors_a), cosine_matrix(vectors_b)
    if order == "group":
        idx = group_order(terms.groups)
    elif order == "cluster":
        idx = cluster_order(sim_b)
    else:
        idx = np.arange(len(terms))
    return SimilarityComparison(
        tuple(terms.terms[i] for i in idx), tuple(terms.groups[i] for i in idx),
        sim_a[np.ix_(idx, idx)], sim_b[np.ix_(idx, idx)], model_a, model_b, order,
    )


def find_concept(ontology: Ontology, text: str) -> str:
    """Id of the concept ``text`` names: an exact id, else the best name match (ids first, shortest names).

    Raises
    ------
    BiovizError
        When no concept has that id or a name containing ``text``.
    """
    hits = ontology.search(text, limit=1)  # an exact id comes first
    if not hits:
        raise BiovizError(f"no concept with id or name {text.strip()!r} in {ontology.label}")
    return hits[0].id


def covered_term_list(terms: TermList, models) -> tuple[TermList, tuple[Coverage, ...]]:
    """``terms`` without those a vectors file among ``models`` lacks (none is given a made-up vector), and each
    file's coverage.

    Raises
    ------
    ModelError
        When no term is left.
    """
    keep, found = covered_terms(terms.terms, models)
    if keep.all():
        return terms, found
    if not keep.any():
        raise ModelError(f"none of the {len(terms)} terms has a vector in {' and '.join(c.label for c in found)}")
    rows = np.flatnonzero(keep)
    return TermList(tuple(terms.terms[i] for i in rows), tuple(terms.groups[i] for i in rows), terms.origin), found


def with_class_groups(terms: TermList, view: LevelView) -> TermList:
    """The same terms grouped by their class in ``view`` ("" for terms the view does not hold)."""
    return TermList(terms.terms, view_groups(view, terms.terms), terms.origin)
