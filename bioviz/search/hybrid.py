"""Hybrid ranking: an exact or normalised name match first, then dense cosine plus a weight times char-tfidf cosine.

BioSyn (Sung et al., 2020; compared against in the few-shot names paper) scores a mention
against a concept name with a dense encoder's cosine plus a weighted sparse character
n-gram TF-IDF cosine: the sparse part rewards exact spelling overlap (abbreviations,
inflections, word order) that a sentence encoder blurs. Here:

    score(term, name) = cos_dense(term, name) + weight * cos_tfidf(term, name)

with the char-tfidf vectoriser of :mod:`bioviz.models.char_tfidf` fitted on the level's own
names (its idf then weighs n-grams by how rare they are in this level), and a term whose
case-, space- and punctuation-normalised form (:func:`match_key`) equals a name or synonym
of a concept ranks that concept first. Synonym-set levels carry every name of a concept
(HPO's abbreviation synonyms included), so abbreviations match exactly where the ontology
lists them. A concept's score is its best name's.

:class:`Ranking` is the frozen value passed from a page or command to
:mod:`bioviz.search.term_coding`, :mod:`bioviz.search.neighbours` and
:mod:`bioviz.evaluation.normalisation`; :data:`DEFAULT_RANKING` is the one default.
"""

from __future__ import annotations

import hashlib
import logging
import math
import re
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from bioviz.cache_files import read_cache, write_cache
from bioviz.errors import BiovizError
from bioviz.models.char_tfidf import CharTfidfModel, fit
from bioviz.paths import home

logger = logging.getLogger(__name__)
Progress = Callable[[int, int], None]  # progress(done, total), as bioviz.models.encoders has it
DENSE, HYBRID = "dense", "hybrid"
RANKING_KINDS = (DENSE, HYBRID)
MAX_WEIGHT = 10.0
# Added to the ordering key of exact concepts: above any hybrid score (at most 1 + MAX_WEIGHT).
EXACT_BOOST = 100.0


@dataclass(frozen=True)
class Ranking:
    """How terms are ranked against a level's names.

    Attributes
    ----------
    kind : str
        ``dense`` (the model's cosine; exact names first) or ``hybrid`` (see the module).
    weight : float
        The char-tfidf weight of a hybrid ranking (0 to :data:`MAX_WEIGHT`); ignored by ``dense``.

    Examples
    --------
    >>> Ranking("hybrid", 0.3).label, Ranking("dense").label, Ranking("hybrid", 0.3).slug
    ('hybrid w=0.3', 'dense', 'hybrid-w0.3')
    """

    kind: str = DENSE
    weight: float = 0.0

    def __post_init__(self) -> None:
        if self.kind not in RANKING_KINDS:
            raise BiovizError(f"unknown ranking {self.kind!r}: use {' or '.join(RANKING_KINDS)}")
        if not isinstance(self.weight, (int, float)) or not math.isfinite(self.weight) \
                or not 0 <= self.weight <= MAX_WEIGHT:
            raise BiovizError(f"the hybrid weight must be between 0 and {MAX_WEIGHT:g} (got {self.weight!r})")
        object.__setattr__(self, "weight", float(self.weight))

    @property
    def hybrid(self) -> bool:
        """True for a hybrid ranking."""
        return self.kind == HYBRID

    @property
    def label(self) -> str:
        """``dense`` or ``hybrid w=0.3``: for titles, tables and CSV columns."""
        return f"hybrid w={self.weight:g}" if self.hybrid else DENSE

    @property
    def slug(self) -> str:
        """``dense`` or ``hybrid-w0.3``: for file names."""
        return f"hybrid-w{self.weight:g}" if self.hybrid else DENSE


# The default ranking, re-chosen on both coding development files pooled (hpo_coding_dev and
# gsc_plus_dev, 637 mentions; benchmarks/coding_defaults.py, results/coding_defaults_med-minilm.json,
# docs/models.md): dense 0.774 [0.74, 0.81], hybrid w=1 0.774 [0.74, 0.81], the best setting
# (hybrid w=0.25) 0.782 [0.75, 0.81]. Every setting lies within the best's interval, so the rule
# "the simplest within the best's interval" keeps the dense ranking: the hybrid's earlier lead
# was chosen on GSC+'s 119 mentions alone, and held-out data did not confirm it (issue 31).
DEFAULT_RANKING = Ranking(DENSE)
# A hybrid ranking's char-tfidf weight when none is given (the best of w = 0..1 on GSC+ alone;
# on both dev files pooled every weight is within the others' intervals).
HYBRID_WEIGHT = 1.0


def ranking_of(kind: str | None = None, weight: float | None = None) -> Ranking:
    """The :class:`Ranking` a page or command asked for, defaults from :data:`DEFAULT_RANKING`.

    >>> ranking_of("dense"), ranking_of("hybrid", 0.5)
    (Ranking(kind='dense', weight=0.0), Ranking(kind='hybrid', weight=0.5))
    """
    kind = kind or DEFAULT_RANKING.kind
    if kind == DENSE:
        return Ranking(DENSE)
    return Ranking(kind, HYBRID_WEIGHT if weight is None else weight)


