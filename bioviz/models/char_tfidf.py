"""``char-tfidf``: a lexical baseline that needs no neural model.

Names are turned into character n-gram TF-IDF vectors and reduced with a truncated SVD
(latent semantic analysis), both from scikit-learn. The vectoriser and the SVD are fitted
once on a fixed corpus (every name of the bundled WHO ICD-10 and HPO) and stored under
``BIOVIZ_HOME/models`` as a plain ``.npz`` of arrays (vocabulary, idf, components; no
pickle), keyed by the corpus and the settings. Encoding is then a pure function of the
stored arrays, so the fingerprint is the hash of those arrays and cached vectors stay
valid for as long as the fit does.
"""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import dataclass
from importlib.metadata import version as package_version
from pathlib import Path

import numpy as np

from bioviz.cache_files import read_cache, write_cache
from bioviz.ontology.sources import bundled_sources, load_source
from bioviz.paths import atomic_path, home
from bioviz.errors import ModelError
from bioviz.space import l2_normalise

logger = logging.getLogger(__name__)

SCHEMA = 1  # bump when the stored form or the transform changes
CORPUS_SOURCES = ("icd10", "hpo")

# Settings of the fit, part of the file key. char_wb n-grams stay inside word boundaries,
# so "renal" and "adrenal" share fewer grams than plain char n-grams would make them.
SETTINGS = {
    "analyzer": "char_wb",
    "ngram_range": [2, 4],
    "min_df": 2,
    "max_features": 20000,
    "sublinear_tf": True,
    "n_components": 256,
    "random_state": 0,
}

_SEP = "\x1f"  # never part of an n-gram (names are split on whitespace first)


@dataclass(frozen=True)
class CharTfidfModel:
    """A fitted character n-gram TF-IDF + SVD projection.

    Attributes
    ----------
    vocabulary : tuple of str
        The n-grams, in feature order.
    idf : numpy.ndarray
        Inverse document frequency of each n-gram (float64, as scikit-learn keeps it).
    components : numpy.ndarray
        ``(n_components, n_features)`` float32 SVD components.
    settings : dict
        The vectoriser and SVD settings of the fit.
    """

    vocabulary: tuple[str, ...]
    idf: np.ndarray
    components: np.ndarray
    settings: dict

    @property
    def dim(self) -> int:
        """Output dimensionality."""
        return int(self.components.shape[0])

    @property
    def fingerprint(self) -> str:
        """Hash of the fitted arrays: equal fingerprints give equal vectors."""
        digest = hashlib.sha256()
        digest.update(json.dumps({"schema": SCHEMA, "settings": self.settings}, sort_keys=True).encode())
        digest.update(_SEP.join(self.vocabulary).encode("utf-8"))
        digest.update(np.ascontiguousarray(self.idf, dtype=np.float64).tobytes())
        digest.update(np.ascontiguousarray(self.components, dtype=np.float32).tobytes())
        return "char-tfidf-" + digest.hexdigest()[:24]

    def _vectoriser(self):
        from sklearn.feature_extraction.text import TfidfVectorizer  # imported here: scikit-learn takes seconds to import

        vectoriser = TfidfVectorizer(
            analyzer=self.settings["analyzer"],
            ngram_range=tuple(self.settings["ngram_range"]),
            sublinear_tf=self.settings["sublinear_tf"],
            vocabulary={gram: i for i, gram in enumerate(self.vocabulary)},
            dtype=np.float32,
        )
        vectoriser.idf_ = self.idf
        return vectoriser

    def transform(self, texts: list[str]) -> np.ndarray:
        """L2-normalised float32 vectors of ``texts``."""
        if not len(texts):
            return np.zeros((0, self.dim), dtype=np.float32)
        sparse = self._vectoriser().transform(list(texts))
        return l2_normalise(sparse @ self.components.T)

    def sparse_vectors(self, texts: list[str]):
        """L2-normalised tf-idf rows of ``texts`` as a scipy CSR matrix, before the SVD.

        The cosine of two rows is the sparse character n-gram similarity that BioSyn adds to
        a dense encoder's (:mod:`bioviz.search.hybrid`); the SVD would blur exact n-gram overlap.
        """
        return self._vectoriser().transform(list(texts))  # TfidfVectorizer rows are unit length (norm="l2")

    def write(self, handle) -> None:
        """Write the arrays as ``.npz`` to a binary file handle (no pickle)."""
        np.savez(
            handle,
            vocabulary=np.frombuffer(_SEP.join(self.vocabulary).encode("utf-8"), dtype=np.uint8),
            idf=np.asarray(self.idf, dtype=np.float64),
            components=np.asarray(self.components, dtype=np.float32),
            settings=np.frombuffer(json.dumps(self.settings, sort_keys=True).encode(), dtype=np.uint8),
        )

    def save(self, path: Path) -> None:
        """Write the arrays as ``.npz`` (atomically; no pickle)."""
        with atomic_path(path, suffix=".npz") as tmp, open(tmp, "wb") as handle:
            self.write(handle)

    @classmethod
    def load(cls, path: Path) -> CharTfidfModel:
        """Read a model written by :meth:`save`.

        Raises
        ------
        ValueError, KeyError, OSError, EOFError, zipfile.BadZipFile
            When the file is not such a model (damaged, truncated, arrays that do not fit together).
        """
        with np.load(path, allow_pickle=False) as data:
            vocabulary = tuple(data["vocabulary"].tobytes().decode("utf-8").split(_SEP))
            settings = json.loads(data["settings"].tobytes().decode())
            idf, components = data["idf"].copy(), data["components"].copy()
        if not isinstance(settings, dict) or any(key not in settings for key in ("analyzer", "ngram_range",
                                                                                   "sublinear_tf")):
            raise ValueError("the settings of the fit are missing")
        if idf.shape != (len(vocabulary),) or components.ndim != 2 or components.shape[1] != len(vocabulary):
            raise ValueError(f"arrays that do not fit together: {len(vocabulary)} n-grams, idf {idf.shape}, "
                             f"components {components.shape}")
        return cls(vocabulary, idf, components, settings)


