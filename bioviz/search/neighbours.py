"""Neighbour rankings of a query over a level view, as in the papers' ranking tables.

The papers compare encoders by the top-ranked names for one mention, marking the names
that share its class (fewshot-biomedical-names Table 4) or belong to its synonym set
(conceptual-grounding Tables 6-7). This module gives those rankings for any text: which
class and concept the query has in the view, its top-k neighbours with both marks, and
where each neighbour sits in another model's full ranking.
"""

from __future__ import annotations

import logging
import re
import weakref
from dataclasses import dataclass, field, replace
from typing import Callable

import numpy as np

from bioviz.errors import BiovizError
from bioviz.models.cached_encoding import encode_cached
from bioviz.models.encoders import Progress
from bioviz.models.registry import load_encoder
from bioviz.models.encoding_estimate import EncodingEstimate
from bioviz.models.encoding_session import EncodingSession
from bioviz.models.model_spec import ModelSpec
from bioviz.ontology import DEFAULT_SPLIT, SplitSpec
from bioviz.ontology.model import Ontology, normalise_name
from bioviz.search.hybrid import EXACT_BOOST, ExpandedForms, NameMatcher, Ranking, SparseNames, name_scores
from bioviz.search.index import NeighbourIndex
from bioviz.search.vectors_query import query_answer
from bioviz.space import Space

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class QueryInfo:
    """Where a query text sits in a level view.

    Attributes
    ----------
    text : str
    row : int or None
        Row of the same name (normalised) in the view, if it is one of its names.
    class_id, class_label : str or None
        The class of that row.
    concept_ids : tuple of str
        Concepts that carry the text in the ontology (or the row's concept).
    typed : str or None
        What was typed, when :func:`resolve_query` resolved it to ``text`` (a concept id to
        the concept's name, or a name typed in another case to its spelling in the level).
    resolved_by : str or None
        ``"id"`` or ``"name"`` when :func:`resolve_query` resolved the typed text; None for
        free text (and for :func:`find_query`, which never resolves).
    """

    text: str
    row: int | None = None
    class_id: str | None = None
    class_label: str | None = None
    concept_ids: tuple[str, ...] = field(default_factory=tuple)
    typed: str | None = None
    resolved_by: str | None = None

    @property
    def in_ontology(self) -> bool:
        """True when the text is a name of the view or of the ontology."""
        return self.row is not None or bool(self.concept_ids)


def find_query(text: str, view, ontology: Ontology | None = None) -> QueryInfo:
    """Locate ``text`` in ``view`` (and ``ontology``), comparing normalised names.

    Parameters
    ----------
    text : str
        Any text; free text simply has no row, class or concept.
    view : LevelView
    ontology : Ontology, optional
        To find the concepts of names the view dropped (ambiguous or hypernym names).
    """
    key = normalise_name(text)
    view.class_of(text)  # builds the view's normalised-name -> row lookup once
    lookup = getattr(view, "_row_of", None)
    if lookup is not None:
        row = lookup.get(key)
    else:  # a view without the lookup: one linear scan
        row = next((i for i, name in enumerate(view.names) if normalise_name(name) == key), None)
    concepts: list[str] = []
    if ontology is not None:
        concepts = [c.id for c in ontology.lookup(text)]
    if row is not None and view.name_concepts[row] not in concepts:
        concepts.insert(0, view.name_concepts[row])
    if row is None:
        return QueryInfo(text=text, concept_ids=tuple(concepts))
    label = int(view.labels[row])
    return QueryInfo(text, int(row), view.classes[label], view.class_labels[label], tuple(concepts))


_CODE_LIKE = re.compile(r"^[^\s]*\d[^\s]*$")  # one token with a digit: worth comparing against every id
_ICD_WITHOUT_DOT = re.compile(r"^[A-Z]\d{2}[0-9A-Z]{1,4}$")  # R3911 for R39.11


def _id_key(text: str) -> str:
    """An id compared without case and dots: ``r3911`` for ``R39.11``."""
    return text.casefold().replace(".", "")


