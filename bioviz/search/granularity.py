"""A proposed concept's place in the hierarchy, and a coder's move one level up or down.

Half of the first-concept misses of term coding are one hierarchy step off (issue 31: on
held-out PubMed mentions, 105 of 323 misses were a descendant of the gold concept, 48 an
ancestor, 22 a sibling). A coder who sees the proposed concept's parents and children can fix
those in one click; this module gives them and records the coder's move:

- :func:`granularity` -- a concept's parents and children within the level being coded
  against: edges of the ontology's consistent taxonomy (:meth:`Ontology.taxonomy`, the graph
  every level view is cut from: a shortcut edge such as *atrial fibrillation* → *heart disease*
  beside *atrial fibrillation* → *arrhythmia* → *heart disease* is not "one level"), bounded by
  the level's root (a parent outside the root's subtree, or the root itself, is no code of
  this level: ICD-10's root is a synthetic "ICD-10 (WHO 2019)").
- :class:`CodingChoice` and :func:`move` -- the model's proposal for a term, the concept the
  coder chose, and how (``model``, ``moved up``, ``moved down``).
- :func:`with_parents` and :func:`with_choices` -- the columns a coding frame
  (:func:`bioviz.search.term_coding.code_terms`) gains for the CLI and the page's CSV.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import networkx as nx
import pandas as pd

from bioviz.errors import BiovizError, UnknownConceptError, shown
from bioviz.ontology.model import Ontology

UP, DOWN, KEEP = "up", "down", "keep"
MOVES = (UP, DOWN, KEEP)
# How a chosen concept came about: the values of a coding's ``choice`` column.
MODEL, MOVED_UP, MOVED_DOWN, MOVED_BOTH = "model", "moved up", "moved down", "moved up and down"
CHOICE_COLUMNS = ("proposed_id", "proposed_name", "chosen_id", "chosen_name", "choice")


@dataclass(frozen=True)
class ConceptRef:
    """A concept as a coder sees it: its id (the code) and preferred name."""

    id: str
    name: str


@dataclass(frozen=True)
class Granularity:
    """A concept with its parents and children within a level.

    Attributes
    ----------
    concept : ConceptRef
    parents : tuple of ConceptRef
        Direct parents in the ontology's consistent taxonomy that lie under the level's root
        (the root excluded), by id.
    children : tuple of ConceptRef
        Direct children in that taxonomy, by id; none for a concept outside the level's root.
    """

    concept: ConceptRef
    parents: tuple[ConceptRef, ...] = ()
    children: tuple[ConceptRef, ...] = ()


def _ref(ontology: Ontology, concept_id: str) -> ConceptRef:
    return ConceptRef(concept_id, ontology.concepts[concept_id].name)


def granularity(ontology: Ontology, concept_id: str, *, root: str | None = None) -> Granularity:
    """The parents and children of ``concept_id`` within the level rooted at ``root``.

    Parameters
    ----------
    ontology : Ontology
        The level's ontology.
    concept_id : str
    root : str, optional
        The level's root (``LevelView.root``); default the ontology's default root. A move
        never leaves its subtree, nor reaches the root itself.

    Returns
    -------
    Granularity

    Raises
    ------
    UnknownConceptError
        ``concept_id`` is not a concept of ``ontology``.

    Examples
    --------
    >>> import networkx as nx
    >>> from bioviz.ontology.model import Concept
    >>> graph = nx.DiGraph([("R", "A"), ("A", "A1"), ("A", "A2")])
    >>> onto = Ontology("toy", "1", {c: Concept(c, c.lower()) for c in graph}, graph, "R")
    >>> found = granularity(onto, "A1")
    >>> [p.id for p in found.parents], [c.id for c in granularity(onto, "A").children]
    (['A'], ['A1', 'A2'])
    >>> granularity(onto, "A").parents  # the root bounds the level: no move up to it
    ()
    """
    ontology.concept(concept_id)  # one line for an unknown id
    root = root or ontology.default_root
    graph = ontology.taxonomy()[0]
    inside = concept_id == root or (root in graph and root in nx.ancestors(graph, concept_id))
    if not inside:  # an exact code typed from outside the level: no move keeps it in the level
        return Granularity(_ref(ontology, concept_id))
    parents = [p for p in sorted(graph.predecessors(concept_id))
               if p != root and p in ontology.concepts and root in nx.ancestors(graph, p)]
    children = [c for c in sorted(graph.successors(concept_id)) if c in ontology.concepts]
    return Granularity(_ref(ontology, concept_id), tuple(_ref(ontology, p) for p in parents),
                       tuple(_ref(ontology, c) for c in children))


@dataclass(frozen=True)
class CodingChoice:
    """A term's concept: the model's proposal, the coder's choice, and the moves between them.

    Attributes
    ----------
    term : str
    proposed : ConceptRef
        The model's first concept for the term.
    chosen : ConceptRef
        The concept the coder keeps (the proposal until a move).
    moves : tuple of str
        The coder's moves from the proposal, in order (``"up"``, ``"down"``).
    """

    term: str
    proposed: ConceptRef
    chosen: ConceptRef
    moves: tuple[str, ...] = ()

    @property
    def how(self) -> str:
        """``model`` (the proposal kept, or moved back to), ``moved up``, ``moved down`` or ``moved up and down``.

        >>> a, b = ConceptRef("A", "a"), ConceptRef("B", "b")
        >>> CodingChoice("t", a, a).how, CodingChoice("t", a, b, ("up",)).how, CodingChoice("t", a, b, ("up", "down")).how
        ('model', 'moved up', 'moved up and down')
        """
        if self.chosen == self.proposed:
            return MODEL
        if set(self.moves) == {UP}:
            return MOVED_UP
        if set(self.moves) == {DOWN}:
            return MOVED_DOWN
        return MOVED_BOTH


def proposal(term: str, concept: ConceptRef) -> CodingChoice:
    """The model's proposal for ``term``, not moved yet."""
    return CodingChoice(term, concept, concept)


