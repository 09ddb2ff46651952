"""One owner for the encoding of a level's names: estimate, claim, progress and the vectors stored so far.

Before this module, a page or command that needed a level's vectors walked the road itself:
:func:`~bioviz.models.encoding_estimate.estimate_encoding` for the line said before, then
:func:`~bioviz.models.shared_encoding.encode_shared` (the claim, the chunks, Ray, the store, the
rate recorded by :mod:`bioviz.models.cached_encoding`), and back to the cache for the block.
An :class:`EncodingSession` holds that road for one model and one exact list of names, so it
runs one way::

    EncodingSession.of(model, names, owner)
        .ready()      is the level's block stored?       (vector_cache)
        .estimate()   how many names, how long            (encoding_estimate)
        .progress()   where someone's encoding stands     (shared_encoding's progress file)
        .encode()     claim, encode, store, read back     (shared_encoding -> cached_encoding)
        .partial()    the vectors stored so far           (vector_cache rows, read incrementally)

:meth:`EncodingSession.partial` is what progressive answers read while the encoding runs, in
this process or any other (the warm-up, another page, a job, a command): the claimant stores
each chunk as one transaction of the vector cache (a few hundred to a thousand names every
couple of seconds, in a shuffled order of length-sorted batches: :func:`_chunk_order`), so the
rows already stored are an unbiased sample of the level that grows until it is the whole level.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import numpy as np

from bioviz.models.encoding_estimate import EncodingEstimate, estimate_encoding
from bioviz.models.model_spec import ModelSpec
from bioviz.models.shared_encoding import (CLAIM_MIN, MAX_CHUNK, EncodingProgress, claim_paths, encode_shared,
                                          read_claim, waiting_progress)
from bioviz.models.vector_cache import BLOCK_MIN, VectorCache, texts_digest

logger = logging.getLogger(__name__)


@dataclass(frozen=True, eq=False)
class PartialVectors:
    """The vectors of a list of names that are stored so far.

    Attributes
    ----------
    total : int
        Distinct names of the list.
    rows : numpy.ndarray
        ``int64``: for each stored name, its first row in the list (ascending order not implied).
    vectors : numpy.ndarray
        ``(len(rows), dim)`` float32 unit vectors, aligned with ``rows``.
    stored : int
        The model's count of stored vectors when this was read (:meth:`VectorCache.count`): while it
        has not moved, nothing new can be read.
    """

    total: int
    rows: np.ndarray
    vectors: np.ndarray
    stored: int = -1

    @property
    def done(self) -> int:
        """Distinct names with a vector."""
        return len(self.rows)

    @property
    def complete(self) -> bool:
        """True once every distinct name has a vector."""
        return self.done >= self.total

    @classmethod
    def empty(cls, total: int, dim: int = 0, stored: int = -1) -> PartialVectors:
        """No vector yet (``dim`` 0 until one is read)."""
        return cls(total, np.zeros(0, dtype=np.int64), np.zeros((0, dim), dtype=np.float32), stored)


@dataclass(frozen=True, eq=False)
class EncodingSession:
    """The encoding of one exact list of names under one model, and everything said about it.

    Attributes
    ----------
    encoder : Encoder
        From :func:`bioviz.models.registry.load_encoder` (weights load only when :meth:`encode` needs them).
    texts : tuple of str
        The exact list (a level's names, order included: it names the claim and the block).
    owner : str
        Who encodes when this session does (:data:`bioviz.models.shared_encoding.OWNERS`).

    Examples
    --------
    >>> session = EncodingSession.of("med-minilm", view.names, owner="a command")   # doctest: +SKIP
    >>> session.estimate().message()                                                 # doctest: +SKIP
    'First use of med-minilm on this level: about 7 min to encode 110,233 names (measured rate 270 names/s)'
    >>> session.partial().done, session.progress()                                   # doctest: +SKIP
    (12800, EncodingProgress(label='med-minilm', done=12800, total=110233, ...))
    """

    encoder: object
    texts: tuple[str, ...]
    owner: str = "a page"

    @classmethod
    def of(cls, model, texts: Sequence[str], owner: str = "a page") -> EncodingSession:
        """The session of ``model`` (a :class:`ModelSpec`, text, or an encoder already loaded) on ``texts``."""
        if isinstance(model, (str, ModelSpec)):  # not an encoder yet
            from bioviz.models.registry import load_encoder  # registry imports torch lazily itself; a cycle otherwise

            model = load_encoder(model)
        return cls(model, tuple(texts), owner)

    @property
    def label(self) -> str:
        """The model's readable label."""
        return self.encoder.label

    @property
    def fingerprint(self) -> str:
        """The model's fingerprint: the key of its vectors."""
        return self.encoder.fingerprint

    def ready(self) -> bool:
        """True when every name has a vector: the list's block is stored (or, for a list too short to get
        a block, :data:`~bioviz.models.vector_cache.BLOCK_MIN`, every name's row)."""
        cache = VectorCache()
        if cache.has_block(self.fingerprint, self.texts):
            return True
        distinct = set(self.texts)
        return len(self.texts) < BLOCK_MIN and len(cache.cached_texts(self.fingerprint, distinct)) == len(distinct)

    def estimate(self) -> EncodingEstimate:
        """How many names are missing and how long encoding them will take (no weights loaded)."""
        return estimate_encoding(self.encoder, self.texts)

    def progress(self) -> EncodingProgress | None:
        """The progress of whoever holds the claim on this list now (any process), or None when nobody does.

        Read from the claimant's progress file: a page that did not start the encoding (the warm-up
        did, or a job) can still show how far it is.
        """
        state = read_claim(claim_paths(self.fingerprint, list(self.texts))[1])
        if state is None:
            return None
        seen = waiting_progress(state, self.label, len(dict.fromkeys(self.texts)))
        # this process's own claim (a page's encoding in a thread) is not something it waits for
        return replace(seen, waiting=False) if state.get("pid") == os.getpid() else seen

    def encode(self, *, report: Callable[[EncodingProgress], None] | None = None,
               progress: Callable[[int, int], None] | None = None, batch_size: int = 64, max_chunk: int = MAX_CHUNK,
               claim_min: int = CLAIM_MIN):
        """Every vector of the list: claimed, encoded where missing, stored, read back as one block.

        Waits (reporting the claimant's progress) when another process encodes the same list
        (:func:`~bioviz.models.shared_encoding.encode_shared`, which also says what ``report``,
        ``progress``, ``batch_size``, ``max_chunk`` and ``claim_min`` do).

        Returns
        -------
        (vectors, stats)
            ``(len(texts), dim)`` float32 rows and an :class:`~bioviz.models.cached_encoding.EmbedStats`.
        """
        return encode_shared(self.encoder, list(self.texts), batch_size=batch_size, progress=progress,
                             report=report, owner=self.owner, max_chunk=max_chunk, claim_min=claim_min)

    def partial(self, since: PartialVectors | None = None) -> PartialVectors:
        """The vectors stored so far for this list, read incrementally.

        Parameters
        ----------
        since : PartialVectors, optional
            An earlier read of this session: only the names it lacked are looked up (a poll every
            couple of seconds reads the new chunks, not the whole level again).

        Returns
        -------
        PartialVectors
            Complete (and read from the block, memory-mapped) once the level's block is stored.
        """
        first: dict[str, int] = {}
        for row, text in enumerate(self.texts):
            first.setdefault(text, row)
        total = len(first)
        cache = VectorCache()
        block = cache.get_block(self.fingerprint, self.texts) if len(self.texts) else None
        if block is not None:
            rows = np.fromiter(first.values(), dtype=np.int64, count=total)
            return PartialVectors(total, rows, np.asarray(block[rows]))
        stored = cache.count(self.fingerprint)  # read before the rows: a chunk written meanwhile is read next time
        if since is not None and since.stored == stored:
            return since  # nothing written since: a lookup of the whole level (about a second at 110k) saved
        known = set() if since is None else {self.texts[r] for r in since.rows}
        found = cache.get(self.fingerprint, [t for t in first if t not in known])
        if not found:
            return replace(since, stored=stored) if since is not None else PartialVectors.empty(total, stored=stored)
        rows = np.fromiter((first[t] for t in found), dtype=np.int64, count=len(found))
        vectors = np.stack(list(found.values())).astype(np.float32, copy=False)
        if since is not None and since.done:
            rows, vectors = np.concatenate([since.rows, rows]), np.concatenate([since.vectors, vectors])
        return PartialVectors(total, rows, vectors, stored)


class BackgroundEncoding:
    """A session's :meth:`EncodingSession.encode` running in a thread of this process.

    What lets a page's script thread or a command answer while the level encodes: they poll
    :meth:`EncodingSession.partial` and :meth:`EncodingSession.progress` meanwhile. Get one with
    :func:`encode_in_background` (one thread per model and list in a process, whoever asks).

    Attributes
    ----------
    session : EncodingSession
    error : BaseException or None
        What stopped the encoding, once :meth:`done` (a :class:`~bioviz.errors.BiovizError` to show).
    """

    def __init__(self, session: EncodingSession) -> None:
        self.session, self.error = session, None
        self._finished = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"encoding-{session.label}", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            self.session.encode()
        except BaseException as error:  # noqa: BLE001 - kept for whoever polls: a thread's error is otherwise lost
            logger.warning("background encoding of %d names with %s failed: %s", len(self.session.texts),
                           self.session.label, error)
            self.error = error
        finally:
            self._finished.set()

    def done(self) -> bool:
        """True once the encoding ended (every vector stored, or :attr:`error`)."""
        return self._finished.is_set()

    def wait(self, timeout: float | None = None) -> bool:
        """Wait until :meth:`done` (at most ``timeout`` seconds); whether it is."""
        return self._finished.wait(timeout)


_RUNNING: dict[tuple[str, str], BackgroundEncoding] = {}
_RUNNING_LOCK = threading.Lock()


def _key(session: EncodingSession) -> tuple[str, str]:
    return session.fingerprint, texts_digest(list(session.texts))


def background_encoding(session: EncodingSession) -> BackgroundEncoding | None:
    """The background encoding of ``session``'s model and list in this process (running or ended); None if none."""
    with _RUNNING_LOCK:
        return _RUNNING.get(_key(session))


def encode_in_background(session: EncodingSession) -> BackgroundEncoding:
    """The running background encoding of ``session``'s model and list, started if there is none.

    One per process and (fingerprint, list): two sessions of a server asking for the same level
    share one thread (and other processes are kept out by the session's claim). Ask only when the
    session is not :meth:`~EncodingSession.ready`: a finished one is then started again (its vectors
    were cleared since), and a failed one is returned once, with its :attr:`~BackgroundEncoding.error`,
    then started again on the next ask.
    """
    key = _key(session)
    with _RUNNING_LOCK:
        running = _RUNNING.get(key)
        if running is not None and running.done() and running.error is not None:
            del _RUNNING[key]  # said once, to this asker; the next ask starts it again
            return running
        if running is None or running.done():  # asked again after one finished: its vectors are gone (cleared)
            running = _RUNNING[key] = BackgroundEncoding(session)
        return running