def match_concept_id(text: str, ontology: Ontology | None = None, view=None) -> str | None:
    """The concept whose id ``text`` is: exactly, in another case, or without the dot of an ICD code.

    Parameters
    ----------
    text : str
        What was typed (``R39.11``, ``r39.11``, ``R3911``, ``hp:0001250``).
    ontology : Ontology, optional
        Whose ids are matched; without it, the ids of the view's names and classes.
    view : LevelView, optional

    Returns
    -------
    str or None
        The id as the ontology spells it; None when no id, or several, match.

    Examples
    --------
    >>> import networkx as nx
    >>> from bioviz.ontology.model import Concept
    >>> onto = Ontology("icd", "1", {"R39.11": Concept("R39.11", "Hesitancy of micturition")}, nx.DiGraph(), "R39.11")
    >>> [match_concept_id(t, onto) for t in ("R39.11", "r39.11", "R3911", "hesitancy")]
    ['R39.11', 'R39.11', 'R39.11', None]
    """
    text = text.strip()
    if not text:
        return None
    if ontology is not None:
        ids = ontology.concepts
    elif view is not None:
        ids = dict.fromkeys([*view.name_concepts, *view.classes])
    else:
        return None
    upper = text.upper()
    # the spellings that need no scan: as typed, upper case (ICD, HP:), an ICD code's dot put back
    candidates = [text, upper]
    if "." not in upper and _ICD_WITHOUT_DOT.match(upper):
        candidates.append(f"{upper[:3]}.{upper[3:]}")
    for candidate in candidates:
        if candidate in ids:
            return candidate
    if not _CODE_LIKE.match(text):
        return None
    key = _id_key(text)
    found = [concept_id for concept_id in ids if _id_key(concept_id) == key]  # one pass over the ids
    return found[0] if len(found) == 1 else None


def _row_of(view, name: str) -> int | None:
    """Row of ``name`` (normalised) in ``view``, or None."""
    view.class_of(name)  # builds the view's normalised-name -> row lookup once
    lookup = getattr(view, "_row_of", None)
    if lookup is not None:
        return lookup.get(normalise_name(name))
    key = normalise_name(name)
    return next((i for i, n in enumerate(view.names) if normalise_name(n) == key), None)


def _concept_query(concept_id: str, view, ontology: Ontology | None) -> QueryInfo:
    """The query a concept id stands for: its name in the level (its row and class), else its preferred name."""
    concept = ontology.concepts.get(concept_id) if ontology is not None else None
    names = list(concept.names) if concept is not None else \
        [n for n, c in zip(view.names, view.name_concepts) if c == concept_id][:1]
    for name in names:  # the preferred name first, then the synonyms the level kept
        row = _row_of(view, name)
        if row is not None and view.name_concepts[row] == concept_id:
            label = int(view.labels[row])
            others = [c.id for c in ontology.lookup(name)] if ontology is not None else []
            concepts = tuple(dict.fromkeys([concept_id, *others]))
            return QueryInfo(view.names[row], int(row), view.classes[label], view.class_labels[label], concepts)
    name = concept.name if concept is not None else concept_id
    if concept_id in view.classes:  # a class of the level: its names are the class's hypernym names
        label = view.classes.index(concept_id)
        return QueryInfo(name, None, concept_id, view.class_labels[label], (concept_id,))
    return QueryInfo(name, None, None, None, (concept_id,))


def resolve_query(text: str, view, ontology: Ontology | None = None) -> QueryInfo:
    """Locate ``text`` like :func:`find_query`, resolving an exact concept id or name to its concept.

    - An exact concept id (any case; an ICD code with or without its dot: ``R39.11``,
      ``r3911``) becomes that concept's name as the level has it (its preferred name first,
      with its row and class), or its preferred name when the level does not hold it.
    - An exact name in another case or spacing becomes the level's (or ontology's) spelling
      of it, with its row and class.
    - Anything else is free text, as :func:`find_query` gives it.

    Rank the resolved ``info.text`` (not what was typed): a code ranked as text has
    nonsense neighbours. ``info.typed`` keeps what was typed, ``info.resolved_by`` says how
    it was resolved.

    Parameters
    ----------
    text : str
        What the user typed.
    view : LevelView
    ontology : Ontology, optional
        For ids and names the level does not hold (without it, only the level's).
    """
    concept_id = match_concept_id(text, ontology, view)
    if concept_id is not None:
        return replace(_concept_query(concept_id, view, ontology), typed=text, resolved_by="id")
    info = find_query(text, view, ontology)
    spelling = view.names[info.row] if info.row is not None else None
    if spelling is None and info.concept_ids and ontology is not None:
        key = normalise_name(text)
        spelling = next((n for n in ontology.concepts[info.concept_ids[0]].names if normalise_name(n) == key), None)
    if spelling is None:
        return info
    return replace(info, text=spelling, typed=text, resolved_by="name")


