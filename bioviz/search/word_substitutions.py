"""Lay word → clinical word substitutions, learnt from the sources' own pairs of synonyms.

HPO lists "Broken humerus", "Broken wrist" ... beside *Humerus fracture*, *Wrist fracture*; ICD-10-CM
lists "Stone in kidney" under *Calculus of kidney*. Where a synonym and its concept's name differ by one
word on each side, the two words are one substitution; a substitution seen in enough pairs
(:data:`MIN_SUBSTITUTION_PAIRS`) lets :func:`bioviz.search.query_reading.read_query` read "broken hip"
as "fracture hip" and find ICD-10-CM's "Fracture of hip NOS".
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from bioviz.search.clinical_text import key_words

MIN_SUBSTITUTION_PAIRS = 2  # a word substitution needs this many source pairs
# A classification's own words ("Other X" for "Chronic X" in ICD-10-CM) are no clinician's word for anything.
CLASSIFIER_WORDS = frozenset({"other", "with", "without", "and", "or", "not", "nec", "elsewhere", "classified",
                              "specified", "unspecified", "due", "type", "disease", "disorder", "syndrome"})


def word_substitutions(pairs: Iterable[tuple[str, str]], min_pairs: int = MIN_SUBSTITUTION_PAIRS) -> dict[str, tuple[str, ...]]:
    """Lay word → clinical words, learnt from (lay or listed term, the concept's name) pairs of the sources.

    A pair whose content words differ by exactly one word on each side ("Broken humerus" /
    "Humerus fracture") pairs those two words; a substitution needs ``min_pairs`` such pairs. Each
    word keeps its substitutes in order of pairs (at most three).

    >>> word_substitutions([("Broken humerus", "Humerus fracture"), ("Broken wrist", "Wrist fracture"),
    ...                     ("Stone in kidney", "Calculus of kidney")])
    {'broken': ('fracture',)}
    """
    counts: Counter = Counter()
    for lay, name in pairs:
        a, b = set(key_words(lay)), set(key_words(name))
        only_a, only_b = a - b, b - a
        if len(only_a) == 1 and len(only_b) == 1 and a & b:
            counts[(next(iter(only_a)), next(iter(only_b)))] += 1
    out: dict[str, list[str]] = {}
    for (word, replacement), n in counts.most_common():
        if replacement in CLASSIFIER_WORDS or word in CLASSIFIER_WORDS:
            continue
        if n >= min_pairs and len(out.setdefault(word, [])) < 3:
            out[word].append(replacement)
    return {word: tuple(found) for word, found in out.items() if found}


def substitution_pairs(terms: Iterable) -> list[tuple[str, str]]:
    """(term, its concept's name) of :class:`~bioviz.search.vocabulary.VocabularyTerm` objects: every synonym, lay
    form or listed term that is not the name itself."""
    return [(t.term, t.concept_name) for t in terms if t.term != t.concept_name]