def move(choice: CodingChoice, ontology: Ontology, kind: str, target: str | None = None, *,
         root: str | None = None) -> CodingChoice:
    """``choice`` after the coder's move: one level up to a parent, down to a child, or back to the proposal.

    Parameters
    ----------
    choice : CodingChoice
    ontology : Ontology
        The level's ontology.
    kind : {"up", "down", "keep"}
        ``keep`` goes back to the model's proposal (the moves are forgotten).
    target : str, optional
        The parent or child moved to; may be left out when there is only one.
    root : str, optional
        The level's root (see :func:`granularity`).

    Returns
    -------
    CodingChoice
        With ``chosen`` the target and the move appended to ``moves``.

    Raises
    ------
    BiovizError
        An unknown kind, a target that is not a parent (child) of the chosen concept within the
        level, or no target given where there are several or none.
    """
    if kind not in MOVES:
        raise BiovizError(f"a move is one of {', '.join(MOVES)} (got {shown(kind)})")
    if kind == KEEP:
        return proposal(choice.term, choice.proposed)
    around = granularity(ontology, choice.chosen.id, root=root)
    options = around.parents if kind == UP else around.children
    word = "parent" if kind == UP else "child"
    if target is None:
        if len(options) != 1:
            raise BiovizError(f"{choice.chosen.id} has {len(options)} {word}{'ren' if word == 'child' else 's'} "
                              f"in this level: name the one to move {kind} to")
        found = options[0]
    else:
        found = next((c for c in options if c.id == target), None)
        if found is None:
            raise BiovizError(f"{shown(target)} is not a {word} of {choice.chosen.id} in this level")
    return CodingChoice(choice.term, choice.proposed, found, (*choice.moves, kind))