def level_space(view, model: ModelSpec, *, batch_size: int = 64, progress: Progress | None = None,
                use_cache: bool = True, report=None, owner: str = "a command") -> tuple[Space, dict]:
    """Vectors of every name of ``view`` under ``model``, through the vector cache.

    A level another process is encoding already (the warm-up, a page, a job) is waited for,
    not encoded twice (:func:`bioviz.models.shared_encoding.encode_shared`): ``report``
    receives its :class:`~bioviz.models.shared_encoding.EncodingProgress` (names done, the
    recent rate, the time left), ``owner`` says who this is to whoever waits for it.

    Returns
    -------
    (Space, stats)
        The Space (rows aligned with ``view.names``) and ``names``, ``cache_hits``,
        ``encoded``, ``seconds``, ``names_per_second``.
    """
    encoder = load_encoder(model)
    if use_cache:
        session = EncodingSession.of(encoder, view.names, owner=owner)
        vectors, stats = session.encode(report=report, progress=progress, batch_size=batch_size)
    else:
        vectors, stats = encode_cached(encoder, view.names, batch_size=batch_size, progress=progress, use_cache=False)
    info = {"names": stats.names, "cache_hits": stats.cache_hits, "encoded": stats.encoded,
            "seconds": round(stats.seconds, 3), "names_per_second": round(stats.names_per_second, 1),
            "dim": int(vectors.shape[1]), "fingerprint": encoder.fingerprint}  # not encoder.dim: loads weights
    return Space(tuple(view.names), vectors, encoder.label), info


def query_vector(text: str, model: ModelSpec) -> np.ndarray:
    """Unit vector of one query text (under a vectors file that lacks it, its nearest name's:
    :func:`bioviz.search.vectors_query.query_answer` says which)."""
    return query_answer(text, model).vector


def rank_neighbours(index: NeighbourIndex, vector: np.ndarray, query: QueryInfo, *, k: int = 10,
                    restrict_class: str | None = None,
                    other: tuple[NeighbourIndex, np.ndarray] | None = None,
                    ranking: Ranking = Ranking(), sparse: SparseNames | None = None,
                    forms: ExpandedForms | None = None, other_forms: ExpandedForms | None = None,
                    placed: tuple[tuple[str, ...], ...] = ()) -> list[dict]:
    """Top-k neighbours of a query, marked as in the papers' ranking tables.

    Parameters
    ----------
    index : NeighbourIndex
        Built over the view's names (:meth:`NeighbourIndex.from_view`).
    vector : numpy.ndarray
        The query's vector from the same model.
    query : QueryInfo
        From :func:`find_query`; names equal to the query are left out of the ranking.
    k : int
    restrict_class : str, optional
        Rank only names of this class.
    other : (NeighbourIndex, vector), optional
        The compared model's index and query vector: each hit gets its rank there (under the same ranking).
    ranking : Ranking
        ``dense``: cosine through the index; ``hybrid`` (:mod:`bioviz.search.hybrid`): the names of a
        concept one of whose names equals the query but for case, spacing and punctuation first,
        then cosine plus the weighted char-tfidf cosine (``score`` is that sum).
    sparse : SparseNames, optional
        The index's names under the level's char-tfidf (:func:`sparse_names`): needed by ``hybrid``.
    forms, other_forms : ExpandedForms, optional
        The query's expanded forms (:func:`bioviz.search.lexicon.expanded_forms`) under this model and
        the compared one: every name is then scored against the query and its forms, keeping the
        best (:func:`~bioviz.search.hybrid.name_scores`); exact matches of the query itself still
        come first under ``hybrid``.
    placed : tuple of tuples of str
        Concepts the clinical vocabulary places first (:attr:`bioviz.search.lexicon.QueryExpansion.placed`),
        one tier per sense: every name of a tier's concepts ranks above the next tier's and above all
        other names, the ranking's score ordering names within a tier. The same for both models.

    Returns
    -------
    list of dict
        ``rank, name, concept_id, class_id, class_label, score, same_class, same_concept, placed``
        (the name's concept was placed by the vocabulary) and, with ``other``, ``other_rank`` and
        ``rank_change`` (``other_rank - rank``: positive when this model ranks the name higher).
    """
    exclude = index.rows_named(query.text) or None  # the query's own name is not its neighbour
    if ranking.hybrid or forms is not None or placed:  # expanded forms are scored with every name, as hybrid is
        scored = (ranking, sparse, forms, other_forms, placed)
        return _hybrid_neighbours(index, vector, query, k, restrict_class, other, scored, exclude)
    hits = index.search(vector, k=k, restrict_class=restrict_class, exclude_rows=exclude)
    rows = [h.as_dict() for h in hits]
    _mark(rows, query)
    for row in rows:
        row["placed"] = False
    if other is not None and rows:
        other_index, other_vector = other
        ranks = other_index.ranks(other_vector, [r["row"] for r in rows], exclude_rows=exclude)
        for row, other_rank in zip(rows, ranks):
            row["other_rank"] = int(other_rank)
            row["rank_change"] = int(other_rank) - row["rank"]
    return rows


