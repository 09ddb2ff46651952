"""Answers while a level encodes, in the app: the encoding in a thread, a fragment that polls and redraws.

Neighbours and Code terms used to wait on :func:`ui.cache.prepare_vectors` (a bar, then the
answer minutes later). Now a level whose vectors are not stored is encoded in a background
thread of the server (:func:`bioviz.models.encoding_session.encode_in_background`: one per model
and level whoever asks; a level the warm-up, another page or a job is encoding is waited for by
that thread, not encoded twice), and the page draws a fragment that re-runs every
:data:`REFRESH_S` seconds without a click: the encoding's bar, then a partial answer from the
names encoded so far (:mod:`bioviz.search.progressive`), marked. When every name is encoded the
fragment re-runs the whole page once, which then gives the usual answer from the stored block.

The script thread never waits for the encoding: a poll reads the new rows of the vector cache
(:meth:`~bioviz.models.encoding_session.EncodingSession.partial`) and the claimant's progress
file. The char-tfidf rows of the level's names (tens of seconds on ICD-10-CM) are built in a
child process (:func:`~bioviz.search.progressive.sparse_names_aside`, followed by a thread); until
they are ready the level's name search ranks the names by spelling.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor

import streamlit as st

from bioviz.errors import BiovizError
from bioviz.models.encoding_session import (BackgroundEncoding, EncodingSession, PartialVectors,
                                             background_encoding, encode_in_background)
from bioviz.models.model_spec import ModelSpec
from bioviz.models.registry import load_encoder
from bioviz.ontology import LevelSpec
from bioviz.search.hybrid import NameMatcher
from bioviz.ontology.model import Ontology
from bioviz.search.lexicon import Expansion, Lexicon, QueryExpansion, expand_queries, lexicon_ready, load_lexicon
from bioviz.search.neighbours import QueryInfo
from bioviz.search.progressive import LexicalRanking, QueryForm, sparse_names_aside
from bioviz.search.vocabulary import UserSynonyms, bundled_ready, vocabulary_for
from ui import cache, clinical_vocabulary
from ui.markdown import md

# Levels with fewer names to encode than this get the bar alone: they are encoded in well under a
# minute (5,000 names: about 20 s at med-minilm's 270 names/s), and a partial answer would only flicker.
MIN_MISSING = 5_000
REFRESH_S = 2.0  # seconds between two polls of a running encoding (its chunks are stored about this often)
_PARTIAL = "_progressive_partial"  # session key: (model, level) -> the PartialVectors read last

# One thread builds char-tfidf rows, one level at a time: beside an encoding, two would halve both.
_TFIDF = ThreadPoolExecutor(max_workers=1, thread_name_prefix="level-tfidf")
_TFIDF_BUILDS: dict[LevelSpec, Future] = {}
_TFIDF_LOCK = threading.Lock()


def session_of(model: ModelSpec, spec: LevelSpec) -> EncodingSession:
    """The encoding session of ``model`` on the level's names (a page's)."""
    return EncodingSession.of(load_encoder(model), cache.view(spec).names, owner="a page")


def partial_wanted(models: Sequence[ModelSpec | None], spec: LevelSpec) -> bool:
    """Whether a page should answer progressively: some model has at least :data:`MIN_MISSING` of the
    level's names to encode, or a background encoding of it runs in this server already."""
    ready = st.session_state.setdefault("_vectors_ready", set())
    for model in dict.fromkeys(m for m in models if m and (m, spec) not in ready):
        session = session_of(model, spec)
        job = background_encoding(session)
        if job is not None and not job.done():
            return True
        if not session.ready() and session.estimate().missing >= MIN_MISSING:
            return True
    return False


def running_encodings(models: Sequence[ModelSpec | None], spec: LevelSpec) -> dict[ModelSpec, BackgroundEncoding]:
    """The background encodings still running for the level under ``models``, started where needed.

    A model whose vectors are all stored is not listed (and remembered as ready for this
    session, as :func:`ui.cache.prepare_vectors` remembers it). A failed encoding is one
    :class:`BiovizError` with its reason.
    """
    ready = st.session_state.setdefault("_vectors_ready", set())
    running = {}
    for model in dict.fromkeys(m for m in models if m and (m, spec) not in ready):
        session = session_of(model, spec)
        job = None if session.ready() else encode_in_background(session)
        if job is not None and job.done() and job.error is not None:
            error = job.error
            raise error if isinstance(error, BiovizError) else BiovizError(f"encoding the level failed: {error}")
        if job is None or job.done():
            ready.add((model, spec))
        else:
            running[model] = job
    return running