_PUNCTUATION = re.compile(r"[\W_]+")


def match_key(text: str) -> str:
    """A name compared without case, spacing or punctuation.

    >>> match_key("  Non-small-cell lung Cancer, ") == match_key("non small cell lung cancer")
    True
    """
    return " ".join(_PUNCTUATION.sub(" ", text.casefold()).split())


class NameMatcher:
    """The concepts whose names have a term's :func:`match_key`, in the order their names come."""

    def __init__(self, names: Sequence[str], concept_of: Sequence[str]) -> None:
        found: dict[str, dict[str, None]] = {}
        for name, concept in zip(names, concept_of):
            found.setdefault(match_key(name), {})[concept] = None
        self._concepts = {key: tuple(concepts) for key, concepts in found.items()}

    def concepts(self, *texts: str) -> tuple[str, ...]:
        """Concepts one of whose names matches any of ``texts`` (each concept once)."""
        return tuple(dict.fromkeys(c for text in texts if text for c in self._concepts.get(match_key(text), ())))


def _fit_key(names: Sequence[str]) -> str:
    digest = hashlib.sha256("\x1f".join(sorted(set(names))).encode("utf-8"))
    return digest.hexdigest()[:24]


def _rows_key(names: Sequence[str]) -> str:
    return hashlib.sha256("\x1f".join(names).encode("utf-8")).hexdigest()[:16]  # in order: rows follow names


def _read_rows(path, rows: int, columns: int):
    """A cached names' char-tfidf matrix (``scipy.sparse.load_npz``: no pickle), checked against its level."""
    from scipy import sparse  # imported here: scipy is heavy and only a hybrid ranking needs it

    matrix = sparse.load_npz(path)
    if matrix.shape != (rows, columns):
        raise ValueError(f"char-tfidf rows of shape {matrix.shape}, expected {(rows, columns)}")
    return matrix


# Levels with this many names keep their char-tfidf rows on disk (a transform of 110k names costs ~20 s);
# smaller ones transform in under a second and are not worth the disk.
CACHED_ROWS = 20_000
_ROWS_PER_CHUNK = 10_000  # names per transform between progress reports

_fits: dict[str, CharTfidfModel] = {}
_fits_lock = threading.Lock()


def level_tfidf(names: Sequence[str]) -> CharTfidfModel:
    """The char-tfidf model fitted on a level's names (kept on disk under ``BIOVIZ_HOME/models`` and in memory).

    Only its vectoriser is used (:meth:`CharTfidfModel.sparse_vectors`), so the SVD part of the
    fit is reduced to one component: it costs seconds on a large level and is never read.
    """
    key = _fit_key(names)
    with _fits_lock:
        if key in _fits:
            return _fits[key]
    path = home() / "models" / f"level-tfidf-{key}.npz"  # not char-tfidf-*: that names the default fit
    model = read_cache(path, CharTfidfModel.load)
    if model is None:
        model = fit(list(names), {"n_components": 1})
        write_cache(path, model.write, suffix=".npz")
    with _fits_lock:
        if len(_fits) >= 8:  # a few levels per process; each holds its vocabulary
            _fits.pop(next(iter(_fits)))
        _fits[key] = model
    return model


