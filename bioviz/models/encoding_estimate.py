"""How long a first encoding will take, from the rate each model was measured at.

Every time names are encoded (:func:`bioviz.models.cached_encoding.encode_cached`), the names
per second are recorded for the model's fingerprint in ``BIOVIZ_HOME/embeddings/rates.json``
(:func:`record_rate`). Before a page encodes a level, :func:`estimate_encoding` counts the
names the vector cache lacks and divides by that rate, so the page can say "about 6 min to
encode 24,463 names" *before* it starts, instead of a bare spinner.

The latest measurement wins: it reflects the machine's load now better than an average
over days. Measurements on a handful of names (mostly model loading and overhead) are not
recorded. The file is only a cache: unreadable, it is set aside and the rate is unknown.
"""

from __future__ import annotations

import json
import math
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path

from bioviz.cache_files import read_cache, write_cache
from bioviz.models.vector_cache import VectorCache, default_path

RATES_FILE = "rates.json"
MIN_NAMES = 32        # fewer encoded names say more about start-up than about the rate
MIN_SECONDS = 0.05    # a measurement shorter than this is timer noise


def rates_path() -> Path:
    """``BIOVIZ_HOME/embeddings/rates.json``, next to the vector cache."""
    return default_path().parent / RATES_FILE


def _read_rates() -> dict:
    def read(path: Path) -> dict:
        data = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(data, dict):
            raise ValueError("not a JSON object")
        return data

    path = rates_path()
    return (read_cache(path, read) or {}) if path.is_file() else {}


def record_rate(encoder, names: int, seconds: float) -> float | None:
    """Remember that ``encoder`` encoded ``names`` names in ``seconds``.

    Parameters
    ----------
    encoder : Encoder
        Anything with a ``fingerprint`` and a ``label``.
    names : int
        Names actually encoded (cache hits not counted).
    seconds : float
        Time spent encoding them.

    Returns
    -------
    float or None
        The rate recorded (names per second); None when the measurement was too small to say.
    """
    if names < MIN_NAMES or seconds < MIN_SECONDS:
        return None
    rate = names / seconds
    rates = _read_rates()
    rates[encoder.fingerprint] = {"label": encoder.label, "names_per_second": round(rate, 2), "names": int(names),
                                  "updated": round(time.time(), 1)}
    text = json.dumps(rates, indent=1, sort_keys=True).encode("utf-8")
    write_cache(rates_path(), lambda handle: handle.write(text), suffix=".json")
    return rate


def measured_rate(fingerprint: str) -> float | None:
    """Names per second last measured for a model fingerprint, or None when never measured."""
    entry = _read_rates().get(fingerprint)
    rate = entry.get("names_per_second") if isinstance(entry, dict) else None
    return float(rate) if isinstance(rate, (int, float)) and rate > 0 and math.isfinite(rate) else None


def format_duration(seconds: float) -> str:
    """A duration as a person reads it: ``under a second``, ``about 40 s``, ``about 6 min``, ``about 1.5 h``.

    Examples
    --------
    >>> [format_duration(s) for s in (0.3, 42, 359, 5400)]
    ['under a second', 'about 42 s', 'about 6 min', 'about 1.5 h']
    """
    if seconds < 1:
        return "under a second"
    if seconds < 90:
        return f"about {seconds:.0f} s"
    if seconds < 3600:
        return f"about {seconds / 60:.0f} min"
    return f"about {seconds / 3600:.1f} h"


def time_left(elapsed: float, done: float, total: float) -> str:
    """What is left of a job ``done`` of ``total`` after ``elapsed`` seconds, at its rate so far.

    The one ETA wording of the progress bars; empty before the first unit or after the last.

    Examples
    --------
    >>> time_left(10, 5, 20), time_left(10, 0, 20), time_left(10, 20, 20)
    ('about 30 s left', '', '')
    """
    if not (0 < done < total) or elapsed <= 0:
        return ""
    return f"{format_duration(elapsed / done * (total - done))} left"


