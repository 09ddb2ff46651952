"""Before a first encoding: how many names are missing and how long they take at the measured rate."""

from __future__ import annotations

import time

import numpy as np
import pytest

from bioviz.models.cached_encoding import encode_cached
from bioviz.models.encoders import Encoder
from bioviz.models.encoding_estimate import (EncodingEstimate, estimate_encoding, measured_rate, rates_path,
                                             record_rate)
from bioviz.models.vector_cache import VectorCache

NAMES = [f"name {i}" for i in range(100)]


class SlowEncoder(Encoder):
    """One millisecond per name (a known rate), unit vectors."""

    def __init__(self, fingerprint: str = "slow-fp", label: str = "slow model") -> None:
        self.spec, self.label, self.fingerprint, self.dim = label, label, fingerprint, 4

    def _encode(self, texts, batch_size):
        time.sleep(0.002 * len(texts))
        return np.tile(np.array([1, 0, 0, 0], np.float32), (len(texts), 1))


class HeadRun(SlowEncoder):
    def __init__(self, base) -> None:
        super().__init__("head-fp", "residual · run (ab12)")
        self.base = base


def test_encoding_records_the_rate_of_the_model(tmp_home):
    encoder = SlowEncoder()
    assert measured_rate(encoder.fingerprint) is None
    encode_cached(encoder, NAMES)
    rate = measured_rate(encoder.fingerprint)
    assert rate is not None and 50 < rate < 600  # 500 names/s at most (2 ms a name), never the cache's speed
    assert rates_path().is_file()


def test_a_handful_of_names_is_no_measurement_and_the_latest_wins(tmp_home):
    encoder = SlowEncoder()
    assert record_rate(encoder, 3, 1.0) is None and measured_rate(encoder.fingerprint) is None
    record_rate(encoder, 1000, 10.0)
    record_rate(encoder, 1000, 4.0)
    assert measured_rate(encoder.fingerprint) == pytest.approx(250)


def test_the_estimate_counts_missing_names_at_the_measured_rate(tmp_home):
    encoder, cache = SlowEncoder(), VectorCache()
    cache.put(encoder.fingerprint, NAMES[:40], np.ones((40, 4), np.float32))
    unknown = estimate_encoding(encoder, NAMES)
    assert (unknown.names, unknown.missing, unknown.seconds) == (100, 60, None)
    assert "60 names to encode (no measured rate yet" in unknown.message()
    record_rate(encoder, 600, 20.0)  # 30 names/s
    known = estimate_encoding(encoder, NAMES)
    assert known.seconds == pytest.approx(2.0) and known.needed
    assert known.message() == ("First use of slow model on this level: about 2 s to encode 60 names "
                               "(measured rate 30 names/s)")


def test_nothing_to_say_once_the_names_are_cached(tmp_home):
    encoder = SlowEncoder()
    encode_cached(encoder, NAMES)
    done = estimate_encoding(encoder, NAMES)
    assert done.missing == 0 and not done.needed and done.message() == ""


def test_a_head_run_waits_for_its_input_models_missing_names(tmp_home):
    base = SlowEncoder("base-fp", "minilm")
    run = HeadRun(base)
    VectorCache().put(base.fingerprint, NAMES[:70], np.ones((70, 4), np.float32))
    record_rate(base, 600, 60.0)   # 10 names/s through the transformer
    record_rate(run, 5000, 1.0)    # 5,000 names/s through the head
    estimate = estimate_encoding(run, NAMES)
    assert estimate.missing == 100
    assert estimate.seconds == pytest.approx(30 / 10 + 100 / 5000)
    assert "about 3 s to encode 100 names" in estimate.message()


@pytest.mark.parametrize("seconds, words", [(0.2, "under a second"), (42, "about 42 s"), (359, "about 6 min"),
                                            (5400, "about 1.5 h")])
def test_minutes_read_as_minutes(seconds, words):
    assert EncodingEstimate("m", 10, 10, seconds, 1.0).message().startswith(f"First use of m on this level: {words}")