def partial_vectors(model: ModelSpec, spec: LevelSpec) -> PartialVectors:
    """The level's vectors stored so far under ``model``, read on from this session's last read."""
    kept = st.session_state.setdefault(_PARTIAL, {})
    kept[(model, spec)] = session_of(model, spec).partial(kept.get((model, spec)))
    return kept[(model, spec)]


def lexical_ranking(spec: LevelSpec, text: str) -> LexicalRanking:
    """The level's names ranked by spelling: char-tfidf once its rows are built (:func:`start_tfidf`), else the
    name search."""
    with _TFIDF_LOCK:
        build = _TFIDF_BUILDS.get(spec)
    if build is not None and build.done() and build.exception() is None and build.result().model is not None:
        return LexicalRanking.by_tfidf(build.result(), text)
    return LexicalRanking.by_name_search(cache.name_search(spec), cache.view(spec).names, text)


def start_tfidf(spec: LevelSpec) -> None:
    """Build the char-tfidf rows of the level's names in a thread, if not built or building.

    Called after a partial answer is drawn, not before: the fit is Python code that holds the GIL
    much of the time, and the first answer should not wait behind it.
    """
    with _TFIDF_LOCK:
        build = _TFIDF_BUILDS.get(spec)
        if build is None or (build.done() and build.exception() is not None):
            names = cache.view(spec).names
            _TFIDF_BUILDS[spec] = _TFIDF.submit(sparse_names_aside, names)  # a child process: see there


@st.cache_resource(max_entries=4, show_spinner=False)
def matcher(spec: LevelSpec) -> NameMatcher:
    """The level's names by their case-, space- and punctuation-free form (exact matches of a partial answer)."""
    v = cache.view(spec)
    return NameMatcher(v.names, v.name_concepts)


def still_encoding(models: Sequence[ModelSpec | None], spec: LevelSpec) -> dict[ModelSpec, BackgroundEncoding] | None:
    """What a progressive fragment polls: the encodings still running, or None after one error line.

    When nothing is left running the whole page is rerun (``st.rerun`` does not return): every
    name is stored and the page draws its usual view.
    """
    try:
        running = running_encodings(models, spec)
    except BiovizError as error:
        st.error(md(error))
        return None
    if not running:
        st.rerun()
    return running


def answer_while_encoding(models: Sequence[ModelSpec | None], spec: LevelSpec, fragment: Callable[[], None]) -> None:
    """Draw ``fragment`` (a page's partial answer, an ``st.fragment``) and stop the page while the level encodes.

    Does nothing when every model's vectors are stored, or too few are missing to be worth a
    partial answer (:func:`partial_wanted`): the page then goes on to its usual view. An encoding
    that failed is one error line, and the page stops.
    """
    try:
        partial = partial_wanted(models, spec) and bool(running_encodings(models, spec))
    except BiovizError as error:
        st.error(md(error))
        st.stop()
    if partial:
        fragment()
        st.stop()


def encoding_bar(job: BackgroundEncoding) -> None:
    """The encoding's bar: names done, the recent rate, the time left (who encodes, when another process does)."""
    progress = job.session.progress()
    if progress is None:  # the thread is loading the model, or waiting for the claim's first write
        total = len(set(job.session.texts))
        st.progress(0.0, text=md(f"Starting to encode {total:,} names with {job.session.label}…"))
    else:
        st.progress(progress.fraction, text=md(progress.text()))


def caption(marker: str, lexical: str) -> str:
    """The line under the marker: what the partial answer is made of, and that it refines itself."""
    return (f"**{md(marker)}**: exact name matches first, then the names ranked by spelling ({md(lexical)}) "
            "merged with those ranked by meaning among the names encoded so far. It refreshes itself as the "
            "encoding goes on; the full ranking follows when every name is encoded.")