def fit(corpus: list[str], settings: dict | None = None) -> CharTfidfModel:
    """Fit the vectoriser and the SVD on ``corpus``.

    Parameters
    ----------
    corpus : list of str
        Names to learn n-grams, idf and components from (sorted and de-duplicated first,
        so the fit does not depend on their order).
    settings : dict, optional
        Overrides of :data:`SETTINGS`.
    """
    # imported here: scikit-learn takes seconds to import
    from sklearn.decomposition import TruncatedSVD
    from sklearn.feature_extraction.text import TfidfVectorizer

    settings = {**SETTINGS, **(settings or {})}
    texts = sorted(set(corpus))
    vectoriser = TfidfVectorizer(
        analyzer=settings["analyzer"],
        ngram_range=tuple(settings["ngram_range"]),
        min_df=min(settings["min_df"], max(1, len(texts) // 2)),
        max_features=settings["max_features"],
        sublinear_tf=settings["sublinear_tf"],
        dtype=np.float32,
    )
    matrix = _fit_vectoriser(vectoriser, texts)
    vocabulary = [""] * len(vectoriser.vocabulary_)
    for gram, column in vectoriser.vocabulary_.items():
        vocabulary[column] = gram
    n_components = max(1, min(settings["n_components"], matrix.shape[1] - 1, matrix.shape[0] - 1))
    if matrix.shape[1] < 2:  # TruncatedSVD needs two n-grams: one n-gram is its own (only) component
        components = np.ones((1, matrix.shape[1]), dtype=np.float32)
    else:
        svd = TruncatedSVD(n_components=n_components, random_state=settings["random_state"])
        with np.errstate(divide="ignore", invalid="ignore"):  # a few identical rows: a 0/0 variance ratio never read
            components = svd.fit(matrix).components_
    settings["n_components"] = n_components
    return CharTfidfModel(tuple(vocabulary), vectoriser.idf_.astype(np.float64), components.astype(np.float32),
                          settings)


def _fit_vectoriser(vectoriser, texts: list[str]):
    """``vectoriser.fit_transform(texts)``; on a few names whose n-grams ``min_df`` prunes away, again with every n-gram.

    Raises
    ------
    ModelError
        No name has an n-gram at all (empty or blank names): nothing to fit.
    """
    try:
        return vectoriser.fit_transform(texts)
    except ValueError:  # "After pruning, no terms remain": no n-gram shared by min_df of a handful of names
        vectoriser.set_params(min_df=1)
    try:
        return vectoriser.fit_transform(texts)
    except ValueError as error:  # "empty vocabulary": no name has a character to make an n-gram of
        raise ModelError(f"char-tfidf cannot be fitted on these {len(texts)} names: they have no character "
                         "n-grams") from error


def corpus_key() -> str:
    """Key of the default corpus: the bundled sources' package versions and the settings."""
    identity = {
        "schema": SCHEMA,
        "settings": SETTINGS,
        "sources": {s: package_version(bundled_sources()[s].package) for s in CORPUS_SOURCES},
    }
    return hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:16]


def default_corpus() -> list[str]:
    """Every name (preferred and synonyms) of the bundled WHO ICD-10 and HPO."""
    names: list[str] = []
    for source in CORPUS_SOURCES:
        names += [text for concept in load_source(source).concepts.values() for text in concept.names]
    return names


def load_default() -> CharTfidfModel:
    """The model fitted on the default corpus, fitting and storing it on first use.

    The stored fit is a cache: an unreadable file is set aside and the model refitted, and a
    disk that refuses the new file only costs a refit next time (:mod:`bioviz.cache_files`).
    """
    path = home() / "models" / f"char-tfidf-{corpus_key()}.npz"
    model = read_cache(path, CharTfidfModel.load)
    if model is not None:
        return model
    logger.info("fitting char-tfidf on %s (once per BIOVIZ_HOME)", ", ".join(CORPUS_SOURCES))
    model = fit(default_corpus())
    write_cache(path, model.write, suffix=".npz")
    return model
