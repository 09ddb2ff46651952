"""One encoding of a level at a time (bioviz.models.shared_encoding): waiting, take-over, damaged progress."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

from bioviz.models import shared_encoding
from bioviz.models.registry import load_encoder
from bioviz.models.vector_cache import VectorCache
from bioviz.models.shared_encoding import EncodingProgress, claim, claim_paths, encode_claimed, encode_shared
from tests.conftest import ROOT

NAMES = [f"disorder of organ number {i}" for i in range(260)]


@pytest.fixture
def fast_poll(monkeypatch):
    monkeypatch.setattr(shared_encoding, "POLL_S", 0.05)
    monkeypatch.setattr(shared_encoding, "WRITE_EVERY_S", 0.0)


def encoding_threads(encoder, monkeypatch) -> list[str]:
    """The names of the threads that ran the encoder (one entry per call)."""
    calls, real = [], encoder._encode

    def counted(texts, batch_size):
        calls.append(threading.current_thread().name)
        return real(texts, batch_size)

    monkeypatch.setattr(encoder, "_encode", counted)
    return calls


@pytest.mark.slow  # over 5 s in a full run (CI lists the times)
def test_a_second_asker_waits_for_the_claimant_and_shows_its_progress_instead_of_encoding(tmp_home, fast_poll,
                                                                                          monkeypatch):
    monkeypatch.setenv(shared_encoding.DELAY_ENV, "0.02")  # seconds, however warm the model: a rate to measure
    encoder = load_encoder("minilm")
    calls = encoding_threads(encoder, monkeypatch)
    holding, own = threading.Event(), []

    def warm_up() -> None:  # stands for the background warm-up: claims, then encodes slowly
        with claim(encoder, NAMES, owner="the background warm-up", report=own.append) as claimant:
            holding.set()
            time.sleep(0.3)
            encode_claimed(encoder, NAMES, claimant, batch_size=32, max_chunk=64)

    worker = threading.Thread(target=warm_up, name="warm-up")
    worker.start()
    holding.wait(10)
    seen: list[EncodingProgress] = []
    vectors, stats = encode_shared(encoder, NAMES, batch_size=32, report=seen.append)
    worker.join()
    assert set(calls) == {"warm-up"}, "the waiting page encoded nothing itself"
    assert stats.encoded == 0 and vectors.shape == (len(NAMES), 384)
    waiting = [p for p in seen if p.waiting]
    assert waiting and all(p.owner == "the background warm-up" for p in waiting)
    assert "Waiting for the background warm-up" in waiting[-1].text()
    assert any(0 < p.done < p.total for p in waiting), "the waiter follows the claimant's count"
    moving = [p for p in own if 0 < p.done < p.total]
    assert len(moving) >= 3 and moving[-1].rate and moving[-1].seconds_left is not None, \
        "the claimant reports after every chunk, with a rate and the time left"
    assert "left" in moving[-1].text() and "names/s" in moving[-1].text()
    assert not claim_paths(encoder.fingerprint, NAMES)[1].exists(), "the progress file goes with the claim"


def test_a_damaged_progress_file_is_only_a_missing_report(tmp_home, fast_poll):
    encoder = load_encoder("minilm")
    names = NAMES[:200]
    lock_path, progress_path = claim_paths(encoder.fingerprint, names)
    release = threading.Event()

    def holder() -> None:
        with claim(encoder, names, owner="a training job"):
            progress_path.write_bytes(b"\x00{not json")
            release.wait(10)

    worker = threading.Thread(target=holder)
    worker.start()
    seen: list[EncodingProgress] = []

    def report(p: EncodingProgress) -> None:
        seen.append(p)
        release.set()  # the claimant goes away once the waiter has shown its (empty) report

    vectors, stats = encode_shared(encoder, names, report=report)
    worker.join()
    assert seen[0].waiting and seen[0].done == 0 and seen[0].owner == "another process"
    assert "Waiting for another process" in seen[0].text()
    assert stats.encoded == len(names) and len(vectors) == len(names), "the waiter took over and encoded them"
    assert not seen[-1].waiting and seen[-1].done == len(names)


@pytest.mark.slow  # over 5 s in a full run (CI lists the times)
def test_a_claimant_killed_midway_is_taken_over_and_nothing_it_stored_is_damaged(tmp_home, fast_poll):
    encoder = load_encoder("minilm")
    script = ("import json, sys\n"
              "from bioviz.models.registry import load_encoder\n"
              "from bioviz.models.shared_encoding import encode_shared\n"
              "encode_shared(load_encoder('minilm'), json.loads(sys.argv[1]), batch_size=16, owner='a training job')\n")
    env = {**os.environ, shared_encoding.DELAY_ENV: "0.05", "PYTHONPATH": str(ROOT)}
    child = subprocess.Popen([sys.executable, "-c", script, json.dumps(NAMES)], env=env)
    progress_path = claim_paths(encoder.fingerprint, NAMES)[1]
    deadline = time.monotonic() + 120
    try:
        while time.monotonic() < deadline:
            state = shared_encoding.read_claim(progress_path)
            if state and 32 <= state["done"] < len(NAMES) - 64:
                break
            assert child.poll() is None, "the claimant ended before it could be killed"
            time.sleep(0.05)
        else:
            pytest.fail("the claimant never reported progress")
        assert state["pid"] == child.pid and state["owner"] == "a training job"
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    stored = VectorCache().get(encoder.fingerprint, NAMES)
    assert 0 < len(stored) < len(NAMES)
    vectors, stats = encode_shared(encoder, NAMES)  # the dead claimant's claim is free: taken over
    assert stats.encoded == len(NAMES) - len(stored)
    kept = [NAMES.index(name) for name in stored]
    fresh = encoder.encode([NAMES[i] for i in kept])
    assert np.allclose(vectors[kept], fresh, atol=1e-5), "what the killed claimant stored is intact"
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


def test_a_hung_but_alive_claimant_is_taken_over_and_cannot_spoil_the_vectors_when_it_wakes(tmp_home, fast_poll,
                                                                                              monkeypatch, caplog):
    monkeypatch.setattr(shared_encoding, "STALE_S", 0.5)
    encoder = load_encoder("minilm")
    woke, taken, after = threading.Event(), threading.Event(), []

    def hung() -> None:  # alive (this very process), holding the claim, its heartbeat old and never renewed
        try:
            with claim(encoder, NAMES, owner="a training job") as claimant:
                claimant.done = 40
                claimant.write()
                state = json.loads(claimant.path.read_text())
                claimant.path.write_text(json.dumps({**state, "updated": time.time() - 3600}))
                taken.wait(30)
                woke.set()
                claimant.update(41)  # it wakes: its next count finds the claim taken
        except shared_encoding.ClaimLost as lost:
            after.append(lost)

    worker = threading.Thread(target=hung)
    worker.start()
    seen: list[EncodingProgress] = []
    with caplog.at_level("WARNING", logger=shared_encoding.__name__):
        vectors, stats = encode_shared(encoder, NAMES, batch_size=32, report=seen.append)
    taken.set()
    worker.join(30)
    assert stats.encoded == len(NAMES), "the waiter took over and encoded every name"
    assert np.allclose(vectors, encoder.encode(NAMES), atol=1e-5)
    took = [r.getMessage() for r in caplog.records if "took its claim over" in r.getMessage()]
    assert len(took) == 1 and took[0].startswith("a training job (pid"), took
    assert seen[-1].taken_over == "a training job" and "taken over from a training job" in seen[-1].text()
    assert woke.is_set() and after, "the woken owner learnt that its claim was taken and stopped"
    stored = VectorCache().get(encoder.fingerprint, NAMES)
    assert np.allclose(np.stack([stored[n] for n in NAMES]), vectors), "the stored vectors are whole and right"


@pytest.mark.slow  # over 5 s in a full run (CI lists the times)
def test_a_stopped_claimant_process_is_taken_over_and_waits_once_it_is_woken(tmp_home, fast_poll, monkeypatch):
    monkeypatch.setattr(shared_encoding, "STALE_S", 1.5)  # its last heartbeat is recent: the silence is watched
    encoder = load_encoder("minilm")
    script = ("import json, sys\n"
              "from bioviz.models.registry import load_encoder\n"
              "from bioviz.models.shared_encoding import encode_shared\n"
              "vectors, stats = encode_shared(load_encoder('minilm'), json.loads(sys.argv[1]), batch_size=16)\n"
              "print(stats.encoded, flush=True)\n")
    env = {**os.environ, shared_encoding.DELAY_ENV: "0.05", "PYTHONPATH": str(ROOT)}
    child = subprocess.Popen([sys.executable, "-c", script, json.dumps(NAMES)], env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    progress_path = claim_paths(encoder.fingerprint, NAMES)[1]
    try:
        deadline = time.monotonic() + 120
        while not ((state := shared_encoding.read_claim(progress_path)) and 32 <= state["done"] < len(NAMES) - 64):
            assert child.poll() is None and time.monotonic() < deadline, "the claimant never reported progress"
            time.sleep(0.05)
        child.send_signal(signal.SIGSTOP)  # alive, holding its lock, silent
        vectors, stats = encode_shared(encoder, NAMES)
        assert 0 < stats.encoded < len(NAMES), "the waiter took over and encoded what was still missing"
        assert np.allclose(vectors, encoder.encode(NAMES), atol=1e-5)
    finally:
        child.send_signal(signal.SIGCONT)
    output, errors = child.communicate(timeout=120)
    assert child.returncode == 0 and "was taken over" in errors, errors[-2000:]
    # what the child encoded before it was stopped counts (it was 0: the lost claim's count was dropped)
    assert len(NAMES) - stats.encoded <= int(output.split()[-1]) <= len(NAMES), (output, stats.encoded)
    stored = VectorCache().get(encoder.fingerprint, NAMES)
    assert np.allclose(np.stack([stored[n] for n in NAMES]), vectors), "the woken owner spoilt nothing"


def test_names_encoded_before_the_claim_was_lost_are_counted(tmp_home, fast_poll, monkeypatch):
    """A claimant whose claim is taken over mid-encoding still counts the chunks it encoded and stored.

    Before: the count of the lost claim was dropped with its ClaimLost, so a process that encoded
    most of a level before a take-over (a stopped process, woken) reported ``encoded: 0``.
    """
    encoder = load_encoder("minilm")
    calls, real = [], encoder._encode
    progress_path = claim_paths(encoder.fingerprint, NAMES)[1]

    def taken_over_after_the_first_chunk(texts, batch_size):
        calls.append(len(texts))
        if len(calls) == 2:  # the first chunk is stored: another process takes the claim over now
            state = json.loads(progress_path.read_text())
            progress_path.write_text(json.dumps({**state, "token": "another process's"}))
        return real(texts, batch_size)

    monkeypatch.setattr(encoder, "_encode", taken_over_after_the_first_chunk)
    vectors, encoded = shared_encoding.encode_level(encoder, NAMES, owner="a page", batch_size=32, max_chunk=32)
    assert len(calls) > 2, "the claim was lost and claimed again"
    stored_by_first_claim = 32
    assert encoded == len(NAMES), (encoded, len(NAMES) - stored_by_first_claim)
    assert np.allclose(vectors, encoder.encode(NAMES), atol=1e-5)
