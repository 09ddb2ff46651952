"""Type-ahead search over the names of a level: what a clinician gets while typing a query.

A selectbox that filters its options in the browser cannot carry ICD-10-CM's ~110k names,
so the app asks this index instead. Matches come in tiers, best first:

0. the exact name, or every name of a concept whose code was typed (``R39.11``),
1. names that start with the typed text (``fracture of fem`` -> ``Fracture of femur``),
2. names in which every typed word starts a word, in any order (``mictur hesit`` ->
   ``Hesitancy of micturition``),
3. names that contain the typed text anywhere (``itis`` -> ``bronchitis``),
4. names in which only some typed words start a word, rarer words counting more (``urinary
   hesitancy`` -> ``Hesitancy of micturition``: ICD-10-CM has no name with both words).

Tiers 2-4 are only looked for when the tiers above found fewer names than asked.
Within tiers 0-3, shorter names come first (the closest to what was typed), then alphabetical.
Names are compared after :func:`~bioviz.ontology.model.normalise_name` (case and spacing), with
accents dropped (:func:`search_key`).
Every tier is a sorted-array range or a numpy mask, so a search over 110k names takes a few
milliseconds; building the index takes about a second (the app keeps it per level).
"""

from __future__ import annotations

import re
import unicodedata
from bisect import bisect_left
from collections.abc import Sequence

import numpy as np

from bioviz.ontology.model import normalise_name

_WORD = re.compile(r"\w+")
# Partial matches weigh at most this many typed words (the rarest): a longer paste adds
# nothing to the order and would grow the table of word patterns (2 ** words).
_MAX_PARTIAL_WORDS = 12


def _prefix_range(sorted_keys: Sequence[str], prefix: str) -> tuple[int, int]:
    """``[lo, hi)``: the entries of ``sorted_keys`` that start with ``prefix``."""
    lo = bisect_left(sorted_keys, prefix)
    # Every string that starts with the prefix sorts below the prefix followed by the
    # highest code point, and nothing else in between does.
    hi = bisect_left(sorted_keys, prefix + "\U0010ffff", lo)
    return lo, hi


def _joined(texts: Sequence[str]) -> tuple[str, np.ndarray]:
    """``texts`` joined by newlines, and where each one starts."""
    lengths = np.fromiter((len(t) + 1 for t in texts), dtype=np.int64, count=len(texts))
    return "\n".join(texts), np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)


def _find_all(blob: str, starts: np.ndarray, needle: str) -> np.ndarray:
    """Sorted unique indices of the joined texts (see :func:`_joined`) that contain ``needle``."""
    if needle not in blob:  # one fast scan settles the common no-match case
        return np.zeros(0, dtype=np.int64)
    positions = np.fromiter((m.start() for m in re.finditer(re.escape(needle), blob)), dtype=np.int64)
    return np.unique(np.searchsorted(starts, positions, side="right") - 1)


def search_key(text: str) -> str:
    """:func:`~bioviz.ontology.model.normalise_name` without accents: "sjog" finds "Sjögren syndrome".

    >>> search_key("Sjögren  Syndrome")
    'sjogren syndrome'
    """
    name = normalise_name(text)
    if name.isascii():  # most names: nothing to decompose (a character loop over 100k names costs seconds)
        return name
    decomposed = unicodedata.normalize("NFKD", name)
    return "".join(ch for ch in decomposed if not unicodedata.combining(ch))


