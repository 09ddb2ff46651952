"""One encoding of a level at a time, and progress that anyone waiting for it can follow.

The background warm-up, a page in any session and a training job may all need the same
level's vectors under the same model. Encoding them twice on a 2-core machine makes both
copies slower, so :func:`encode_shared` *claims* the work first: a lock file per (model
fingerprint, exact list of names) under ``BIOVIZ_HOME/encoding`` (``fcntl.flock`` through
``filelock``: the system releases it when its process dies). Whoever holds the claim encodes
the missing names in chunks small enough to report every couple of seconds, stores each chunk
in the vector cache, and rewrites a small progress file (atomically, at most every second):
names done and total, the rate over a recent window, the time left, its pid and who it is.

Whoever finds the claim taken waits: it polls the progress file every second and reports
the claimant's progress as its own (:class:`EncodingProgress`, ``waiting=True``), and when the
claim is free it takes it and encodes whatever is still missing: nothing when the claimant
finished (the level's block is read), the rest when the claimant was killed (every stored
chunk is kept, nothing half-written: each chunk is one transaction of the cache). An
unreadable progress file is only a missing report.

``BIOVIZ_TEST_ENCODE_DELAY_S`` (seconds per encoded name, :data:`DELAY_ENV`) slows the encoding
down for the browser tests; it is applied where every encoding passes
(:func:`bioviz.models.cached_encoding.encode_missing`), so the claimant's chunks and rates see it.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from filelock import FileLock, Timeout

from bioviz.models import ray_embedding
from bioviz.models.cached_encoding import DELAY_ENV, EmbedStats, encode_cached  # noqa: F401 - DELAY_ENV named here too
from bioviz.models.encoding_estimate import RateWindow, format_duration, measured_rate
from bioviz.models.vector_cache import VectorCache
from bioviz.paths import atomic_path, subdir

logger = logging.getLogger(__name__)

CLAIMS_DIR = "encoding"
POLL_S = 1.0  # a waiter reads the claimant's progress this often
WRITE_EVERY_S = 1.0  # the claimant rewrites its progress file at most this often
CHUNK_S = 2.0  # aim of one chunk's encoding time: the bar moves at least this often
MAX_CHUNK = 1024
CLAIM_MIN = 200  # shorter lists (a term list, a query) encode in about a second: no claim, no file
OWNERS = ("the background warm-up", "a page", "a training job", "a command")


@dataclass(frozen=True)
class EncodingProgress:
    """Where an encoding of a list of names stands, for a bar.

    Attributes
    ----------
    label : str
        The model's readable label.
    done, total : int
        Distinct names with a vector, of all the distinct names asked for.
    rate : float or None
        Names encoded per second over a recent window; None until known.
    seconds_left : float or None
        At that rate; None until known.
    owner : str
        Who encodes (one of :data:`OWNERS`).
    waiting : bool
        True when another process encodes and this one follows it.
    """

    label: str
    done: int
    total: int
    rate: float | None
    seconds_left: float | None
    owner: str
    waiting: bool = False

    @property
    def fraction(self) -> float:
        """Done as a fraction in [0, 1]."""
        return min(max(self.done / self.total, 0.0), 1.0) if self.total else 0.0

    def text(self) -> str:
        """One line, e.g. ``Encoding 24,463 names with minilm: 3,072 done · 85 names/s · about 4 min left``."""
        head = (f"Waiting for {self.owner}, which is encoding these {self.total:,} names with {self.label} "
                f"(not encoding them twice)" if self.waiting else f"Encoding {self.total:,} names with {self.label}")
        parts = [f"{head}: {self.done:,} done"]
        if self.rate:
            parts.append(f"{self.rate:,.0f} names/s")
        if self.seconds_left is not None and self.done < self.total:
            parts.append(f"{format_duration(self.seconds_left)} left")
        return " · ".join(parts)


def claim_paths(fingerprint: str, texts: list[str]) -> tuple[Path, Path]:
    """``(lock file, progress file)`` of the claim on encoding ``texts`` under a model fingerprint."""
    digest = hashlib.sha256("\x1f".join(texts).encode("utf-8")).hexdigest()[:24]
    stem = subdir(CLAIMS_DIR) / f"{fingerprint[:32]}-{digest}"
    return stem.with_suffix(".lock"), stem.with_suffix(".json")


def read_claim(path: Path) -> dict | None:
    """A claimant's progress file, or None when missing or unreadable (a waiter then shows no counts)."""
    try:
        state = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    ok = isinstance(state, dict) and all(isinstance(state.get(k), int) for k in ("done", "total"))
    return state if ok else None


