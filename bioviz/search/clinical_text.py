"""How a clinician's term is compared with an ontology's: word keys, name alternates and initials.

A clinician types "kidney stones", ICD-10-CM lists "Stone in kidney"; "anemia" against WHO's
"Anaemia"; "COPD" for "Chronic obstructive pulmonary disease". Three small functions make such
spellings meet, with no model:

- :func:`term_key`: the content words of a term, case-folded, British spellings folded to
  American (``ae``/``oe`` → ``e``, ``-our`` → ``-or``), plurals reduced, function words and the
  coders' ``NOS``/``unspecified`` dropped, sorted. Word order and small words no longer matter:
  "kidney stones" and "Stone in kidney" share the key ``kidney stone``.
- :func:`name_alternates`: the alternates a classification writes into one name: WHO's bracketed
  synonyms ("Varicella [chickenpox]" → "Varicella", "chickenpox"), parenthetical optional words
  ("Essential (primary) hypertension" → "Essential hypertension", "Essential primary hypertension").
- :func:`initials`: the letters an abbreviation of a term would be made of ("shortness of breath"
  → ``sob`` and ``sb``; "gastro-esophageal reflux disease" → ``gerd``).
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache

# Words that do not change which concept a term names: articles and prepositions, and the coders'
# "not otherwise specified" markers ("DVT NOS" names what "DVT" names). Negations and qualifiers
# ("without", "other", "acute") are kept: they do change the concept.
FUNCTION_WORDS = frozenset({"a", "an", "the", "of", "in", "on", "at", "to", "nos", "unspecified", "s"})
# Words an abbreviation's letters skip when they are made from a term's content words only.
_INITIALS_SKIP = frozenset({"a", "an", "the", "of", "in", "on", "at", "to", "and", "or", "with", "by", "for"})
_WORD = re.compile(r"[0-9a-z]+")
_BRACKET = re.compile(r"\s*\[([^\]]+)\]")
_PAREN = re.compile(r"\s*\(([^)]+)\)")
_KEEP_S = ("ss", "us", "is", "ous", "sis", "xis")


def _fold(text: str) -> str:
    """Case-folded, accents taken off (``Sjögren`` → ``sjogren``)."""
    if text.isascii():  # nearly every name: no accent to take off (the character scan below was most of an index build)
        return text.casefold()
    decomposed = unicodedata.normalize("NFKD", text.casefold())
    return "".join(c for c in decomposed if not unicodedata.combining(c))


@lru_cache(maxsize=2**16)  # an ontology's few tens of thousands of words, met millions of times in an index build
def word_stem(word: str) -> str:
    """One word as keys compare it: British spellings folded, a plural reduced.

    >>> [word_stem(w) for w in ("oesophageal", "anaemia", "tumours", "stones", "injuries", "diabetes", "abscesses",
    ...                         "fractured")]
    ['esophageal', 'anemia', 'tumor', 'stone', 'injury', 'diabete', 'abscess', 'fracture']
    """
    word = word.replace("ae", "e").replace("oe", "e")
    if len(word) > 4 and word.endswith("ies"):
        word = word[:-3] + "y"
    elif len(word) > 5 and word.endswith("sses"):  # abscesses, masses
        word = word[:-2]
    elif len(word) > 3 and word.endswith("s") and not word.endswith(_KEEP_S):
        word = word[:-1]
    if len(word) > 5 and word.endswith("ured"):  # fractured, ruptured: the condition's own word
        word = word[:-1]
    if len(word) > 4 and word.endswith("our"):
        word = word[:-3] + "or"
    return word


def key_words(text: str) -> list[str]:
    """The stemmed content words of ``text`` in their order (function words dropped)."""
    words = (word_stem(w) for w in _WORD.findall(_fold(text).replace("'s ", " ")))
    return [w for w in words if w not in FUNCTION_WORDS]


def term_key(text: str) -> str:
    """The key under which two spellings of a term are the same term.

    >>> term_key("Stone in kidney") == term_key("kidney stones") == "kidney stone"
    True
    >>> term_key("DVT NOS"), term_key("Anaemia, unspecified"), term_key("Tumour of the Bladder")
    ('dvt', 'anemia', 'bladder tumor')
    """
    return " ".join(sorted(set(key_words(text))))


def name_alternates(name: str) -> list[str]:
    """The other spellings a name writes into itself (each once, the name itself not included).

    - A bracketed synonym (WHO ICD-10): the name without it, and the bracketed text in place of the
      words before it when it stands at the end of the name or of a comma part.
    - Parenthetical words: the name without them, and with them as plain words.
    - A name's head before its first comma ("Urinary tract infection, site not specified" →
      "Urinary tract infection"): the comma adds a qualifier, the head names the same or a broader concept.

    >>> name_alternates("Varicella [chickenpox]")
    ['Varicella', 'chickenpox']
    >>> name_alternates("Essential (primary) hypertension")
    ['Essential hypertension', 'Essential primary hypertension']
    >>> name_alternates("Urinary tract infection, site not specified")
    ['Urinary tract infection']
    >>> name_alternates("Rubella [German measles] without complication")
    ['Rubella without complication', 'German measles without complication']
    """
    out: list[str] = []
    bracket = _BRACKET.search(name)
    if bracket:
        out.append(" ".join(_BRACKET.sub("", name).split()))
        before, after = name[:bracket.start()], name[bracket.end():]
        head = before.rsplit(",", 1)[0] + ", " if "," in before else ""
        out.append(" ".join(f"{head}{bracket.group(1)}{after}".split()))
    if _PAREN.search(name):
        out.append(" ".join(_PAREN.sub("", name).split()))
        out.append(" ".join(_PAREN.sub(lambda m: " " + m.group(1), name).split()))
    for text in list(out) or [name]:  # "Urinary tract infection, site not specified" is a urinary tract infection
        if "," in text and "[" not in text:
            out.append(text.split(",")[0].strip())
    return [alt for alt in dict.fromkeys(out) if alt and alt != name]


def initials(text: str) -> tuple[str, ...]:
    """The letter strings an abbreviation of ``text`` is made of: every word's first letter, and the
    content words' only (hyphenated parts count as words).

    >>> initials("Shortness of breath"), initials("Gastro-esophageal reflux disease")
    (('sob', 'sb'), ('gerd',))
    >>> initials("Urinary tract infection, site not specified")
    ('utisns', 'uti')
    """
    out: list[str] = []
    plain = _PAREN.sub("", _BRACKET.sub("", _fold(text)))
    for part in dict.fromkeys((plain, plain.split(",")[0])):  # "Urinary tract infection, site not specified" too
        words = [w for w in re.split(r"[\s\-/]+", part) if w and w[0].isalnum() and w != "nos"]
        if len(words) < 2:
            continue
        out.append("".join(w[0] for w in words))
        out.append("".join(w[0] for w in words if w not in _INITIALS_SKIP))
    return tuple(dict.fromkeys(s for s in out if len(s) >= 2))


_ABBREVIATION = re.compile(r"^[A-Za-z][A-Za-z0-9]{1,5}$")


def looks_like_abbreviation(text: str) -> bool:
    """A short single token typed in capitals (``DVT``, ``SOB``, ``COPD``, ``T2DM``): read as an abbreviation.

    >>> [looks_like_abbreviation(t) for t in ("DVT", "copd", "Cough", "T2DM", "high blood pressure")]
    [True, False, False, True, False]
    """
    text = text.strip()
    return bool(_ABBREVIATION.match(text)) and sum(c.isupper() for c in text) >= 2 and text.upper() == text
