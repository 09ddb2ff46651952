"""The background first encoding (bioviz.warmup) on a tiny fixture level with the bundled model."""

from __future__ import annotations

import json
import os
import time

import pytest
from filelock import FileLock

from bioviz import warmup
from bioviz.models.model_spec import ModelSpec
from bioviz.models.registry import load_encoder
from bioviz.models.vector_cache import VectorCache
from bioviz.ontology import LevelSpec
from bioviz.search.neighbours import level_space

MINILM = ModelSpec.parse("minilm")


@pytest.fixture
def mini(data_dir):
    spec = LevelSpec(str(data_dir / "mini.obo"), depth=1)
    return spec, spec.load()


def unique_names(view) -> list[str]:
    return list(dict.fromkeys(view.names))


def test_warm_up_fills_the_cache_the_pages_read_and_writes_its_progress(tmp_home, mini, monkeypatch):
    spec, view = mini
    monkeypatch.setattr(warmup, "WRITE_EVERY_S", 0.0)  # every step written, however fast the machine
    monkeypatch.setenv("BIOVIZ_TEST_ENCODE_DELAY_S", "0.2")  # and a rate to measure (11 names), however fast
    states = []
    final = warmup.warm_up(levels=[spec], model=MINILM, chunk=4, report=states.append)
    assert final["state"] == "done" and final["error"] is None
    assert final["done"] == final["total"] == len(view.names)
    assert final["encoded"] == len(unique_names(view))
    assert warmup.read_state() == final, "the state file holds the last state written"
    dones = [s["done"] for s in states]
    assert dones == sorted(dones) and states[0]["state"] == "running"
    assert any(s["state"] == "running" and s["rate"] and s["eta_s"] is not None and s["done"] < s["total"]
               for s in states), "a running state says the rate and the seconds left"
    _, stats = level_space(view, "minilm")  # what the Neighbours page asks for
    assert stats["encoded"] == 0 and stats["cache_hits"] == len(unique_names(view))


def test_levels_are_prepared_one_after_the_other_each_with_its_own_count(tmp_home, data_dir, mini):
    chapters, view = mini
    deeper = LevelSpec(str(data_dir / "views_table.tsv"), depth=1)
    states = []
    final = warmup.warm_up(levels=[chapters, deeper], model=MINILM, report=states.append)
    assert final["state"] == "done" and final["levels"] == [chapters.label, deeper.label]
    first_level_done = next(i for i, s in enumerate(states) if s["level_index"] == 0 and s["done"] == len(view.names))
    second_level_starts = next(i for i, s in enumerate(states) if s["level_index"] == 1)
    assert first_level_done < second_level_starts, "the first level is ready before the second is loaded"
    assert states[second_level_starts]["total"] == 0, "while a level loads its count is not known yet"
    assert final["total"] == final["done"] == len(deeper.load().names)
    assert warmup.level_name(warmup.DEFAULT_LEVELS[0]) == "ICD-10 chapters"


def test_a_second_warm_up_encodes_nothing_when_everything_is_cached(tmp_home, mini, monkeypatch):
    spec, view = mini
    warmup.warm_up(levels=[spec], model=MINILM)
    encoder = load_encoder("minilm")

    def refuse(texts, batch_size):
        raise AssertionError(f"encoded {len(texts)} names again")

    monkeypatch.setattr(encoder, "_encode", refuse)
    again = warmup.warm_up(levels=[spec], model=MINILM)
    assert again["state"] == "done" and again["encoded"] == 0 and again["done"] == len(view.names)


def test_a_warm_up_stopped_midway_keeps_its_chunks_and_the_next_one_encodes_only_the_rest(tmp_home, mini,
                                                                                           monkeypatch):
    spec, view = mini
    encoder = load_encoder("minilm")
    real, calls = encoder._encode, []

    def dies_on_the_second_chunk(texts, batch_size):
        calls.append(len(texts))
        if len(calls) == 2:
            raise RuntimeError("killed\nwith a second line")
        return real(texts, batch_size)

    monkeypatch.setattr(encoder, "_encode", dies_on_the_second_chunk)
    failed = warmup.warm_up(levels=[spec], model=MINILM, chunk=5)
    assert failed["state"] == "failed" and failed["error"] == "killed", "one line"
    stored = VectorCache().get(encoder.fingerprint, unique_names(view))
    assert len(stored) == 5, "the finished chunk is stored"
    assert not warmup.is_running(warmup.read_state())
    monkeypatch.setattr(encoder, "_encode", real)
    resumed = warmup.warm_up(levels=[spec], model=MINILM, chunk=5)
    assert resumed["state"] == "done" and resumed["encoded"] == len(unique_names(view)) - 5