class NameSearch:
    """An index of names (and their concept codes) for ranked prefix, word and substring search.

    Parameters
    ----------
    names : sequence of str
        The names to search; duplicates (after normalisation) are kept once, first form wins.
    concept_ids : sequence of str, optional
        The concept of each name, so typing a code finds the concept's names.

    Raises
    ------
    ValueError
        When ``concept_ids`` is not aligned with ``names``.
    """

    def __init__(self, names: Sequence[str], concept_ids: Sequence[str] | None = None) -> None:
        if concept_ids is not None and len(concept_ids) != len(names):
            raise ValueError(f"{len(concept_ids)} concept ids for {len(names)} names")
        keys = [search_key(name) for name in names]
        # Walked backwards so that the first spelling of a key is the one that stays.
        first = {key: i for i, key in zip(range(len(keys) - 1, -1, -1), reversed(keys)) if key}
        # Row order is alphabetical by key: a row number is then also the alphabetical
        # tie-break, and a prefix is one contiguous range of rows.
        self._keys = sorted(first)
        self._names = [names[first[k]].strip() for k in self._keys]
        self._concepts = [concept_ids[first[k]] for k in self._keys] if concept_ids is not None else None
        self._row_of = {k: row for row, k in enumerate(self._keys)}
        self._lengths = np.fromiter((len(k) for k in self._keys), dtype=np.int64, count=len(self._keys))

        # Word index as one CSR table in vocabulary order: the words starting with a prefix
        # are one vocabulary range, so their rows are one contiguous slice of ``_postings``.
        rows_of_word: dict[str, list[int]] = {}
        for row, key in enumerate(self._keys):
            for word in set(_WORD.findall(key)):
                rows_of_word.setdefault(word, []).append(row)
        self._vocabulary = sorted(rows_of_word)
        sizes = np.fromiter((len(rows_of_word[w]) for w in self._vocabulary), dtype=np.int64,
                            count=len(self._vocabulary))
        self._offsets = np.concatenate([[0], np.cumsum(sizes)])
        self._postings = np.fromiter((r for w in self._vocabulary for r in rows_of_word[w]), dtype=np.int64,
                                     count=int(self._offsets[-1]))

        # All keys (and all words) in one string for substring search; a newline never
        # occurs in a key.
        self._blob, self._starts = _joined(self._keys)
        self._vocabulary_blob, self._vocabulary_starts = _joined(self._vocabulary)

        self._rows_of_code: dict[str, list[int]] = {}
        if concept_ids is not None:
            seen: set[tuple[str, int]] = set()
            for key, code in zip(keys, concept_ids):
                row = self._row_of.get(key)
                code_key = str(code).strip().casefold()
                if row is not None and (code_key, row) not in seen:
                    seen.add((code_key, row))
                    self._rows_of_code.setdefault(code_key, []).append(row)

    @classmethod
    def from_view(cls, view) -> NameSearch:
        """The names of a level view, then the class concepts' own (hypernym) names.

        Parameters
        ----------
        view : LevelView
        """
        names = list(view.names)
        codes = list(view.name_concepts)
        for class_id in view.classes:
            for name in view.hypernym_names.get(class_id, []):
                names.append(name)
                codes.append(class_id)
        return cls(names, codes)

    def __len__(self) -> int:
        return len(self._keys)

    def concept_of(self, name: str) -> str | None:
        """The concept code of an indexed name (None for other text or without codes)."""
        row = self._row_of.get(search_key(name))
        return None if row is None or self._concepts is None else self._concepts[row]

    def search(self, text: str, limit: int = 20) -> list[str]:
        """The indexed names that best match ``text``, best first (see the module docstring).

        Parameters
        ----------
        text : str
            What was typed: part of a name, a few word beginnings, or a concept code.
        limit : int
            At most this many names.

        Returns
        -------
        list of str
            Names in their indexed spelling; empty for empty text or no match.
        """
        key = search_key(text)
        if not key or limit <= 0 or not self._keys:
            return []
        found: list[int] = []
        taken = np.zeros(len(self._keys), dtype=bool)

        def take(rows: np.ndarray, order: np.ndarray | None = None) -> None:
            keep = ~taken[rows]
            rows = rows[keep]
            if len(rows) == 0 or len(found) >= limit:
                return
            # Default order: shorter first, then alphabetical (= row order). Only the best
            # few are sorted.
            order = self._lengths[rows] * len(self._keys) + rows if order is None else order[keep]
            room = limit - len(found)
            if len(rows) > room:
                best = np.argpartition(order, room - 1)[:room]
                rows, order = rows[best], order[best]
            rows = rows[np.argsort(order, kind="stable")]
            taken[rows] = True
            found.extend(int(r) for r in rows)

        exact = [self._row_of[key]] if key in self._row_of else []
        take(np.unique(np.array(exact + self._rows_of_code.get(key, []), dtype=np.int64)))
        take(np.arange(*_prefix_range(self._keys, key), dtype=np.int64))
        if len(found) >= limit:
            return [self._names[r] for r in found]
        masks = {word: self._word_prefix_mask(word) for word in sorted(set(_WORD.findall(key)))}
        hits = list(masks.values())
        if hits:
            take(np.flatnonzero(np.logical_and.reduce(hits)))
        if len(found) < limit:
            take(self._substring_rows(key, masks))
        if len(hits) > 1 and len(found) < limit:
            rows, order = self._partial_matches(hits)
            take(rows, order)
        return [self._names[r] for r in found]

    def _partial_matches(self, hits: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        """Rows where some typed word starts a word, and their order (lower is better).

        Each word weighs its rarity (inverse document frequency), so the word that singles
        out the concept outranks a common one like "urinary": highest summed weight first,
        then shorter, then alphabetical. A row's score depends only on which words it
        matches, so rows are grouped by that bit pattern and only the few patterns are
        scored and ranked; sorting all rows (most of the level for words like "of") would
        cost several milliseconds.
        """
        n = len(self._keys)
        counts = [int(hit.sum()) for hit in hits]
        picked = sorted(range(len(hits)), key=counts.__getitem__)[:_MAX_PARTIAL_WORDS]  # the rarest words
        weights = np.array([np.log(n / max(counts[i], 1)) for i in picked])
        bits = np.zeros(n, dtype=np.int64)
        for bit, i in enumerate(picked):
            np.bitwise_or(bits, 1 << bit, out=bits, where=hits[i])
        rows = np.flatnonzero(bits)
        patterns = np.flatnonzero(np.bincount(bits[rows], minlength=1 << len(picked)))
        scores = ((patterns[:, None] >> np.arange(len(picked))) & 1) @ weights
        levels = np.zeros(1 << len(picked), dtype=np.int64)
        levels[patterns] = np.unique(-scores, return_inverse=True)[1]  # 0 = best score; ties share a level
        span = int(self._lengths.max()) + 1
        return rows, (levels[bits[rows]] * span + self._lengths[rows]) * n + rows

    def _word_prefix_mask(self, word: str) -> np.ndarray:
        """Boolean mask of the rows in which some word starts with ``word``."""
        lo, hi = _prefix_range(self._vocabulary, word)
        hit = np.zeros(len(self._keys), dtype=bool)
        hit[self._postings[self._offsets[lo]:self._offsets[hi]]] = True
        return hit

    def _inner_word_mask(self, fragment: str) -> np.ndarray:
        """Rows with a word that contains ``fragment`` (a scan of the vocabulary, not of every name)."""
        hit = np.zeros(len(self._keys), dtype=bool)
        for w in _find_all(self._vocabulary_blob, self._vocabulary_starts, fragment).tolist():
            hit[self._postings[self._offsets[w]:self._offsets[w + 1]]] = True
        return hit

    def _substring_rows(self, key: str, masks: dict[str, np.ndarray]) -> np.ndarray:
        """Rows whose key contains ``key`` anywhere.

        Scanning every name is slow (several ms over 110k names), so only the names that can
        hold ``key`` are checked: a typed word after a space or punctuation mark starts a
        word of the name as well (``masks``: word -> rows where it starts a word), and a
        typed word at the very start lies inside some word of the name.
        """
        words = list(_WORD.finditer(key))
        if not words:  # punctuation only
            return _find_all(self._blob, self._starts, key)
        if len(words) == 1 and words[0].group() == key:  # one word fragment: the vocabulary says it all
            return np.flatnonzero(self._inner_word_mask(key))
        mask = np.ones(len(self._keys), dtype=bool)
        for word in words:
            if word.start() > 0:
                mask &= masks[word.group()]
        if words[0].start() == 0:
            mask &= self._inner_word_mask(words[0].group())
        return np.fromiter((r for r in np.flatnonzero(mask).tolist() if key in self._keys[r]), dtype=np.int64)
