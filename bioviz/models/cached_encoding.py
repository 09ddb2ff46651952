"""Cached encoding: names served from the vector cache, only the missing ones encoded.

:func:`encode_cached` is the one path new vectors take: looked up by the encoder's
fingerprint (:mod:`bioviz.models.vector_cache`), the missing ones encoded here or on the Ray
cluster (:func:`encode_missing`), checked finite, timed for the next estimate and stored.

``BIOVIZ_TEST_ENCODE_DELAY_S`` (seconds per encoded name) slows every encoding down for the
browser tests, which must watch an encoding in progress on a cheap model; nothing else sets
it. It is applied here, batch by batch inside the timed encoding, so that every process that
encodes (a page, the warm-up's child, a job) is slowed alike and the rates it records, the
estimates and the chunk sizes built on them describe the slowed encoding.
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass

import numpy as np

from bioviz.models import ray_embedding
from bioviz.models.encoders import Encoder, Progress, worker_encoder
from bioviz.models.encoding_estimate import record_rate
from bioviz.models.load_errors import check_finite
from bioviz.models.vector_cache import BLOCK_MIN, VectorCache

logger = logging.getLogger(__name__)

DELAY_ENV = "BIOVIZ_TEST_ENCODE_DELAY_S"


@dataclass(frozen=True)
class EmbedStats:
    """How an embedding call was served."""

    names: int
    cache_hits: int
    encoded: int
    seconds: float

    @property
    def names_per_second(self) -> float:
        """Throughput over the whole call (cache lookups included)."""
        return self.names / self.seconds if self.seconds > 0 else float("inf")


def encode_missing(encoder: Encoder, texts: list[str], batch_size: int = 64,
                   progress: Progress | None = None) -> np.ndarray:
    """``encoder.encode(texts)`` here, or on the Ray cluster when the Ray executor is configured.

    The cluster takes the names when ``BIOVIZ_EXECUTOR=ray`` (and at least
    ``BIOVIZ_RAY_MIN_NAMES`` are missing) or inside ``ray_embedding.executor("ray")``, for
    models a worker can load by name (:mod:`bioviz.models.ray_embedding`).
    """
    delay = encode_delay()
    if delay > 0:
        return _slowed(encoder, texts, batch_size, progress, delay)
    if ray_embedding.wanted(encoder.label, encoder.worker_kind, len(texts)):
        return ray_embedding.encode(encoder, worker_encoder, texts, batch_size=batch_size, progress=progress)
    return encoder.encode(texts, batch_size=batch_size, progress=progress)


def encode_delay() -> float:
    """Seconds of :data:`DELAY_ENV` per encoded name; 0 when unset (everywhere but the browser tests)."""
    try:
        return max(float(os.environ.get(DELAY_ENV) or 0), 0.0)
    except ValueError:
        return 0.0


def _slowed(encoder: Encoder, texts: list[str], batch_size: int, progress: Progress | None,
            delay: float) -> np.ndarray:
    """The browser tests' slowed encoding: here, one batch at a time, each followed by its names' delay."""
    parts = []
    for start in range(0, len(texts), batch_size):
        batch = texts[start:start + batch_size]
        parts.append(encoder.encode(batch, batch_size=batch_size))
        time.sleep(delay * len(batch))
        if progress is not None:
            progress(start + len(batch), len(texts))
    return np.concatenate(parts) if parts else encoder.encode(texts, batch_size=batch_size)


def encode_cached(encoder: Encoder, texts, *, batch_size: int = 64, progress: Progress | None = None,
                  use_cache: bool = True) -> tuple[np.ndarray, EmbedStats]:
    """Vectors of ``texts`` from the disk cache, encoding (and storing) only the missing ones.

    Parameters
    ----------
    encoder : Encoder
    texts : sequence of str
        Duplicates are encoded once.
    batch_size : int
    progress : callable, optional
        ``progress(done, total)`` counted in names; cache hits count as done at once.
    use_cache : bool
        Read and write the cache (``BIOVIZ_HOME/embeddings``).

    Returns
    -------
    (vectors, stats)
        ``(len(texts), dim)`` float32 unit rows in the order of ``texts``, and an :class:`EmbedStats`.
    """
    started = time.perf_counter()
    texts = list(texts)
    cache = VectorCache() if use_cache else None
    if cache is not None and len(texts) >= BLOCK_MIN:
        # a whole level asked for again: one file read instead of a lookup per name
        block = cache.get_block(encoder.fingerprint, texts)
        if block is not None:
            if progress is not None:
                progress(len(texts), len(texts))
            stats = EmbedStats(len(texts), len(dict.fromkeys(texts)), 0, time.perf_counter() - started)
            logger.info("%s: %d names from a cached block in %.2fs", encoder.label, len(texts), stats.seconds)
            return block, stats
    unique = list(dict.fromkeys(texts))
    found: dict[str, np.ndarray] = {}
    if cache is not None:
        found = cache.get(encoder.fingerprint, unique)
    missing = [t for t in unique if t not in found]
    hits = len(unique) - len(missing)
    if progress is not None:
        progress(hits, len(unique))
    if missing:
        report = None if progress is None else (lambda done, _total: progress(hits + done, len(unique)))
        encoding_started = time.perf_counter()
        fresh = encode_missing(encoder, missing, batch_size=batch_size, progress=report)
        check_finite(fresh, encoder.label)  # the one place new vectors pass before the cache and callers
        record_rate(encoder, len(missing), time.perf_counter() - encoding_started)  # for the next estimate
        if cache is not None:
            cache.put(encoder.fingerprint, missing, fresh, label=encoder.label)
        found.update(zip(missing, fresh))
    vectors = np.stack([found[t] for t in texts]) if texts else np.zeros((0, encoder.dim), dtype=np.float32)
    vectors = np.ascontiguousarray(vectors, dtype=np.float32)
    if cache is not None and len(texts) >= BLOCK_MIN:
        cache.put_block(encoder.fingerprint, texts, vectors)
    stats = EmbedStats(len(texts), hits, len(missing), time.perf_counter() - started)
    logger.info("%s: %d names, %d from cache, %d encoded in %.2fs", encoder.label, len(texts), hits,
                len(missing), stats.seconds)
    return vectors, stats
