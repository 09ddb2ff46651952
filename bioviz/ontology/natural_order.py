"""The natural order of concept ids: numbers by value, roman chapter numerals by value.

Plain string order lists ICD-10's chapters I, II, III, IV, IX, V and ICD-10-CM's 1, 10, 11, ...,
2; readers expect I, II, III, IV, V, ... IX and 1, 2, ... 10. Code ranges keep their order
(A00-B99 before C00-D48), zero-padded ids (HP:0000118) too.
"""

from __future__ import annotations

import re

_PARTS = re.compile(r"(\d+)")
# A roman numeral as written (no "IIII"), so that only ids that are numerals read as one.
_ROMAN = re.compile(r"^M{0,3}(CM|CD|D?C{0,3})(XC|XL|L?X{0,3})(IX|IV|V?I{0,3})$")
_ROMAN_VALUES = {"I": 1, "V": 5, "X": 10, "L": 50, "C": 100, "D": 500, "M": 1000}


def roman_value(text: str) -> int | None:
    """The value of a roman numeral (``"XIV"`` is 14), or None when ``text`` is not one.

    >>> roman_value("IX"), roman_value("XXII"), roman_value("IIX"), roman_value("HP")
    (9, 22, None, None)
    """
    if not text or not _ROMAN.match(text):
        return None
    values = [_ROMAN_VALUES[ch] for ch in text]
    return sum(-v if i + 1 < len(values) and v < values[i + 1] else v for i, v in enumerate(values))


def natural_key(concept_id: str) -> tuple:
    """Sort key reading the digit runs of ``concept_id`` as numbers (``"B9"`` before ``"B10"``).

    >>> sorted(["10", "2", "1"], key=natural_key)
    ['1', '2', '10']
    >>> sorted(["C00-D48", "A00-B99"], key=natural_key)
    ['A00-B99', 'C00-D48']
    """
    return tuple((0, int(part), part) if part.isdigit() else (1, part.casefold(), part)
                 for part in _PARTS.split(str(concept_id)) if part)


def natural_sorted(concept_ids) -> list[str]:
    """``concept_ids`` in their natural order: by numeral value when every id is a roman numeral, else
    by :func:`natural_key`.

    >>> natural_sorted(["I", "II", "III", "IV", "IX", "V", "X"])
    ['I', 'II', 'III', 'IV', 'V', 'IX', 'X']
    >>> natural_sorted(["HP:0000152", "HP:0000119"])
    ['HP:0000119', 'HP:0000152']
    """
    ids = list(concept_ids)
    if ids and all(roman_value(str(i)) is not None for i in ids):  # stops at the first id that is not one
        return sorted(ids, key=lambda i: roman_value(str(i)))
    return sorted(ids, key=natural_key)
