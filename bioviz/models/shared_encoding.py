"""One encoding of a level at a time, and progress that anyone waiting for it can follow.

The background warm-up, a page in any session and a training job may all need the same
level's vectors under the same model. Encoding them twice on a 2-core machine makes both
copies slower, so :func:`encode_shared` *claims* the work first: a lock file per (model
fingerprint, exact list of names) under ``BIOVIZ_HOME/encoding`` (``fcntl.flock`` through
``filelock``: the system releases it when its process dies). A home that refuses the lock file
(read-only, full) encodes unclaimed after its one warning: no other process can share the work
through it. Whoever holds the claim encodes
the missing names in chunks small enough to report every couple of seconds, stores each chunk
in the vector cache, and rewrites a small progress file (atomically, at most every second):
names done and total, the rate over a recent window, the time left, its pid and who it is.

Whoever finds the claim taken waits: it polls the progress file every second and reports
the claimant's progress as its own (:class:`EncodingProgress`, ``waiting=True``), and when the
claim is free it takes it and encodes whatever is still missing: nothing when the claimant
finished (the level's block is read), the rest when the claimant was killed (every stored
chunk is kept, nothing half-written: each chunk is one transaction of the cache). An
unreadable progress file is only a missing report.

A claimant that is alive but hung (stopped, deadlocked) keeps its lock for ever, so the
progress file is also its heartbeat: rewritten at least every :data:`WRITE_EVERY_S` while it
encodes (batch by batch, and from a thread while the weights load). A waiter that sees no
new heartbeat for :data:`STALE_S` takes the claim over: under a short take-over lock it
removes the lock file (the hung holder keeps its lock on a file nobody opens any more),
locks a fresh one, writes its own progress with a new token and logs one line. A hung owner
that wakes finds another token in the progress file at its next write, raises
:class:`ClaimLost` and waits like any other; what it stored meanwhile cannot hurt: rows are
``INSERT OR IGNORE`` of the same vectors and a block is only ever renamed into place.

``BIOVIZ_TEST_ENCODE_DELAY_S`` (seconds per encoded name, :data:`DELAY_ENV`) slows the encoding
down for the browser tests; it is applied where every encoding passes
(:func:`bioviz.models.cached_encoding.encode_missing`), so the claimant's chunks and rates see it.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from filelock import FileLock, Timeout

from bioviz.models import ray_embedding
from bioviz.models.cached_encoding import DELAY_ENV, EmbedStats, encode_cached  # noqa: F401 - DELAY_ENV named here too
from bioviz.models.encoding_estimate import RateWindow, format_duration, measured_rate
from bioviz.models.vector_cache import VectorCache, texts_digest
from bioviz.paths import atomic_path, is_write_refusal, note_refusal, subdir

logger = logging.getLogger(__name__)

CLAIMS_DIR = "encoding"
POLL_S = 1.0  # a waiter reads the claimant's progress this often
WRITE_EVERY_S = 1.0  # the claimant rewrites its progress file (its heartbeat) at most this often
STALE_S = 60.0  # a claimant without a heartbeat this long is hung: a waiter takes its claim over
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
    taken_over: str | None = None  # whose hung claim this encoding took over

    @property
    def fraction(self) -> float:
        """Done as a fraction in [0, 1]."""
        return min(max(self.done / self.total, 0.0), 1.0) if self.total else 0.0

    def text(self) -> str:
        """One line, e.g. ``Encoding 24,463 names with minilm: 3,072 done · 85 names/s · about 4 min left``."""
        head = (f"Waiting for {self.owner}, which is encoding these {self.total:,} names with {self.label} "
                f"(not encoding them twice)" if self.waiting else f"Encoding {self.total:,} names with {self.label}")
        if self.taken_over and not self.waiting:
            head += f" (taken over from {self.taken_over}, which had stopped giving signs of life)"
        parts = [f"{head}: {self.done:,} done"]
        if self.rate:
            parts.append(f"{self.rate:,.0f} names/s")
        if self.seconds_left is not None and self.done < self.total:
            parts.append(f"{format_duration(self.seconds_left)} left")
        return " · ".join(parts)


def claim_paths(fingerprint: str, texts: list[str]) -> tuple[Path, Path]:
    """``(lock file, progress file)`` of the claim on encoding ``texts`` under a model fingerprint."""
    stem = subdir(CLAIMS_DIR) / f"{fingerprint[:32]}-{texts_digest(texts)}"
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


def waiting_progress(state: dict | None, label: str, total: int) -> EncodingProgress:
    """What a waiter shows of a claimant's progress file (``state``; None: unreadable, no counts)."""
    if state is None:
        return EncodingProgress(label, 0, total, None, None, "another process", waiting=True)
    owner = state.get("owner") if state.get("owner") in OWNERS else "another process"
    return EncodingProgress(label, min(state["done"], total), total, _number(state.get("rate")),
                            _number(state.get("eta_s")), owner, waiting=True)