class RateWindow:
    """Units per second over the last ``window_s`` seconds of ``(time, done)`` samples.

    The time left of an encoding is worked out from this recent rate: not the first batch's
    (model loading, the longest names), not the whole run's (cache hits counted as done at
    once, a machine whose load changed), so it follows the machine as it is now without
    jumping with every batch. Until the samples span ``min_span_s`` seconds, the ``prior`` rate
    (the model's last measured rate) stands in when there is one.

    Examples
    --------
    >>> window = RateWindow(window_s=10, prior=5.0, min_span_s=3)
    >>> window.add(100, now=0.0); window.add(120, now=2.0); window.rate()   # the first batch alone: the prior
    5.0
    >>> window.add(140, now=4.0); window.rate(), window.seconds_left(200)   # cache hits at 0 s had no rate
    (10.0, 6.0)
    >>> window.add(200, now=14.0); window.rate()   # the first samples fell out of the window
    6.0
    """

    def __init__(self, window_s: float = 30.0, prior: float | None = None, min_span_s: float = 5.0) -> None:
        self.window_s, self.prior, self.min_span_s = window_s, prior, min_span_s
        self.samples: deque[tuple[float, float]] = deque()

    def add(self, done: float, now: float | None = None) -> None:
        """Record that ``done`` units were finished by ``now`` (``time.monotonic()`` by default)."""
        now = time.monotonic() if now is None else now
        self.samples.append((now, float(done)))
        # keep one sample at or before the window's start, so the rate always spans the window
        while len(self.samples) > 2 and self.samples[1][0] <= now - self.window_s:
            self.samples.popleft()

    def rate(self) -> float | None:
        """Units per second in the window; the prior (if any) while the samples span under ``min_span_s``."""
        if len(self.samples) >= 2:
            (t0, d0), (t1, d1) = self.samples[0], self.samples[-1]
            span = t1 - t0
            if d1 > d0 and (span >= self.min_span_s or (self.prior is None and span >= 0.5)):
                return (d1 - d0) / span
        return self.prior

    def seconds_left(self, total: float) -> float | None:
        """Seconds until ``total`` at :meth:`rate`; None without a rate."""
        rate = self.rate()
        if not rate or not self.samples:
            return None
        return max(total - self.samples[-1][1], 0.0) / rate


@dataclass(frozen=True)
class EncodingEstimate:
    """What a first use of a model on a list of names will cost.

    Attributes
    ----------
    label : str
        The model's readable label.
    names : int
        Distinct names asked for.
    missing : int
        Of those, names the vector cache lacks (to be encoded).
    seconds : float or None
        Expected time to encode them; None when the model's rate was never measured.
    rate : float or None
        The measured names per second the estimate divides by.
    """

    label: str
    names: int
    missing: int
    seconds: float | None
    rate: float | None

    @property
    def needed(self) -> bool:
        """True when some names must be encoded first."""
        return self.missing > 0

    def message(self, where: str = "this level") -> str:
        """One line for a page, e.g. ``First use of minilm on this level: about 6 min to encode 24,463 names
        (measured rate 68 names/s)``; empty when nothing is missing."""
        if not self.missing:
            return ""
        head = f"First use of {self.label} on {where}"
        if self.seconds is None:
            return f"{head}: {self.missing:,} names to encode (no measured rate yet: the bar shows the time left)"
        return (f"{head}: {format_duration(self.seconds)} to encode {self.missing:,} names "
                f"(measured rate {self.rate:,.0f} names/s)")


def _missing(cache: VectorCache, fingerprint: str, names: list[str]) -> list[str]:
    """Names of ``names`` without a vector for ``fingerprint`` (none when the list is a cached block)."""
    if cache.has_block(fingerprint, names):
        return []
    distinct = list(dict.fromkeys(names))
    found = cache.cached_texts(fingerprint, distinct)  # which ones (a head run's input needs them), no vectors read
    return [n for n in distinct if n not in found]


def estimate_encoding(encoder, names, cache: VectorCache | None = None) -> EncodingEstimate:
    """How many of ``names`` ``encoder`` must encode, and how long that will take at its measured rate.

    A head run (an encoder with a ``base`` encoder and a ``chain``) encodes a missing name
    through its input model first: its estimate adds the input model's missing names at the
    input model's rate to the run's own (the head alone, when measured).

    Parameters
    ----------
    encoder : Encoder
        From :func:`bioviz.models.registry.load_encoder` (weights need not be loaded).
    names : sequence of str
        E.g. every name of a level view.
    cache : VectorCache, optional
        The vector cache to count in (the default one).
    """
    names = list(names)
    cache = cache or VectorCache()
    missing = _missing(cache, encoder.fingerprint, names)
    if not missing:
        return EncodingEstimate(encoder.label, len(set(names)), 0, 0.0, measured_rate(encoder.fingerprint))
    own = measured_rate(encoder.fingerprint)
    base = getattr(encoder, "base", None)
    if base is None:
        seconds = len(missing) / own if own else None
        return EncodingEstimate(encoder.label, len(set(names)), len(missing), seconds, own)
    # a head run: the input model's missing names at its rate, then the head
    base_missing = _missing(cache, base.fingerprint, missing)
    base_rate = measured_rate(base.fingerprint)
    if (base_missing and not base_rate) or (not base_missing and not own):
        return EncodingEstimate(encoder.label, len(set(names)), len(missing), None, None)
    # an unmeasured head next to a transformer's minutes is left out: matrix products, seconds at most
    seconds = (len(base_missing) / base_rate if base_missing else 0.0) + (len(missing) / own if own else 0.0)
    return EncodingEstimate(encoder.label, len(set(names)), len(missing), seconds, len(missing) / seconds)

