"""Cache writes that the disk refuses (issue 13, finding 7): the result still comes back.

A full disk (ENOSPC), a file-size limit (``ulimit -f``: EFBIG) or SQLite's "database or disk
is full" on a cache write must not fail the command or the page: the value is computed and
returned, the write is skipped with a logged warning, no partial file is left, and what was
already stored stays as it was. One test runs the real command line under a real file-size
limit; the others inject the errors.
"""

from __future__ import annotations

import errno
import json
import logging
import os
import resource
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from state_support import TrigramEncoder, full_database, full_disk, stray_files, use_trigram_encoder

from bioviz.cli import main
from bioviz.evaluation import run as evaluation, store
from bioviz.models import cached_encoding, char_tfidf
from bioviz.models.cached_encoding import encode_cached
from bioviz.models.vector_cache import VectorCache, default_path
from bioviz.ontology import SplitSpec, level_view, load_source
from bioviz.space import Space
from bioviz.views.projection import ProjectionParams, cache_path, project

ROOT = Path(__file__).resolve().parents[2]
MINI = ROOT / "tests" / "data" / "mini.obo"
NAMES = [f"{word} {i}" for i in range(12) for word in ("fever", "cough", "renal failure")]
REFUSALS = {"full disk": errno.ENOSPC, "file-size limit": errno.EFBIG, "quota": errno.EDQUOT}


def _warned(caplog, words: str) -> bool:
    return any(words in r.getMessage() for r in caplog.records if r.levelno == logging.WARNING)


def _limit_file_size(limit: int):
    def apply() -> None:  # in the child, before it runs: what `ulimit -f` does
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    return apply


@pytest.mark.slow  # over 5 s in a full run (CI lists the times)
def test_embed_command_under_a_file_size_limit_still_answers(tmp_home):
    """``python -m bioviz embed`` under a real ``ulimit -f``: the vectors are computed, only not cached."""
    load_source(str(MINI))  # the parsed source is cached beforehand: only the vector cache meets the limit
    env = {**os.environ, "BIOVIZ_HOME": str(tmp_home), "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false",
           "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-m", "bioviz", "embed", str(MINI), "--model", "minilm", "--quiet",
                           "--json"], env=env, cwd=ROOT, capture_output=True, text=True, timeout=300,
                          preexec_fn=_limit_file_size(2048))
    assert done.returncode == 0, done.stderr  # was exit 1: "disk I/O error" from SQLite, with a traceback
    result = json.loads(done.stdout)
    assert result["names"] == result["encoded"] == 11 and result["dim"] == 384
    assert "Traceback" not in done.stderr and "not cached" in done.stderr
    assert stray_files(tmp_home) == []
    cache = VectorCache()  # what the limit left behind is a usable cache
    cache.put("fp", ["fever"], np.ones((1, 4), np.float32))
    assert list(cache.get("fp", ["fever"])) == ["fever"]


@pytest.mark.parametrize("message", ["database or disk is full", "disk I/O error"])
def test_vector_database_refusing_writes(tmp_home, monkeypatch, caplog, message):
    encoder = TrigramEncoder()
    stored, _ = encode_cached(encoder, NAMES[:5])  # something already stored must survive
    expected, _ = encode_cached(TrigramEncoder("other"), NAMES, use_cache=False)
    with full_database(monkeypatch, message), caplog.at_level(logging.WARNING):
        vectors, stats = encode_cached(encoder, NAMES)
    np.testing.assert_array_equal(vectors, expected)
    assert stats.cache_hits == 5 and stats.encoded == len(NAMES) - 5
    assert _warned(caplog, "not cached")
    found = VectorCache().get(encoder.fingerprint, NAMES)
    assert set(found) == set(NAMES[:5])
    np.testing.assert_array_equal(found[NAMES[0]], stored[0])


def test_vector_database_that_cannot_even_be_created(tmp_home, monkeypatch):
    with full_database(monkeypatch):
        vectors, stats = encode_cached(TrigramEncoder(), NAMES)
    assert vectors.shape == (len(NAMES), 64) and stats.encoded == len(NAMES)
    assert VectorCache().get("trigram-fp", NAMES) == {}  # nothing half-written: a sound, empty cache