def parents_column(frame: pd.DataFrame, ontology: Ontology, suffix: str = "a", *,
                   root: str | None = None) -> tuple[list[str], list[str]]:
    """Per row of a coding frame, the parents of the ``code_<suffix>`` concept: ids and names, ``; ``-joined.

    Each concept is looked up once (a coding of 5,000 terms has far fewer distinct concepts); an
    empty or unknown code has no parents.

    Parameters
    ----------
    frame : pandas.DataFrame
        A :func:`~bioviz.search.term_coding.code_terms` frame.
    ontology : Ontology
    suffix : {"a", "b"}
        Which model's first concepts.
    root : str, optional
        The level's root (see :func:`granularity`).

    Returns
    -------
    (list of str, list of str)
        The parents' ids and their names, one string per row.
    """
    found: dict[str, Granularity | None] = {}
    ids, names = [], []
    for code in frame[f"code_{suffix}"].fillna(""):
        if code not in found:
            try:
                found[code] = granularity(ontology, code, root=root) if code else None
            except UnknownConceptError:  # a name of the level without an ontology concept: nothing above it
                found[code] = None
        parents = found[code].parents if found[code] is not None else ()
        ids.append("; ".join(p.id for p in parents))
        names.append("; ".join(p.name for p in parents))
    return ids, names


def with_parents(frame: pd.DataFrame, ontology: Ontology, *, root: str | None = None) -> pd.DataFrame:
    """A copy of a coding frame with, per model, its first concept's parents: ``parent_a``, ``parent_name_a``, ...

    The parents are those of :func:`granularity` (within the level rooted at ``root``), ids and
    names ``; ``-joined in the same order; empty where the concept has none in the level.
    ``export_frame`` names them ``parent (label)`` and ``parent name (label)``.

    Parameters
    ----------
    frame : pandas.DataFrame
        A :func:`~bioviz.search.term_coding.code_terms` frame (not changed).
    ontology : Ontology
        The level's ontology.
    root : str, optional
        The level's root (``LevelView.root``).

    Returns
    -------
    pandas.DataFrame
    """
    out = frame.copy()
    for suffix in "ab":
        if f"code_{suffix}" in frame.columns:
            out[f"parent_{suffix}"], out[f"parent_name_{suffix}"] = parents_column(frame, ontology, suffix, root=root)
    return out


def current_choices(frame: pd.DataFrame, choices: Mapping[str, CodingChoice]) -> list[CodingChoice | None]:
    """Per row of a coding frame, the coder's choice for its term, else the model's (first model's) proposal.

    A kept choice whose proposal is not the row's first concept any more (the list coded again
    under another ranking or model) is not applied: it was made for another proposal.

    Parameters
    ----------
    frame : pandas.DataFrame
        A :func:`~bioviz.search.term_coding.code_terms` frame (``term``, ``code_a``, ``name_a``).
    choices : mapping of str to CodingChoice
        The coder's choices by term.

    Returns
    -------
    list of CodingChoice or None
        One per row; None for a row without a concept.
    """
    out: list[CodingChoice | None] = []
    for term, code, name in zip(frame["term"], frame["code_a"].fillna(""), frame["name_a"].fillna("")):
        if not code:
            out.append(None)
            continue
        kept = choices.get(term)
        out.append(kept if kept is not None and kept.proposed.id == code else proposal(term, ConceptRef(code, name)))
    return out


def with_choices(frame: pd.DataFrame, choices: Mapping[str, CodingChoice]) -> pd.DataFrame:
    """A copy of a coding frame with the coder's choices: ``proposed_id``, ``proposed_name``, ``chosen_id``,
    ``chosen_name`` and ``choice`` (``model``, ``moved up``, ``moved down``, ``moved up and down``).

    Parameters
    ----------
    frame : pandas.DataFrame
        A :func:`~bioviz.search.term_coding.code_terms` frame; the proposal is the first model's
        first concept (``code_a``).
    choices : mapping of str to CodingChoice
        The coder's choices by term (terms are unique in a coding); a term without one keeps
        the model's concept.

    Returns
    -------
    pandas.DataFrame
        Empty strings in the new columns for a term without a concept.
    """
    out = frame.copy()
    current = current_choices(frame, choices)
    values = {column: [] for column in CHOICE_COLUMNS}
    for choice in current:
        row = ("", "", "", "", "") if choice is None else (
            choice.proposed.id, choice.proposed.name, choice.chosen.id, choice.chosen.name, choice.how)
        for column, value in zip(CHOICE_COLUMNS, row):
            values[column].append(value)
    for column in CHOICE_COLUMNS:
        out[column] = values[column]
    return out