def _mark(rows: list[dict], query: QueryInfo) -> None:
    """Round each row's score and mark whether it shares the query's class or concept (the tables' colours)."""
    concepts = set(query.concept_ids)
    for row in rows:
        row["score"] = round(row["score"], 4)
        row["same_class"] = query.class_id is not None and row["class_id"] == query.class_id
        row["same_concept"] = bool(concepts) and row["concept_id"] in concepts


# One name matcher per index, built on its first hybrid query: every name of the level goes
# through match_key, which on a large level costs more than the ranking itself.
_MATCHERS: "weakref.WeakKeyDictionary[NeighbourIndex, NameMatcher]" = weakref.WeakKeyDictionary()


def _matcher(index: NeighbourIndex) -> NameMatcher:
    if index not in _MATCHERS:
        _MATCHERS[index] = NameMatcher(index.space.names, index.concept_ids or ())
    return _MATCHERS[index]


def placed_rows(index: NeighbourIndex, placed: tuple[tuple[str, ...], ...]) -> list[list[int]]:
    """The index rows of each tier's concepts (a concept in two tiers counts in the first)."""
    tier_of: dict[str, int] = {}
    for tier, concepts in enumerate(placed):
        for concept in concepts:
            tier_of.setdefault(concept, tier)
    rows: list[list[int]] = [[] for _ in placed]
    for row, concept in enumerate(index.concept_ids or ()):
        if concept in tier_of:
            rows[tier_of[concept]].append(row)
    return rows


def _hybrid_order(index: NeighbourIndex, vector: np.ndarray, query: QueryInfo, ranking: Ranking,
                  sparse: SparseNames | None, exclude, forms: ExpandedForms | None = None,
                  placed: tuple[tuple[str, ...], ...] = ()) -> tuple[np.ndarray, np.ndarray]:
    """Every row's hybrid score and its ordering key (exact-match concepts' names lifted above all others,
    then the placed concepts' names, tier by tier)."""
    scores = name_scores(np.asarray(vector, dtype=np.float32).reshape(1, -1), index.vectors, ranking, sparse=sparse,
                         texts=[query.text], forms=forms)[0]
    key = scores.copy()
    exact = set(_matcher(index).concepts(query.typed or "", query.text)) if ranking.hybrid else set()
    for tier, rows in enumerate(placed_rows(index, placed)):
        if rows:  # a tier above the next: the key's spread within a tier is below 2 + MAX_WEIGHT (13 apart)
            key[np.asarray(rows, dtype=np.int64)] += EXACT_BOOST + (len(placed) - tier) * 13.0
    if exact:  # above every placed tier
        key[[row for row, concept in enumerate(index.concept_ids) if concept in exact]] += 10 * EXACT_BOOST
    if exclude:
        key[np.asarray(exclude, dtype=np.int64)] = -np.inf
    return scores, key