# Query texts are encoded in a thread too: the model may still be loading (seconds under load) for the
# level's encoding, and a first partial answer needs no vector (exact and spelling matches come first).
_QUERIES = ThreadPoolExecutor(max_workers=1, thread_name_prefix="query-vectors")
_QUERY_VECTORS: dict[tuple[ModelSpec, tuple[str, ...]], Future] = {}
_MAX_QUERIES = 256


def query_vectors(model: ModelSpec, texts: Sequence[str]):
    """The vectors of ``texts`` under ``model`` once a thread has encoded them; None until then.

    Encoded as a term list is (:func:`bioviz.search.term_coding.encode_terms`: not kept in the disk cache).
    """
    from bioviz.search.term_coding import encode_terms  # pandas: only a partial answer's first poll needs it

    return _result_of(_QUERY_VECTORS, (model, tuple(texts)), _QUERIES, encode_terms, list(texts))


def _result_of(futures: dict, key, executor: ThreadPoolExecutor, work: Callable, *args):
    """``work(*args)``'s result once ``executor`` has run it (one run per ``key``; a failed one is run again on
    the next poll), else None. At most :data:`_MAX_QUERIES` keys are kept, the oldest dropped first."""
    with _TFIDF_LOCK:
        future = futures.get(key)
        if future is None or (future.done() and future.exception() is not None):
            while len(futures) >= _MAX_QUERIES:
                futures.pop(next(iter(futures)))
            future = futures[key] = executor.submit(work, *args)
    return future.result() if future.done() and future.exception() is None else None


# The synonym lexicon and the clinical vocabulary are read (built once per package version: seconds) in a thread
# of their own: a first partial answer does not wait for them, and the query vectors' thread does not queue behind.
_LEXICON = ThreadPoolExecutor(max_workers=1, thread_name_prefix="query-expansion")
_EXPANSIONS: dict[tuple, Future] = {}


def _expand(info: QueryInfo, expansion: Expansion, lexicon: bool, ontology: Ontology | None,
            user: UserSynonyms | None) -> QueryExpansion:
    lexicon = load_lexicon() if lexicon else Lexicon(())
    vocabulary = vocabulary_for(ontology, user) if ontology is not None else None
    return expand_queries([info], expansion, lexicon, vocabulary)[0]


def query_expansion(info: QueryInfo, expansion: Expansion, spec: LevelSpec | None = None) -> QueryExpansion | None:
    """The query's synonym expansion and clinical reading once a thread has made them; None until then, when off,
    or for a name the ontology has (its own concept is an exact match, as
    :func:`~bioviz.search.lexicon.expand_queries` has it). A lexicon or vocabulary that cannot be read leaves
    the partial answer unexpanded (the full one says why).

    Only what is built already is read: the lexicon (:func:`~bioviz.search.lexicon.lexicon_ready`, about a
    second) and, given the level ``spec``, its ontology's clinical vocabulary with the user's synonyms for
    the source (:mod:`ui.clinical_vocabulary`), once its bundled terms are
    (:func:`~bioviz.search.vocabulary.bundled_ready`; indexing them for the ontology takes a few seconds in
    the thread). Their first builds (seconds of Python, once per package version) would compete with the
    level's encoding in this server; the full answer builds them. An expansion made without one is made
    again once it is built.
    """
    lexicon = lexicon_ready()
    read = spec is not None and bundled_ready()
    if not expansion.on or info.in_ontology or not (lexicon or read):
        return None
    ontology = cache.level_ontology(spec) if read else None
    user = clinical_vocabulary.user_synonyms(spec) if read else None
    key = (info.text, expansion, lexicon, (clinical_vocabulary.source_key(spec),
                                           clinical_vocabulary.synonyms_digest(spec)) if read else None)
    return _result_of(_EXPANSIONS, key, _LEXICON, _expand, info, expansion, lexicon, ontology, user)


def query_forms(model: ModelSpec, spec: LevelSpec, expanded: QueryExpansion | None) -> tuple[QueryForm, ...]:
    """The expanded forms of a query as a partial answer ranks them: each form's spelling ranking now, its
    vector once the query thread has encoded it (:func:`query_vectors`)."""
    texts = list(expanded.forms) if expanded is not None else []
    if not texts:
        return ()
    vectors = query_vectors(model, texts)
    return tuple(QueryForm(text, None if vectors is None else vectors[i], lexical_ranking(spec, text))
                 for i, text in enumerate(texts))