@pytest.mark.parametrize("refusal", REFUSALS)
def test_vector_block_write_refused(tmp_home, monkeypatch, caplog, refusal):
    monkeypatch.setattr(cached_encoding, "BLOCK_MIN", 10)
    encoder = TrigramEncoder()
    expected, _ = encode_cached(encoder, NAMES, use_cache=False)
    with full_disk(monkeypatch, tmp_home, error=REFUSALS[refusal]), caplog.at_level(logging.WARNING):
        vectors, _ = encode_cached(encoder, NAMES)
    np.testing.assert_array_equal(vectors, expected)
    assert _warned(caplog, "not caching")
    assert stray_files(tmp_home) == [] and not list((default_path().parent / "blocks").glob("*.npy"))
    assert VectorCache().get_block(encoder.fingerprint, NAMES) is None


@pytest.mark.parametrize("refusal", REFUSALS)
def test_projection_write_refused(tmp_home, monkeypatch, caplog, refusal):
    vectors = np.random.default_rng(1).standard_normal((30, 8)).astype(np.float32)
    space = Space(tuple(f"n{i}" for i in range(30)), vectors / np.linalg.norm(vectors, axis=1, keepdims=True), "m")
    params = ProjectionParams(method="pca")
    expected = project(space, params, use_cache=False)
    with full_disk(monkeypatch, tmp_home, error=REFUSALS[refusal]), caplog.at_level(logging.WARNING):
        coords = project(space, params)
    np.testing.assert_allclose(coords, expected, atol=1e-5)
    assert _warned(caplog, "not caching")
    assert stray_files(tmp_home) == [] and not cache_path(space, np.arange(30), params).exists()


def test_char_tfidf_fit_write_refused(tmp_home, monkeypatch):
    monkeypatch.setattr(char_tfidf, "default_corpus", lambda: NAMES)
    with full_disk(monkeypatch, tmp_home, room=1000):
        model = char_tfidf.load_default()
    assert model.transform(["fever"]).shape == (1, model.dim)
    assert stray_files(tmp_home) == [] and not list(tmp_home.rglob("char-tfidf-*.npz"))
    assert char_tfidf.load_default().fingerprint == model.fingerprint  # fitted and stored next time


@pytest.fixture
def mini_level():
    onto = load_source(str(MINI))
    view = level_view(onto, depth=1)
    return onto, view, SplitSpec(shots=2).make(view)


@pytest.mark.parametrize("refusal", REFUSALS)
def test_evaluation_result_writes_refused(evaluated_run, mini_level, monkeypatch, caplog, refusal):
    onto, view, split = mini_level
    before = (evaluated_run / store.RUN_EVAL_FILE).read_bytes()
    home = evaluated_run.parents[1]
    with full_disk(monkeypatch, home, error=REFUSALS[refusal]), caplog.at_level(logging.WARNING):
        results = evaluation.evaluate(view, split, str(evaluated_run), ["hypernym"], ontology=onto,
                                      settings=evaluation.EvalSettings(n_boot=20))
    assert results[0].task == "hypernym" and not results[0].cached and results[0].metrics
    assert _warned(caplog, "not caching")
    assert (evaluated_run / store.RUN_EVAL_FILE).read_bytes() == before  # what was stored is intact
    assert stray_files(home) == []


def test_eval_command_on_a_full_disk_answers(tmp_home, fake_eval_models, monkeypatch, capsys):
    load_source(str(MINI))
    argv = ["eval", "--model", "a", "--source", str(MINI), "--task", "ranking", "--n-boot", "20", "--quiet", "--json"]
    with full_disk(monkeypatch, tmp_home):
        assert main(argv) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["results"][0]["task"] == "ranking" and stray_files(tmp_home) == []


def test_neighbours_command_on_a_full_database_answers(tmp_home, monkeypatch, capsys):
    use_trigram_encoder(monkeypatch)
    load_source(str(MINI))
    argv = ["neighbours", "heart attack", "--source", str(MINI), "-k", "3", "--quiet", "--json"]
    with full_database(monkeypatch), full_disk(monkeypatch, tmp_home):
        assert main(argv) == 0
    full = json.loads(capsys.readouterr().out)
    assert main(argv) == 0
    assert json.loads(capsys.readouterr().out)["neighbours"] == full["neighbours"]


def test_a_file_the_machine_refuses_outside_the_caches_is_one_line_exit_2(tmp_home, monkeypatch, capsys):
    """A write that must happen and cannot (not a cache): ``error: <reason> (<file>)``, exit 2, no traceback."""
    from bioviz.cli import embed

    def refuse(*args, **kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(tmp_home / "out"))

    monkeypatch.setattr(embed, "level_space", refuse)
    assert main(["embed", str(MINI), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err == f"error: {os.strerror(errno.ENOSPC)} ({tmp_home / 'out'})\n"