def _hybrid_neighbours(index: NeighbourIndex, vector: np.ndarray, query: QueryInfo, k: int,
                       restrict_class: str | None, other, scored: tuple, exclude) -> list[dict]:
    """:func:`rank_neighbours` under a hybrid ranking or with expanded forms: every name scored (no approximate index).

    ``scored`` is ``(ranking, sparse, forms, other_forms, placed)``.
    """
    ranking, sparse, forms, other_forms, placed = scored
    scores, key = _hybrid_order(index, vector, query, ranking, sparse, exclude, forms, placed)
    if restrict_class is not None and index.classes is not None:
        key[np.asarray([c != restrict_class for c in index.classes])] = -np.inf
    order = [int(row) for row in np.argsort(-key, kind="stable")[:k] if np.isfinite(key[row])]
    rows = [index._hit(rank, row, scores[row]).as_dict() for rank, row in enumerate(order, start=1)]
    _mark(rows, query)
    in_place = {concept for tier in placed for concept in tier}
    for row in rows:
        row["placed"] = row["concept_id"] in in_place
    if other is not None and rows:
        other_index, other_vector = other
        _, other_key = _hybrid_order(other_index, other_vector, query, ranking, sparse, exclude, other_forms, placed)
        for row in rows:
            row["other_rank"] = 1 + int(np.count_nonzero(other_key > other_key[row["row"]]))
            row["rank_change"] = row["other_rank"] - row["rank"]
    return rows


def sparse_names(view, index: NeighbourIndex, ranking: Ranking, progress: Progress | None = None) -> SparseNames | None:
    """The char-tfidf rows a hybrid ranking over ``index`` needs (fitted on the level's names); None for dense.

    ``progress(done, total)`` in names (:meth:`SparseNames.build`): on a large level the first
    hybrid query spends tens of seconds here.
    """
    return SparseNames.build(view.names, index.space.names, progress) if ranking.hybrid else None


AMONG = ("names", "train", "hypernyms")


def candidate_names(view, among: str = "names", split: SplitSpec = DEFAULT_SPLIT) -> list[str]:
    """The names :func:`candidate_index` encodes for ``among``: every name, the split's training names
    (``train``, when no index of the whole level is given) or the class names (``hypernyms``)."""
    if among == "train":
        return [view.names[row] for row in split.make(view).train]
    if among != "hypernyms":
        return list(view.names)
    return [name for class_id in view.classes for name in view.hypernym_names.get(class_id, [])]


def training_index(view, model: ModelSpec, *, split: SplitSpec = DEFAULT_SPLIT,
                   report: Callable | None = None, owner: str = "a page") -> NeighbourIndex:
    """The training names of ``split`` alone, indexed under ``model``, as ``base.subset(train)`` would be.

    A few names per class are encoded (seconds), where the level's every name can take minutes on a
    large level: ranking among training names (fewshot-biomedical-names Table 4) does not wait for
    the whole level. The vectors go through the level's road (an
    :class:`~bioviz.models.encoding_session.EncodingSession`: the shared vector cache), so the
    level's own encoding later reads them back rather than encoding them again.

    Parameters
    ----------
    view : LevelView
    model : ModelSpec
    split : SplitSpec
    report : callable, optional
        ``report(EncodingProgress)`` while encoding.
    owner : str
        Who encodes, for another process waiting on the same names.
    """
    rows = np.asarray(split.make(view).train, dtype=np.int64)
    session = EncodingSession.of(model, [view.names[r] for r in rows], owner=owner)
    vectors, _ = session.encode(report=report)
    space = Space(tuple(session.texts), vectors, session.label)
    return NeighbourIndex(space, concept_ids=[view.name_concepts[r] for r in rows],
                          classes=[view.classes[view.labels[r]] for r in rows],
                          class_labels=[view.class_labels[view.labels[r]] for r in rows])


def first_encoding_estimate(view, model: ModelSpec, among: str = "names") -> EncodingEstimate:
    """How long the first use of ``model`` on ``view`` will encode for, before it starts.

    Counts the names the vector cache lacks and divides by the model's measured rate
    (:mod:`bioviz.models.encoding_estimate`); ``message()`` is the line a page shows, empty when
    everything is cached. Cheap: no weights are loaded and no vectors read.

    Parameters
    ----------
    view : LevelView
    model : ModelSpec
        The model, parsed once by the caller.
    among : str
        The candidate set (:data:`AMONG`) whose names would be encoded.

    Raises
    ------
    ModelError
        If the model cannot be found.
    """
    return EncodingSession.of(model, candidate_names(view, among)).estimate()