def _number(value) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0 else None


def _waiting_progress(state: dict | None, label: str, total: int) -> EncodingProgress:
    if state is None:
        return EncodingProgress(label, 0, total, None, None, "another process", waiting=True)
    owner = state.get("owner") if state.get("owner") in OWNERS else "another process"
    return EncodingProgress(label, min(state["done"], total), total, _number(state.get("rate")),
                            _number(state.get("eta_s")), owner, waiting=True)


class _Claimant:
    """The claimant's side: counts names, measures the recent rate, writes the progress file, reports."""

    def __init__(self, path: Path, label: str, owner: str, total: int, prior: float | None, report) -> None:
        self.path, self.label, self.owner, self.total, self.report = path, label, owner, total, report
        self.window = RateWindow(prior=prior)
        self.written = float("-inf")
        self.done = 0

    def write(self, rate: float | None = None, left: float | None = None) -> None:
        """Rewrite the progress file (atomically: a waiter never reads half of it)."""
        state = {"pid": os.getpid(), "owner": self.owner, "label": self.label, "done": self.done,
                 "total": self.total, "rate": round(rate, 2) if rate else None,
                 "eta_s": round(left, 1) if left is not None else None, "updated": time.time()}
        try:
            with atomic_path(self.path, suffix=".json") as tmp:
                tmp.write_text(json.dumps(state), encoding="utf-8")
        except OSError as error:  # waiters only miss a report; the encoding goes on
            logger.warning("could not write encoding progress %s: %s", self.path, error)
        self.written = time.monotonic()

    def update(self, done: int, force: bool = False) -> EncodingProgress:
        """``done`` distinct names have vectors now: measure, write (at most every second) and report."""
        self.done = done
        self.window.add(done)
        rate, left = self.window.rate(), self.window.seconds_left(self.total)
        if force or time.monotonic() - self.written >= WRITE_EVERY_S:
            self.write(rate, left)
        progress = EncodingProgress(self.label, done, self.total, rate, left, self.owner)
        if self.report is not None:
            self.report(progress)
        return progress


def _chunk_order(missing: list[str], batch_size: int) -> list[str]:
    """Batches of names of similar length (little padding) in a shuffled, fixed order.

    Longest first would keep padding low too, but then the rate climbs all run long and
    every time left it gives is too long; shuffled batches keep the rate steady.
    """
    ordered = sorted(missing, key=len, reverse=True)
    batches = [ordered[i:i + batch_size] for i in range(0, len(ordered), batch_size)]
    random.Random(0).shuffle(batches)
    return [name for batch in batches for name in batch]


def _load_weights(encoder) -> None:
    """Load the weights before the clock starts, so the first chunk's rate is the encoding's alone."""
    part = getattr(encoder, "base", None) or encoder  # a head run encodes through its input model's weights
    getattr(part, "model", None)  # a property that loads them; char-tfidf has none


def _on_cluster(encoder, missing: int) -> bool:
    """Whether the Ray cluster takes these names (in one call: small chunks would each stay here)."""
    return ray_embedding.wanted(encoder.label, getattr(encoder, "worker_kind", None), missing)