class ClaimRefused(Exception):
    """The claim's lock file cannot be created: the home refuses writes (read-only, full, no permission)."""


class ClaimLost(Exception):
    """This process's claim was taken over while it gave no heartbeat: it stops encoding and waits."""


class _Claimant:
    """The claimant's side: counts names, measures the recent rate, writes the progress file, reports."""

    def __init__(self, path: Path, label: str, owner: str, total: int, report) -> None:
        self.path, self.label, self.owner, self.total, self.report = path, label, owner, total, report
        self.window = RateWindow()
        self.written = float("-inf")
        self.done = 0
        self.token = os.urandom(8).hex()  # whose progress file it is: a take-over writes another
        self.stored = False  # whether a progress file of this claimant's was ever written
        self.taken_over: str | None = None
        # Names this claimant encoded and stored, counted chunk by chunk: kept when the claim is lost
        # midway (ClaimLost), so the process still reports the work it did.
        self.encoded = 0

    def holds(self) -> bool:
        """False once a waiter has taken the claim over (another token in the progress file, or its file gone).

        The file this process wrote is gone only when a take-over's holder finished and removed it.
        """
        if not self.path.exists():
            return not self.stored  # never stored (the disk refused it): no sign of a take-over
        state = read_claim(self.path)
        return state is None or state.get("token") in (None, self.token)  # unreadable: no sign of a take-over

    def write(self, rate: float | None = None, left: float | None = None, check: bool = True) -> None:
        """Rewrite the progress file (atomically: a waiter never reads half of it); :class:`ClaimLost` if taken over."""
        if check and not self.holds():
            raise ClaimLost(self.path.name)
        state = {"pid": os.getpid(), "owner": self.owner, "label": self.label, "done": self.done,
                 "total": self.total, "rate": round(rate, 2) if rate else None, "token": self.token,
                 "eta_s": round(left, 1) if left is not None else None, "updated": time.time()}
        try:
            with atomic_path(self.path, suffix=".json") as tmp:
                tmp.write_text(json.dumps(state), encoding="utf-8")
            self.stored = True
        except OSError as error:  # waiters only miss a report; the encoding goes on
            logger.warning("could not write encoding progress %s: %s", self.path, error)
        self.written = time.monotonic()

    def beat(self) -> None:
        """Rewrite the progress file now: a sign of life while nothing is counted (a claimant that waits)."""
        self.write(self.window.rate(), self.window.seconds_left(self.total))

    @contextlib.contextmanager
    def beating(self):
        """A heartbeat from a thread while the body runs one long call (loading weights) with no count to give."""
        stop = threading.Event()

        def beat() -> None:
            while not stop.wait(WRITE_EVERY_S):
                with contextlib.suppress(ClaimLost):  # said at the next count, in the encoding's own thread
                    self.beat()

        thread = threading.Thread(target=beat, name="encoding-heartbeat", daemon=True)
        thread.start()
        try:
            yield
        finally:
            stop.set()
            thread.join()

    def update(self, done: int, force: bool = False) -> EncodingProgress:
        """``done`` distinct names have vectors now: measure, write (at most every second) and report."""
        self.done = done
        self.window.add(done)
        rate, left = self.window.rate(), self.window.seconds_left(self.total)
        if force or time.monotonic() - self.written >= WRITE_EVERY_S:
            self.write(rate, left)
        progress = EncodingProgress(self.label, done, self.total, rate, left, self.owner, taken_over=self.taken_over)
        if self.report is not None:
            self.report(progress)
        return progress