def candidate_index(view, model: ModelSpec, among: str = "names", *,
                    base: NeighbourIndex | Callable[[], NeighbourIndex] | None = None,
                    progress: Progress | None = None, split: SplitSpec = DEFAULT_SPLIT) -> NeighbourIndex:
    """The names a query is ranked against, as in the papers' tables.

    Parameters
    ----------
    view : LevelView
    model : ModelSpec
    among : str
        ``names``: every name of the level; ``train``: the training names of the few-shot
        split (``split``, by default the one default split), as fewshot-biomedical-names Table 4 ranks training names
        for a validation mention; ``hypernyms``: the names of the class concepts themselves,
        as higher-level-semantics Table 6 ranks hypernyms (a hit in the query's class is a
        matching hypernym).
    base : NeighbourIndex or callable, optional
        An index over all of the view's names under ``model`` (built if not given), or a
        function that gives it, called only when ``among`` is ``names``: for ``train`` without
        an index, only the training names are encoded (:func:`training_index`), and the class
        names of ``hypernyms`` alone.
    progress : callable, optional
        ``progress(done, total)`` while encoding.
    split : SplitSpec
        The split whose training names ``train`` ranks against.

    Raises
    ------
    BiovizError
        For an unknown ``among`` or a view without hypernym names.
    """
    if among not in AMONG:
        raise BiovizError(f"unknown candidate set {among!r}: use one of {', '.join(AMONG)}")
    if among == "hypernyms":
        names, classes, labels = [], [], []  # in candidate_names' order
        for i, class_id in enumerate(view.classes):
            for name in view.hypernym_names.get(class_id, []):
                names.append(name)
                classes.append(class_id)
                labels.append(view.class_labels[i])
        if not names:
            raise BiovizError("this view has no hypernym names (synonym-set views have none): rank among names")
        encoder = load_encoder(model)
        vectors, _ = encode_cached(encoder, names, progress=progress)
        return NeighbourIndex(Space(tuple(names), vectors, encoder.label), concept_ids=classes, classes=classes,
                              class_labels=labels)
    if among == "train" and not isinstance(base, NeighbourIndex):  # no index of the level yet: encode just these
        return training_index(view, model, split=split,
                              report=None if progress is None else lambda p: progress(p.done, p.total))
    if callable(base):
        base = base()
    if base is None:
        space, _ = level_space(view, model, progress=progress)
        base = NeighbourIndex.from_view(space, view)
    if among == "names":
        return base
    return base.subset(split.make(view).train)


def concept_card(ontology: Ontology, concept_id: str) -> dict:
    """What a clinician wants to see about a concept: code, names, definition, path to root.

    Returns
    -------
    dict
        ``id, name, synonyms, definition, path`` (list of ``{id, name}`` from the concept
        up to its top concept).
    """
    concept = ontology.concept(concept_id)
    return {
        "id": concept.id,
        "name": concept.name,
        "synonyms": list(concept.names[1:]),
        "definition": concept.definition,
        "path": [{"id": c, "name": ontology.concepts[c].name} for c in ontology.path_to_root(concept_id)],
    }


def held_out_names(view, split: SplitSpec = DEFAULT_SPLIT) -> list[str]:
    """The held-out test names of a few-shot split of the view (by default the default split; one per class)."""
    return [view.names[i] for i in split.make(view).test]


def comparison_rows(rows_a: list[dict], rows_b: list[dict] | None, *, label_a: str, label_b: str | None,
                    query: str) -> list[dict]:
    """Long-form rows of one or two rankings, for CSV export."""
    columns = ("rank", "name", "concept_id", "class_id", "class_label", "score", "same_class", "same_concept",
               "other_rank", "rank_change")
    out = []
    for label, rows in ((label_a, rows_a), (label_b, rows_b)):
        for row in rows or []:
            out.append({"query": query, "model": label, **{c: row.get(c) for c in columns}})
    return out