def encode_claimed(encoder, texts: list[str], claimant: _Claimant, *, batch_size: int = 64,
                   max_chunk: int = MAX_CHUNK) -> int:
    """Encode and store, chunk by chunk, the names of ``texts`` the cache lacks; report after each chunk.

    Chunks grow or shrink to take about :data:`CHUNK_S` seconds at the recent rate (at most
    ``max_chunk`` names). Returns the number of names encoded.
    """
    unique = list(dict.fromkeys(texts))
    cached = VectorCache().get(encoder.fingerprint, unique)
    missing = [t for t in unique if t not in cached]
    claimant.update(len(unique) - len(missing), force=True)
    if not missing:
        return 0
    if _on_cluster(encoder, len(missing)):
        before = claimant.done
        encode_cached(encoder, missing, batch_size=batch_size, progress=lambda done, _: claimant.update(before + done))
        return len(missing)
    _load_weights(encoder)
    claimant.window.samples.clear()  # the rate starts after the weights are loaded
    claimant.update(claimant.done)
    order, start, size = _chunk_order(missing, batch_size), 0, min(batch_size, max_chunk)
    while start < len(order):
        part, before, began = order[start:start + size], claimant.done, time.monotonic()
        # the count moves (and the progress file is rewritten) within a chunk too, as batches end
        encode_cached(encoder, part, batch_size=batch_size, progress=lambda done, _: claimant.update(before + done))
        start += len(part)
        claimant.update(before + len(part), force=start >= len(order))
        # the next chunk sized from this one's own rate, not the model's last measured one (another
        # machine load, another run): a chunk far longer than CHUNK_S would leave waiters without news
        rate = len(part) / max(time.monotonic() - began, 1e-3)
        size = int(min(max(rate * CHUNK_S // batch_size, 1) * batch_size, max_chunk))
    return len(missing)


@contextlib.contextmanager
def claim(encoder, texts: list[str], *, owner: str, report: Callable[[EncodingProgress], None] | None = None):
    """Hold the claim on encoding ``texts`` under ``encoder``, waiting (and reporting) while another holds it.

    Parameters
    ----------
    encoder : Encoder
        Its ``fingerprint`` and ``label`` name the claim and the progress.
    texts : list of str
        The exact list (a level's names).
    owner : str
        Who claims (:data:`OWNERS`), shown to whoever waits.
    report : callable, optional
        ``report(EncodingProgress)`` every second while waiting, then as the holder reports.

    Yields
    ------
    _Claimant
        ``update(done)`` counts distinct names done, rewrites the progress file and reports.
    """
    total = len(dict.fromkeys(texts))
    lock_path, progress_path = claim_paths(encoder.fingerprint, texts)
    lock = FileLock(str(lock_path))
    while True:
        try:
            lock.acquire(timeout=0)
            break
        except Timeout:
            if report is not None:
                report(_waiting_progress(read_claim(progress_path), encoder.label, total))
            time.sleep(POLL_S)
    try:
        claimant = _Claimant(progress_path, encoder.label, owner, total, measured_rate(encoder.fingerprint), report)
        claimant.write()  # who holds the claim, at once: a waiter's first report names it
        yield claimant
        progress_path.unlink(missing_ok=True)
    finally:
        lock.release()


def encode_shared(encoder, texts, *, batch_size: int = 64, progress: Callable[[int, int], None] | None = None,
                  report: Callable[[EncodingProgress], None] | None = None, owner: str = "a page"):
    """Vectors of ``texts`` through the vector cache, encoded by one process at a time.

    Parameters
    ----------
    encoder : Encoder
        From :func:`bioviz.models.registry.load_encoder`.
    texts : sequence of str
        E.g. every name of a level.
    batch_size : int
        Names per forward pass.
    progress : callable, optional
        ``progress(done, total)`` in distinct names.
    report : callable, optional
        ``report(EncodingProgress)`` after every chunk, and every second while waiting.
    owner : str
        Who this is (:data:`OWNERS`), shown to whoever waits for it.

    Returns
    -------
    (vectors, stats)
        As :func:`~bioviz.models.cached_encoding.encode_cached` gives them for ``texts``.
    """
    texts = list(texts)
    if len(texts) < CLAIM_MIN or VectorCache().has_block(encoder.fingerprint, texts):
        return encode_cached(encoder, texts, batch_size=batch_size, progress=progress)

    def tell(state: EncodingProgress) -> None:
        if progress is not None:
            progress(state.done, state.total)
        if report is not None:
            report(state)

    started = time.perf_counter()
    with claim(encoder, texts, owner=owner, report=tell) as claimant:
        encoded = encode_claimed(encoder, texts, claimant, batch_size=batch_size)
        vectors, _ = encode_cached(encoder, texts, batch_size=batch_size)  # every row stored: one read, the block
    distinct = len(dict.fromkeys(texts))
    return vectors, EmbedStats(len(texts), distinct - encoded, encoded, time.perf_counter() - started)


def vectors_ready(encoder, texts) -> bool:
    """True when ``texts`` are a stored block under ``encoder`` (opening them is one file read)."""
    return VectorCache().has_block(encoder.fingerprint, list(texts))