class _Silence:
    """How long a claimant has given no sign of life, as one waiter sees it."""

    def __init__(self) -> None:
        self.sign, self.since = None, time.monotonic()

    def seconds(self, state: dict | None, path: Path) -> float:
        """Seconds since the progress file last changed (as seen here) or since its heartbeat's time, the longer."""
        try:
            mtime = path.stat().st_mtime
        except OSError:
            mtime = None
        updated = _number(state.get("updated")) if state else None
        now = time.monotonic()
        if (mtime, updated) != self.sign:
            self.sign, self.since = (mtime, updated), now
        return max(now - self.since, time.time() - updated if updated is not None else 0.0)


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
    ``max_chunk`` names). Returns the number of names encoded; ``claimant.encoded`` counts them
    too, chunk by chunk, so a :class:`ClaimLost` raised midway loses none of the count.
    """
    unique = list(dict.fromkeys(texts))
    cached = VectorCache().cached_texts(encoder.fingerprint, unique)  # which ones: their vectors are read once, at the end
    missing = [t for t in unique if t not in cached]
    claimant.update(len(unique) - len(missing), force=True)
    if not missing:
        return 0
    if _on_cluster(encoder, len(missing)):
        before, counted = claimant.done, claimant.encoded
        _, stats = encode_cached(encoder, missing, batch_size=batch_size,
                                 progress=lambda done, _: claimant.update(before + done))
        claimant.encoded += stats.encoded
        return claimant.encoded - counted
    with claimant.beating():  # loading a large model can take longer than a waiter's patience
        _load_weights(encoder)
    claimant.window.samples.clear()  # the rate starts after the weights are loaded
    claimant.update(claimant.done)
    order, start, size = _chunk_order(missing, batch_size), 0, min(batch_size, max_chunk)
    counted = claimant.encoded
    while start < len(order):
        part, before, began = order[start:start + size], claimant.done, time.monotonic()
        # the count moves (and the progress file is rewritten) within a chunk too, as batches end
        _, stats = encode_cached(encoder, part, batch_size=batch_size,
                                 progress=lambda done, _: claimant.update(before + done))
        claimant.encoded += stats.encoded  # stored: counted before the next check can find the claim lost
        start += len(part)
        claimant.update(before + len(part), force=start >= len(order))
        # the next chunk sized from this one's own rate, not the model's last measured one (another
        # machine load, another run): a chunk far longer than CHUNK_S would leave waiters without news
        rate = len(part) / max(time.monotonic() - began, 1e-3)
        size = int(min(max(rate * CHUNK_S // batch_size, 1) * batch_size, max_chunk))
    return claimant.encoded - counted


def _take_over(lock: FileLock, lock_path: Path, claimant: _Claimant, seen: dict | None) -> bool:
    """Take a silent claimant's claim: a fresh lock file, locked, and this process's progress written at once.

    One waiter at a time (a take-over lock held for milliseconds), and only while the progress
    file is still the one judged silent: a second waiter then sees the first one's heartbeat.
    """
    with FileLock(str(lock_path.with_suffix(".takeover"))):
        if read_claim(claimant.path) != seen:
            return False
        try:
            lock_path.unlink(missing_ok=True)  # the hung holder keeps its lock on a file nobody opens any more
            lock.acquire(timeout=0)
        except (OSError, Timeout):  # e.g. a file still open cannot be removed (Windows): keep waiting
            return False
        claimant.write(check=False)
    return True


def _wait_for_claim(lock: FileLock, lock_path: Path, claimant: _Claimant, report) -> None:
    """Poll until this process holds the claim, reporting the claimant's progress; take a silent one's over."""
    silence = _Silence()
    known = None  # the holder's last readable report: its file is removed a moment before its lock is released
    while True:
        try:
            lock.acquire(timeout=0)
            claimant.write(check=False)  # who holds the claim, at once: a waiter's first report names it
            return
        except Timeout:
            pass
        except OSError as error:
            if not is_write_refusal(error):
                raise
            note_refusal(lock_path, error)
            raise ClaimRefused(str(lock_path)) from None
        state = read_claim(claimant.path)
        silent = silence.seconds(state, claimant.path)
        if silent >= STALE_S and _take_over(lock, lock_path, claimant, state):
            owner = state.get("owner") if state and state.get("owner") in OWNERS else "another process"
            pid = state.get("pid") if state else None
            logger.warning("%s (pid %s) gave no sign of life for %.0f s while encoding %d names with %s: "
                           "this process took its claim over", owner, pid, silent, claimant.total, claimant.label)
            claimant.taken_over = owner
            return
        known = state or known
        if report is not None:
            report(waiting_progress(known, claimant.label, claimant.total))
        time.sleep(POLL_S)


@contextlib.contextmanager
def claim(encoder, texts: list[str], *, owner: str, report: Callable[[EncodingProgress], None] | None = None):
    """Hold the claim on encoding ``texts`` under ``encoder``, waiting (and reporting) while another holds it.

    A claimant that gives no heartbeat for :data:`STALE_S` seconds is taken over.

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
        ``update(done)`` counts distinct names done, rewrites the progress file and reports
        (:class:`ClaimLost` once the claim was taken over); ``beat()`` is a sign of life alone.
    """
    total = len(dict.fromkeys(texts))
    lock_path, progress_path = claim_paths(encoder.fingerprint, texts)
    lock = FileLock(str(lock_path))
    claimant = _Claimant(progress_path, encoder.label, owner, total, report)
    _wait_for_claim(lock, lock_path, claimant, report)
    try:
        claimant.window.prior = measured_rate(encoder.fingerprint)  # read now: whoever held it may have measured
        yield claimant
        if claimant.holds():  # a taken-over claim's file is its new holder's
            progress_path.unlink(missing_ok=True)
    finally:
        lock.release()


def encode_level(encoder, texts: list[str], *, owner: str, report: Callable[[EncodingProgress], None] | None = None,
                 batch_size: int = 64, max_chunk: int = MAX_CHUNK):
    """Claim, encode what the cache lacks and read every vector back; wait again if the claim is lost.

    Parameters
    ----------
    encoder : Encoder
    texts : list of str
        The exact list (a level's names).
    owner : str
        Who claims (:data:`OWNERS`).
    report : callable, optional
        ``report(EncodingProgress)``, as :func:`claim` gives it.
    batch_size : int
        Names per forward pass.
    max_chunk : int
        The most names encoded and stored per step.

    Returns
    -------
    (vectors, encoded)
        The vectors of ``texts`` and how many names this process encoded, those it encoded under a
        claim it then lost included (they are stored: whoever took over found them cached).
    """
    encoded = 0
    while True:
        claimant = None
        try:
            with claim(encoder, texts, owner=owner, report=report) as claimant:
                encode_claimed(encoder, texts, claimant, batch_size=batch_size, max_chunk=max_chunk)
                vectors, _ = encode_cached(encoder, texts, batch_size=batch_size)  # every row stored: one read, the block
        except ClaimLost:
            logger.warning("%s's encoding of %d names with %s stalled and was taken over: it waits for it now",
                           owner, len(texts), encoder.label)
            continue
        finally:
            encoded += claimant.encoded if claimant is not None else 0
        return vectors, encoded


def encode_shared(encoder, texts, *, batch_size: int = 64, progress: Callable[[int, int], None] | None = None,
                  report: Callable[[EncodingProgress], None] | None = None, owner: str = "a page",
                  max_chunk: int = MAX_CHUNK, claim_min: int = CLAIM_MIN):
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
        ``report(EncodingProgress)`` after every chunk, and every second while waiting; called
        before ``progress`` for the same state (a job's report says whom it waits for, its
        ``progress`` then counts).
    owner : str
        Who this is (:data:`OWNERS`), shown to whoever waits for it.
    max_chunk : int
        The most names encoded and stored per step (the warm-up's are smaller: it yields sooner).
    claim_min : int
        Shorter lists are encoded at once, without a claim, chunks or reports (:data:`CLAIM_MIN`);
        the warm-up gives 0: its state file reports every level, however short.

    Returns
    -------
    (vectors, stats)
        As :func:`~bioviz.models.cached_encoding.encode_cached` gives them for ``texts``.
    """
    texts = list(texts)
    if len(texts) < claim_min or VectorCache().has_block(encoder.fingerprint, texts):
        return encode_cached(encoder, texts, batch_size=batch_size, progress=progress)

    def tell(state: EncodingProgress) -> None:
        if report is not None:
            report(state)
        if progress is not None:
            progress(state.done, state.total)

    started = time.perf_counter()
    try:
        vectors, encoded = encode_level(encoder, texts, owner=owner, report=tell, batch_size=batch_size,
                                        max_chunk=max_chunk)
    except ClaimRefused:
        # A home that refuses the lock file can share no work with another process anyway (nor
        # store it): encode unclaimed, after the one "nothing will be saved" warning (issue 41).
        return encode_cached(encoder, texts, batch_size=batch_size, progress=progress)
    distinct = len(dict.fromkeys(texts))
    return vectors, EmbedStats(len(texts), distinct - encoded, encoded, time.perf_counter() - started)
