"""A phrasing no source lists, near one a source does: the clinical vocabulary's terms under the model.

:mod:`bioviz.search.query_reading` places a concept when a source lists the query's words
(in any order, spelling or plural). A clinician's phrasing often is not listed as such ("hair
loss" where ICD-10-CM lists "Loss of hair"; "swollen ankles" where HPO lists "Ankle swelling"), yet
it is close, under the sentence encoder, to a term the sources list for the right concept. This
module encodes the vocabulary's source terms that name the level's concepts (inclusion terms,
includes notes, HPO layperson synonyms and HPO names carried onto the level: the words of other
sources, not the level's own names, which the ranking already scores) through the shared vector
cache, and reads a query by its nearest such term (:func:`similar_reading`): the rule ``similar
term`` places that term's concepts first when its cosine clears :data:`MIN_COSINE` and beats the
query's best level name by :data:`MIN_LEAD`. Both were chosen on the everyday-queries development
set (``benchmarks/everyday_dev.py``; docs/models.md).

Encoding the terms costs about a minute once per model for WHO ICD-10 (some 17k terms; cached).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from bioviz.models.cached_encoding import encode_cached
from bioviz.models.encoders import Progress
from bioviz.models.model_spec import ModelSpec
from bioviz.models.registry import load_encoder
from bioviz.search.query_reading import SIMILAR, QueryReading, Sense
from bioviz.search.vocabulary import ABBREVIATION, HPO, NAME, ClinicalVocabulary, VocabularyMatch

# Chosen on the everyday development set (benchmarks/everyday_dev.py, results/everyday_dev_med-minilm.json): the
# best mean accuracy over WHO ICD-10's "unlisted phrasing" and "held-out concept" configurations and HPO's
# "unlisted phrasing" (0.75/0.06: 0.600, 0.437, 0.975; without the rule 0.493, 0.487, 0.969). It costs on concepts
# no source names (WHO held-out concepts -0.05): a near term of another concept is placed instead. docs/models.md.
MIN_COSINE = 0.75
MIN_LEAD = 0.06
MAX_KEPT = 4  # (vocabulary, model) pairs whose term vectors stay in memory: WHO ICD-10's are 26 MB each
_encoded: dict[tuple[int, str], tuple[ClinicalVocabulary, VocabularyVectors]] = {}
_lock = threading.Lock()


@dataclass(frozen=True)
class VocabularyVectors:
    """The vocabulary's source terms for one level's ontology, with their unit vectors under one model.

    Attributes
    ----------
    terms : tuple of str
        Distinct spellings, as the sources write them.
    matches : tuple of tuple of VocabularyMatch
        Per term, the target concepts it names and where it came from.
    vectors : numpy.ndarray
        ``(n_terms, dim)`` float32 unit vectors.
    """

    terms: tuple[str, ...]
    matches: tuple[tuple[VocabularyMatch, ...], ...]
    vectors: np.ndarray

    def __len__(self) -> int:
        return len(self.terms)


def scored_terms(vocabulary: ClinicalVocabulary) -> dict[str, list[VocabularyMatch]]:
    """The source terms worth encoding: other sources' listed, lay and clinical terms, and HPO's names carried here
    (not ICD-10-CM's titles, which the level's own names already resemble, nor one-token abbreviations)."""
    out: dict[str, list[VocabularyMatch]] = {}
    for matches in vocabulary.by_key.values():
        for match in matches:
            term = match.term
            if match.via == "" and term.kind == NAME:  # the level's own names and alternates
                continue
            if term.kind == ABBREVIATION or (term.kind == NAME and term.system != HPO):
                continue
            out.setdefault(term.term, []).append(match)
    return out


def vocabulary_vectors(vocabulary: ClinicalVocabulary, model, *, progress: Progress | None = None,
                       batch_size: int = 64) -> VocabularyVectors:
    """Encode :func:`scored_terms` under ``model`` through the vector cache (a minute once, then a read), kept in
    memory per vocabulary and model.

    Parameters
    ----------
    vocabulary : ClinicalVocabulary
    model : ModelSpec or str
    progress : callable, optional
        ``progress(done, total)`` in terms.
    """
    encoder = load_encoder(model)
    key = (id(vocabulary), encoder.fingerprint)
    with _lock:  # a page reruns on every click: the 17k rows are read from the vector cache once per process
        kept = _encoded.get(key)
        if kept is not None and kept[0] is vocabulary:
            return kept[1]
    found = scored_terms(vocabulary)
    terms = tuple(sorted(found))
    if terms:
        vectors, _ = encode_cached(encoder, list(terms), batch_size=batch_size, progress=progress)
        result = VocabularyVectors(terms, tuple(tuple(found[t]) for t in terms), np.asarray(vectors, dtype=np.float32))
    else:
        result = VocabularyVectors((), (), np.zeros((0, 1), dtype=np.float32))
    with _lock:
        if len(_encoded) >= MAX_KEPT:
            _encoded.pop(next(iter(_encoded)))
        _encoded[key] = (vocabulary, result)  # the vocabulary itself too: an id is only unique while it lives
    return result


def similar_reading(text: str, query_vector: np.ndarray, level_best: float, vectors: VocabularyVectors, *,
                    min_cosine: float = MIN_COSINE, min_lead: float = MIN_LEAD,
                    names: dict[str, str] | None = None) -> QueryReading | None:
    """The ``similar term`` reading of a query no rule placed: its nearest source term's concepts, when close enough.

    Parameters
    ----------
    text : str
        The query as typed.
    query_vector : numpy.ndarray
        Its unit vector under the model that encoded ``vectors``.
    level_best : float
        The query's best cosine with any name of the level (the dense ranking's first score).
    vectors : VocabularyVectors
    min_cosine, min_lead : float
        The nearest term's cosine must reach ``min_cosine`` and exceed ``level_best`` by ``min_lead``.
    names : dict, optional
        Target concept id → its name, for the note.

    Returns
    -------
    QueryReading or None
    """
    if not len(vectors):
        return None
    scores = vectors.vectors @ np.asarray(query_vector, dtype=np.float32).reshape(-1)
    best = int(np.argmax(scores))
    cosine = float(scores[best])
    if cosine < min_cosine or cosine - level_best < min_lead:
        return None
    matches = vectors.matches[best]
    concepts = tuple(dict.fromkeys(m.concept_id for m in matches))
    names = names or {}
    sense = Sense(vectors.terms[best], concepts, tuple(names.get(c, matches[0].term.concept_name) for c in concepts),
                  f"{matches[0].provenance}; cosine {cosine:.2f}", len(matches))
    return QueryReading(text, SIMILAR, (sense,))


def similar_readings(texts: Sequence[str], query_vectors: np.ndarray, level_vectors: np.ndarray,
                     vectors: VocabularyVectors, *, names: dict[str, str] | None = None) -> list[QueryReading | None]:
    """:func:`similar_reading` for a batch of queries, their best level cosines computed here (one product)."""
    query_vectors = np.asarray(query_vectors, dtype=np.float32)
    if not len(texts):
        return []
    best = (query_vectors @ np.asarray(level_vectors, dtype=np.float32).T).max(axis=1)
    return [similar_reading(t, q, float(b), vectors, names=names) for t, q, b in zip(texts, query_vectors, best)]


def with_similar_terms(expansions: Sequence, infos: Sequence, query_vectors: np.ndarray, level_vectors: np.ndarray, *,
                       vocabulary: ClinicalVocabulary | None, model, progress: Progress | None = None) -> list:
    """The expansions with a ``similar term`` reading for every text that no other rule placed.

    Parameters
    ----------
    expansions : sequence of QueryExpansion
        From :func:`bioviz.search.lexicon.expand_queries` with the vocabulary.
    infos : sequence of QueryInfo
        The resolved texts (a name or id of the ontology is never read).
    query_vectors : numpy.ndarray
        The texts' unit vectors under ``model``.
    level_vectors : numpy.ndarray
        The level's name vectors under ``model`` (for each text's best level cosine).
    vocabulary : ClinicalVocabulary or None
        None (expansion off): the expansions come back as they are.
    model : ModelSpec or str
        The model the vectors are of (the first model, when two are compared: placement is shared).
    progress : callable, optional
        ``progress(done, total)`` while the vocabulary's terms are encoded the first time.
    """
    from bioviz.search.lexicon import QueryExpansion  # imported here: lexicon imports query_reading, as this does

    open_rows = [i for i, (found, info) in enumerate(zip(expansions, infos))
                 if not info.in_ontology and (found.reading is None or not found.reading.senses)]
    # a sentence encoder's cosines only: a vectors file holds no vector for the vocabulary's terms, and
    # char-tfidf's spelling cosines are on another scale than the thresholds were chosen on
    if vocabulary is None or not open_rows or not ModelSpec.of(model).is_neural:
        return list(expansions)
    terms = vocabulary_vectors(vocabulary, model, progress=progress)
    readings = similar_readings([expansions[i].text for i in open_rows], np.asarray(query_vectors)[open_rows],
                                level_vectors, terms, names=vocabulary.names)
    out = list(expansions)
    for row, reading in zip(open_rows, readings):
        if reading is not None:
            out[row] = QueryExpansion(out[row].text, out[row].entries, reading)
    return out
