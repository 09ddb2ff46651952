"""Invisible characters in user text: which they are, and text with them taken out.

Control and format characters (Unicode categories ``C*``: NUL, escape, right-to-left
overrides, zero-width spaces and joiners, soft hyphens, ...) and line/paragraph separators
show nothing, or reorder what is shown, so a term holding them is not the term a reader sees:
it is coded as one thing and displayed as another, and a term made only of them looks blank
yet got a code. Run names refuse them (:func:`bioviz.models.runs.check_run_name`); terms to
code have them taken out (:func:`clean_texts`). One definition, :func:`is_invisible`, serves both.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass

# What a model reads of a text: the encoders read at most 256 tokens (max_seq_length), and a WordPiece
# token covers at most a few characters of a word (a word over 100 characters is one [UNK] token,
# and stays one when cut here), so 16 characters a token is more than any text's first 256 tokens
# span. The tokenizer itself reads the whole text before it truncates: a 5 MB name took 27 s and
# 2.2 GB, and under a 3 GB address-space limit the process aborted (issue 32).
MODEL_TOKENS = 256
MODEL_CHARS = MODEL_TOKENS * 16
# The longest name or synonym a source may hold (UTF-8 bytes): checked at load (bioviz.ontology.model).
MAX_NAME_BYTES = 64 * 1024

# Line and paragraph separators are not C* but break a line as a control character does.
_SEPARATORS = ("Zl", "Zp")


def is_invisible(char: str) -> bool:
    """Whether ``char`` is a control, format, private-use, unassigned or line-separator character.

    Examples
    --------
    >>> [is_invisible(c) for c in ("\\x00", "\\u202e", "\\u200b", "\\u2028", "a", " ", "é")]
    [True, True, True, True, False, False, False]
    """
    category = unicodedata.category(char)
    return category[0] == "C" or category in _SEPARATORS


def strip_invisible(text: str) -> str:
    """``text`` without its invisible characters; one that separates words (tab, line break) becomes a space.

    Examples
    --------
    >>> strip_invisible("heart\\u200b attack\\x00"), strip_invisible("chest\\tpain"), strip_invisible("\\u202e\\u200d")
    ('heart attack', 'chest pain', '')
    """
    if text.isprintable():  # the usual case: nothing to take out (isprintable is False for every C*/Z* but space)
        return text
    return "".join(" " if char.isspace() else "" if is_invisible(char) else char for char in text)


@dataclass(frozen=True)
class CleanTexts:
    """Texts with their invisible characters taken out.

    Attributes
    ----------
    texts : tuple of str
        The input in order, cleaned; those that held only invisible characters (and spaces)
        are left out.
    dropped : int
        How many were left out that way (blank input is not counted: it showed as blank).
    """

    texts: tuple[str, ...]
    dropped: int


def clean_texts(values: Iterable) -> CleanTexts:
    """Each text of ``values`` through :func:`strip_invisible`; the ones left empty dropped and counted.

    Values that are not text are passed through unchanged (the caller decides about them).

    Examples
    --------
    >>> clean_texts(["asthma", "\\u200b\\u200b", "\\x00", "", "heart\\u202eattack"])
    CleanTexts(texts=('asthma', '', 'heartattack'), dropped=2)
    """
    kept, dropped = [], 0
    for value in values:
        if isinstance(value, str):
            cleaned = strip_invisible(value)
            if value.strip() and not cleaned.strip():
                dropped += 1
                continue
            value = cleaned
        kept.append(value)
    return CleanTexts(tuple(kept), dropped)


def model_text(text: str) -> str:
    """``text`` cut to the :data:`MODEL_CHARS` characters a model can read (the same vector, a bounded tokenizer).

    >>> len(model_text("a" * 5_000_000)), model_text("fever")
    (4096, 'fever')
    """
    return text if len(text) <= MODEL_CHARS else text[:MODEL_CHARS]
