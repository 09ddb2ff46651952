"""Reading a clinician's query with the clinical vocabulary: which rule places the first answer, and why.

Rules, in order (:func:`read_query`):

1. **abbreviation** — a short token typed in capitals (``DVT``, ``SOB``), or one a source lists as an
   abbreviation, is expanded to its long forms before ranking: the terms a source lists under the
   same key (ICD-10-CM's "DVT NOS" under I82.40, whose long form is its "Deep vein thrombosis NOS"),
   else the vocabulary's multi-word terms whose initials it spells ("shortness of breath"). Each
   distinct long form is a *sense*; with several, the reading is ``ambiguous`` and every sense is
   shown (ordered by how many source terms support it), not one guessed.
2. **vocabulary** — a phrase whose :func:`~bioviz.search.clinical_text.term_key` a source names
   ("kidney stones" = ICD-10-CM's "Stone in kidney") puts that concept first.
3. **rewritten** — a lay word the sources themselves pair with a clinical one (``broken`` →
   ``fracture``: HPO lists "Broken humerus" under *Humerus fracture*, ...;
   :func:`bioviz.search.word_substitutions.word_substitutions`)
   is replaced, and rule 2 is tried again.
4. **similar term** — (:mod:`bioviz.search.vocabulary_vectors`, needs the model) a phrasing no source
   lists whose nearest listed term, under the model, is close and closer than any name of the level.
5. **dense** — anything else is ranked by the model as before.

A :class:`QueryReading` carries the concepts it places (in tiers: one per sense), the long forms
the dense ranking also scores, and the note a page or command prints ("DVT → deep vein thrombosis
(I82 Other venous embolism and thrombosis), from ICD-10-CM's inclusion terms (I82.40)").
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from bioviz.search.clinical_text import key_words, looks_like_abbreviation, term_key
from bioviz.search.vocabulary import ABBREVIATION, LAY, NAME, ClinicalVocabulary, VocabularyMatch
from bioviz.search.word_substitutions import substitution_pairs, word_substitutions  # noqa: F401 - re-exported

ABBREVIATION_RULE, AMBIGUOUS, VOCABULARY, REWRITTEN, SIMILAR, DENSE = (
    "abbreviation", "ambiguous abbreviation", "vocabulary", "rewritten", "similar term", "dense")
RULES = (ABBREVIATION_RULE, AMBIGUOUS, VOCABULARY, REWRITTEN, SIMILAR, DENSE)
# English words that are also listed abbreviations: typed in lower case they are read as words.
COMMON_WORDS = frozenset({"all", "as", "ms", "pad", "cad", "gad", "ed", "cp", "ra", "ar", "mr", "uc", "tb", "hf"})
CURATED = "bioviz's clinical abbreviations"
MAX_SENSES = 6  # senses shown for an ambiguous abbreviation
MAX_PLACED = 5  # a phrase the vocabulary names under more concepts than this is too vague to place any


@dataclass(frozen=True)
class Sense:
    """One meaning of a query: a long form and the target concepts it names.

    Attributes
    ----------
    long_form : str
        ``deep vein thrombosis`` (for a phrase: the source term it matched).
    concept_ids : tuple of str
        Target concepts, best supported first.
    concept_names : tuple of str
    provenance : str
        Where the long form came from (the first supporting term's source).
    support : int
        Source terms behind this sense.
    """

    long_form: str
    concept_ids: tuple[str, ...]
    concept_names: tuple[str, ...]
    provenance: str
    support: int

    @property
    def label(self) -> str:
        """``deep vein thrombosis (I82 Other venous embolism and thrombosis)``."""
        concepts = "; ".join(f"{c} {n}" for c, n in zip(self.concept_ids[:2], self.concept_names[:2]))
        return f"{self.long_form} ({concepts})"


@dataclass(frozen=True)
class QueryReading:
    """What the vocabulary made of one query.

    Attributes
    ----------
    text : str
        As typed.
    rule : str
        One of :data:`RULES`.
    senses : tuple of Sense
        What the query names (empty under ``dense``).
    rewrite : str
        ``broken → fracture`` under ``rewritten``.
    """

    text: str
    rule: str = DENSE
    senses: tuple[Sense, ...] = ()
    rewrite: str = ""

    guessed: bool = False

    @property
    def placed(self) -> tuple[tuple[str, ...], ...]:
        """The target concepts placed first, one tier per sense (a ranking orders names within a tier).

        Senses only guessed from an abbreviation's letters, with no source listing it, are shown but
        not placed when there are several: the model's ranking decides.
        """
        if self.guessed and len(self.senses) > 1:
            return ()
        return tuple(s.concept_ids for s in self.senses)

    @property
    def forms(self) -> tuple[str, ...]:
        """Long forms the dense ranking also scores names against (none for several guessed senses)."""
        if self.guessed and len(self.senses) > 1:
            return ()
        return tuple(dict.fromkeys(s.long_form for s in self.senses if term_key(s.long_form) != term_key(self.text)))

    @property
    def ambiguous(self) -> bool:
        """True when an abbreviation has several senses."""
        return self.rule == AMBIGUOUS

    @property
    def note(self) -> str:
        """Which rule placed the first answer, and from where; empty under ``dense``."""
        if not self.senses:
            return ""
        first = self.senses[0]
        if self.rule == ABBREVIATION_RULE:
            return f"{self.text} → {first.label}, from {first.provenance}"
        if self.rule == AMBIGUOUS:
            listed = "; ".join(s.label for s in self.senses)
            how = ("guessed from its letters, none listed by a source; ranked by the model" if self.guessed
                   else "in their usual order" if first.provenance.startswith(CURATED) else "most supported first")
            return f"{self.text} is an ambiguous abbreviation, {len(self.senses)} senses ({how}): {listed}"
        via = f" (read as '{first.long_form}': {self.rewrite})" if self.rule == REWRITTEN else \
            (f" (nearest listed term '{first.long_form}')" if self.rule == SIMILAR else "")
        names = "; ".join(f"{c} {n}" for c, n in zip(first.concept_ids, first.concept_names))
        return f"{self.text} → {names}{via}, from {first.provenance}"


def _sense(long_form: str, matches: list[VocabularyMatch], names: dict[str, str]) -> Sense:
    counts = Counter(m.concept_id for m in matches)
    ordered = tuple(c for c, _ in counts.most_common())
    return Sense(long_form, ordered, tuple(names.get(c, c) for c in ordered), matches[0].provenance,
                 len({(m.term.system, m.term.term) for m in matches}))


def _target_names(matches: Iterable[VocabularyMatch], vocabulary: ClinicalVocabulary) -> dict[str, str]:
    """Each target concept's own preferred name (its ``name`` match in the target), else the source's name."""
    out = {}
    for match in matches:
        out.setdefault(match.concept_id, vocabulary.names.get(match.concept_id, match.term.concept_name))
    return out


def _curated_senses(letters: str, vocabulary: ClinicalVocabulary) -> list[Sense]:
    """Senses from bioviz's abbreviation list whose long forms the vocabulary places on this ontology."""
    out = []
    for spellings in vocabulary.curated.get(letters, ()):
        form = spellings.split("|")[0].strip()
        matches = next((found for found in (vocabulary.lookup(s) for s in spellings.split("|")) if found), [])
        if matches:
            sense = _sense(form, matches, _target_names(matches, vocabulary))
            out.append(Sense(form, sense.concept_ids[:MAX_PLACED], sense.concept_names[:MAX_PLACED],
                             f"{CURATED}, then {sense.provenance}", sense.support))
    return out


def _commonness(form: str, vocabulary: ClinicalVocabulary) -> float:
    """How much the sources use a long form on its own: per source system, 2 for a lay, listed or inclusion
    term with its key, 1 for a name; summed over systems ("shortness of breath": HPO's lay synonym and
    ICD-10-CM's title, 3; "sequelae of burn", only the start of titles, 0)."""
    systems: dict[str, float] = {}
    for match in vocabulary.by_key.get(term_key(form), ()):
        weight = 1.0 if match.term.kind == NAME else 2.0
        systems[match.term.system] = max(systems.get(match.term.system, 0.0), weight)
    return sum(systems.values())


def _abbreviation_senses(text: str, vocabulary: ClinicalVocabulary) -> tuple[list[Sense], bool]:
    """Senses of an abbreviation: bioviz's list, else the sources' listed forms, else the terms whose initials it
    spells; and whether they were only guessed from its letters."""
    key = term_key(text)
    letters = "".join(text.casefold().split())
    curated = _curated_senses(letters, vocabulary)
    if curated:
        return curated[:MAX_SENSES], False
    listed = [m for m in vocabulary.by_key.get(key, ()) if m.term.kind != NAME or len(m.term.term.split()) == 1]
    senses: dict[str, list[VocabularyMatch]] = {}
    if listed:
        for match in listed:
            # the long form: a term of the same source concept whose initials the abbreviation spells
            long = next((m for m in vocabulary.by_initials.get(letters, ())
                         if m.concept_id == match.concept_id and m.term.concept_id == match.term.concept_id), None)
            form = long.term.term if long is not None else match.term.concept_name
            senses.setdefault(term_key(form), []).append(match)
    else:
        for match in vocabulary.by_initials.get(letters, ()):
            senses.setdefault(term_key(match.term.term), []).append(match)
    merged: dict[str, list[VocabularyMatch]] = {}
    for matches in senses.values():
        form = next((m.term.term for m in matches if m.term.kind != ABBREVIATION), matches[0].term.concept_name)
        merged.setdefault(_long_form(form), []).extend(matches)
    out = []
    for form, matches in merged.items():
        sense = _sense(form, matches, _target_names(matches, vocabulary))
        out.append(((_commonness(form, vocabulary), sense.support), sense))
    out.sort(key=lambda pair: (-pair[0][0], -pair[0][1], pair[1].long_form))
    return [sense for _, sense in out[:MAX_SENSES]], not listed


def _long_form(term: str) -> str:
    """A source term as a long form reads: lower case but for acronyms, without "NOS" or a ", site not specified" tail.

    >>> _long_form("Urinary tract infection, site not specified"), _long_form("DVT NOS")
    ('urinary tract infection', 'DVT')
    """
    text = term.split(",")[0].strip()
    text = text[:-4] if text.endswith(" NOS") else text
    return " ".join(w if w.isupper() and len(w) > 1 else w.lower() for w in text.split())


def _phrase_sense(matches: list[VocabularyMatch], vocabulary: ClinicalVocabulary) -> Sense | None:
    if not matches:
        return None
    # a lay or abbreviation term's concept before one whose name merely shares the words
    ranked = sorted(matches, key=lambda m: m.term.kind != LAY)
    sense = _sense(ranked[0].term.term, ranked, _target_names(ranked, vocabulary))
    return sense if len(sense.concept_ids) <= MAX_PLACED else None


def read_query(text: str, vocabulary: ClinicalVocabulary) -> QueryReading:
    """Which rule of the module reads ``text``, with its senses (see the module).

    Parameters
    ----------
    text : str
        A query or a term to code, as typed (not a name or id of the ontology: those resolve first).
    vocabulary : ClinicalVocabulary
        Indexed for the level's ontology (:func:`bioviz.search.vocabulary.vocabulary_for`).
    """
    key = term_key(text)
    if not key:
        return QueryReading(text)
    single = len(text.split()) == 1
    letters = text.strip().casefold()
    typed_known = letters in vocabulary.curated and len(letters) >= 3 and letters not in COMMON_WORDS
    if single and (looks_like_abbreviation(text) or key in vocabulary.abbreviations or typed_known):
        senses, guessed = _abbreviation_senses(text, vocabulary)
        if senses:
            return QueryReading(text, ABBREVIATION_RULE if len(senses) == 1 else AMBIGUOUS, tuple(senses),
                                guessed=guessed)
    sense = _phrase_sense(vocabulary.lookup(text), vocabulary)
    if sense is not None:
        return QueryReading(text, VOCABULARY, (sense,))
    words = key_words(text)
    for position, word in enumerate(words):
        for replacement in vocabulary.substitutions.get(word, ()):
            rewritten = " ".join(words[:position] + [replacement] + words[position + 1:])
            sense = _phrase_sense(vocabulary.by_key.get(term_key(rewritten), []), vocabulary)
            if sense is not None:
                return QueryReading(text, REWRITTEN, (sense,), f"{word} → {replacement}")
    return QueryReading(text)