def test_one_warm_up_per_home_at_a_time(tmp_home, mini):
    with FileLock(str(tmp_home / warmup.LOCK_FILE)):
        assert warmup.warm_up(levels=[mini[0]], model=MINILM) is None
    assert warmup.read_state() is None, "the second warm-up writes nothing"


def test_the_warm_up_stops_once_the_server_that_started_it_is_gone(tmp_home, mini):
    not_my_parent = os.getppid() + 1
    stopped = warmup.warm_up(levels=[mini[0]], model=MINILM, parent_pid=not_my_parent)
    assert stopped["state"] == "stopped" and stopped["encoded"] == 0


@pytest.mark.parametrize("value, on", [("", True), ("1", True), ("0", False), ("false", False), ("off", False)])
def test_the_environment_turns_it_off(monkeypatch, value, on):
    monkeypatch.setenv(warmup.ENABLED_ENV, value)
    assert warmup.enabled() is on


def test_turned_off_it_starts_no_process(tmp_home, mini, monkeypatch):
    monkeypatch.setenv(warmup.ENABLED_ENV, "0")
    assert warmup.start_background([mini[0]], "minilm") is None
    assert not (tmp_home / warmup.LOG_FILE).exists() and warmup.read_state() is None


def test_running_means_a_live_process_that_wrote_lately(tmp_home):
    now = time.time()
    mine = {"state": "running", "pid": os.getpid(), "updated": now}
    assert warmup.is_running(mine, now)
    assert not warmup.is_running({**mine, "updated": now - warmup.STALE_S - 1}, now)
    assert not warmup.is_running({**mine, "state": "done"}, now)
    assert not warmup.is_running({**mine, "pid": 2**22 + 12345}, now), "no such process"
    assert not warmup.is_running(None, now)


def test_start_background_warms_up_in_a_process_of_its_own(tmp_home, mini, monkeypatch):
    monkeypatch.setenv(warmup.ENABLED_ENV, "1")
    spec, view = mini
    warmup.warm_up(levels=[spec], model=MINILM)  # encoded here (the model is loaded already): the process only checks
    process = warmup.start_background([spec], "minilm")
    assert process.wait(timeout=300) == 0, (tmp_home / warmup.LOG_FILE).read_text()[-2000:]
    state = json.loads((tmp_home / warmup.STATE_FILE).read_text())
    assert state["state"] == "done" and state["pid"] == process.pid != os.getpid()
    assert state["done"] == len(view.names) and state["encoded"] == 0 and state["levels"] == [spec.label]


def test_while_the_warm_up_encodes_a_session_of_the_level_reads_its_chunks_and_its_progress(tmp_home, mini,
                                                                                              monkeypatch):
    """The warm-up walks the pages' road (EncodingSession): what a progressive answer reads meanwhile."""
    from bioviz.models.encoding_session import EncodingSession

    spec, view = mini
    monkeypatch.setattr(warmup, "WRITE_EVERY_S", 0.0)
    session = EncodingSession.of(MINILM, view.names, owner="a page")
    seen = []

    def look(state):
        if state["state"] == "running" and 0 < state["encoded"] < len(unique_names(view)):
            seen.append((session.partial().done, session.progress()))

    final = warmup.warm_up(levels=[spec], model=MINILM, chunk=4, report=look)
    assert final["state"] == "done"
    # counts move within a chunk too (as batches end); a chunk's vectors are read once it is stored
    done, progress = next(((d, p) for d, p in seen if 0 < d < len(unique_names(view))), (None, None))
    assert done is not None, f"no read saw the chunks stored so far, only {[d for d, _ in seen]}"
    assert progress is not None and progress.owner == "the background warm-up"
    assert session.ready() and session.partial().complete