@dataclass(frozen=True, eq=False)
class SparseNames:
    """Char-tfidf rows of the names a ranking scores against (an index's names, in its row order).

    Attributes
    ----------
    model : CharTfidfModel
        Fitted on the level's names (:func:`level_tfidf`).
    matrix : scipy.sparse.csr_matrix
        ``(n_names, n_grams)`` unit rows.
    note : str
        Empty, or why the level's char-tfidf could not be fitted (names without any character
        n-gram): then ``model`` is None, every sparse score is 0 and the ranking is the dense one.
    """

    model: CharTfidfModel | None
    matrix: object
    note: str = ""

    @classmethod
    def build(cls, level_names: Sequence[str], names: Sequence[str], progress: Progress | None = None) -> SparseNames:
        """``names`` (an index's) under the char-tfidf fitted on ``level_names`` (the level's).

        On a large level this is the slow part of a first hybrid query (ICD-10-CM's 110k names: a
        fit and a transform of tens of seconds each), so ``progress(done, total)`` counts names: the
        fit as the level's names at once (instant when its fit is cached), then ``names`` in chunks.
        The rows of a level of :data:`CACHED_ROWS` names or more are kept on disk beside the fit.
        """
        names = list(names)
        total = len(level_names) + len(names)
        report = progress or (lambda done, total: None)
        report(0, total)
        try:
            model = level_tfidf(level_names)
        except BiovizError as error:  # a level whose names have no n-grams: rank dense, and say so
            report(total, total)
            return cls.unfitted(len(names), f"{error}; ranked by the dense model alone")
        report(len(level_names), total)
        path = home() / "models" / f"level-tfidf-{_fit_key(level_names)}-rows-{_rows_key(names)}.npz"
        cached = len(names) >= CACHED_ROWS
        matrix = read_cache(path, lambda p: _read_rows(p, len(names), len(model.vocabulary))) if cached else None
        if matrix is None:
            from scipy import sparse  # imported here: scipy is heavy and only a hybrid ranking needs it

            parts = []
            for lo in range(0, len(names), _ROWS_PER_CHUNK):
                parts.append(model.sparse_vectors(names[lo:lo + _ROWS_PER_CHUNK]))
                report(len(level_names) + min(lo + _ROWS_PER_CHUNK, len(names)), total)
            matrix = sparse.vstack(parts, format="csr") if parts else model.sparse_vectors([]).tocsr()
            if cached:
                write_cache(path, lambda handle: sparse.save_npz(handle, matrix), suffix=".npz")
        report(total, total)
        return cls(model, matrix.tocsr())

    @classmethod
    def unfitted(cls, n_names: int, note: str) -> SparseNames:
        """No char-tfidf for ``n_names`` names (``note`` says why): every sparse score is 0, a warning is logged."""
        from scipy import sparse  # imported here: scipy is heavy and only a hybrid ranking needs it

        logger.warning("hybrid ranking: %s", note)
        return cls(None, sparse.csr_matrix((n_names, 0), dtype=np.float32), note)

    def __len__(self) -> int:
        return int(self.matrix.shape[0])

    def scores(self, texts: Sequence[str]) -> np.ndarray:
        """``(len(texts), n_names)`` float32 char-tfidf cosines (zeros when the level has no fit: :attr:`note`)."""
        if self.model is None:
            return np.zeros((len(texts), len(self)), dtype=np.float32)
        terms = self.model.sparse_vectors(list(texts))
        # rows x terms as CSR times CSC: about 10x faster than terms @ matrix.T, which converts the whole matrix
        return np.asarray((self.matrix @ terms.T).T.toarray(), dtype=np.float32)


@dataclass(frozen=True, eq=False)
class ExpandedForms:
    """Other forms of a batch of terms (a synonym's preferred name, :mod:`bioviz.search.lexicon`), with their vectors.

    Attributes
    ----------
    texts : tuple of str
        The forms.
    owners : numpy.ndarray
        ``int64``: the position, in the batch, of the term each form belongs to.
    vectors : numpy.ndarray
        ``(n_forms, dim)`` unit vectors under the ranking's model.
    """

    texts: tuple[str, ...]
    owners: np.ndarray
    vectors: np.ndarray

    @classmethod
    def of(cls, texts: Sequence[str], owners: Sequence[int], vectors: np.ndarray) -> ExpandedForms:
        """Checked: one owner and one vector per form."""
        owners = np.asarray(owners, dtype=np.int64)
        vectors = np.asarray(vectors, dtype=np.float32)
        if len(texts) != len(owners) or len(vectors) != len(texts):
            raise BiovizError(f"{len(texts)} expanded forms but {len(owners)} owners and {len(vectors)} vectors")
        return cls(tuple(texts), owners, vectors)

    def __len__(self) -> int:
        return len(self.texts)

    def between(self, lo: int, hi: int) -> ExpandedForms:
        """The forms of terms ``lo`` to ``hi - 1``, their owners counted from ``lo`` (for a chunk of terms)."""
        keep = (self.owners >= lo) & (self.owners < hi)
        return ExpandedForms(tuple(t for t, k in zip(self.texts, keep) if k), self.owners[keep] - lo,
                             self.vectors[keep])


def name_scores(term_vectors: np.ndarray, name_vectors: np.ndarray, ranking: Ranking, *,
                sparse: SparseNames | None = None, texts: Sequence[str] = (),
                forms: ExpandedForms | None = None) -> np.ndarray:
    """``(n_terms, n_names)`` scores: dense cosine, plus ``weight`` times char-tfidf cosine for a hybrid ranking.

    With ``forms`` (expanded forms of some terms), a term's score for a name is the best over the
    term and its forms, each scored the same way: a synonym's preferred name counts as if it had
    been typed, and the term itself is never scored lower than without expansion.

    Raises
    ------
    BiovizError
        A hybrid ranking without the names' char-tfidf rows, or rows that do not fit the names.
    """
    scores = np.asarray(term_vectors, dtype=np.float32) @ np.asarray(name_vectors, dtype=np.float32).T
    if ranking.hybrid and ranking.weight != 0:
        if sparse is None or len(sparse) != scores.shape[1] or len(texts) != scores.shape[0]:
            raise BiovizError("a hybrid ranking needs the char-tfidf rows of the same names and the terms' texts")
        scores += np.float32(ranking.weight) * sparse.scores(texts)
    if forms is not None and len(forms):
        if int(forms.owners.max()) >= scores.shape[0]:
            raise BiovizError("expanded forms of terms outside this batch")
        extra = name_scores(forms.vectors, name_vectors, ranking, sparse=sparse, texts=forms.texts)
        np.maximum.at(scores, forms.owners, extra)  # max over a term's forms (owners may repeat)
    return scores
