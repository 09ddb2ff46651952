"""Damaged caches (issue 13, finding 7): set aside as ``<name>.corrupt-<time>``, rebuilt, same results.

Every cache under BIOVIZ_HOME can be computed again, so a damaged one (random bytes, cut
short, emptied, a scribbled header) must never fail a command or a page: the file is renamed
out of the way with a logged warning, the value is computed afresh and stored again, and the
answer is the one a sound cache gives. A garbage ``vectors.sqlite`` used to make
``python -m bioviz neighbours`` exit 1 with a traceback.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

import numpy as np
import pytest
from state_support import DAMAGES, TrigramEncoder, damage, set_aside_copies, use_trigram_encoder

from bioviz.cache_files import read_cache
from bioviz.cli import main
from bioviz.evaluation import run as evaluation, store
from bioviz.models import cached_encoding, char_tfidf
from bioviz.models.cached_encoding import encode_cached
from bioviz.models.vector_cache import VectorCache, default_path
from bioviz.ontology import SplitSpec, level_view, load_source
from bioviz.space import Space
from bioviz.views.projection import ProjectionParams, cache_path, project

MINI = Path(__file__).resolve().parents[1] / "data" / "mini.obo"
NAMES = [f"{word} {i}" for i in range(12) for word in ("fever", "cough", "renal failure")]


def _warned_set_aside(caplog) -> bool:
    return any("set aside" in r.getMessage() for r in caplog.records if r.levelno == logging.WARNING)


# ------------------------------------------------------------------------------- vectors.sqlite


@pytest.mark.parametrize("how", ["garbage", "truncated", "scribbled header"])
def test_a_damaged_vector_database_is_set_aside_and_rebuilt(tmp_home, caplog, how):
    encoder = TrigramEncoder()
    first, _ = encode_cached(encoder, NAMES)
    damage(default_path(), how)
    with caplog.at_level(logging.WARNING):
        again, stats = encode_cached(encoder, NAMES)
    np.testing.assert_array_equal(again, first)
    assert stats.encoded == len(NAMES) and _warned_set_aside(caplog)
    assert [p.name.split(".corrupt-")[0] for p in set_aside_copies(tmp_home)] == ["vectors.sqlite"]
    _, stats = encode_cached(encoder, NAMES)  # the rebuilt database serves them all
    assert stats.cache_hits == len(NAMES) and stats.encoded == 0
    assert {row["model"]: row["vectors"] for row in VectorCache().stats()} == {encoder.fingerprint: len(NAMES)}


def test_the_statistics_and_clearing_of_a_damaged_database_work(tmp_home):
    encode_cached(TrigramEncoder(), NAMES)
    damage(default_path(), "garbage")
    cache = VectorCache()  # the Neighbours page's cache panel
    assert cache.stats() == [] and cache.size_bytes() > 0
    assert cache.clear() == 0 and set_aside_copies(tmp_home) == []  # clearing also drops the damaged copy


@pytest.mark.parametrize("how", ["garbage", "truncated"])
def test_neighbours_command_with_a_damaged_vector_database(tmp_home, monkeypatch, capsys, how):
    use_trigram_encoder(monkeypatch)
    argv = ["neighbours", "heart attack", "--source", str(MINI), "-k", "3", "--quiet", "--json"]
    assert main(argv) == 0
    clean = json.loads(capsys.readouterr().out)
    damage(default_path(), how)
    assert main(argv) == 0  # was exit 1 with a DatabaseError traceback
    out, err = capsys.readouterr()
    result = json.loads(out)
    assert result["neighbours"] == clean["neighbours"] and result["cache_hits"] == 0
    assert "Traceback" not in err and set_aside_copies(tmp_home)


# ------------------------------------------------------------------------------------ .npy blocks


@pytest.mark.parametrize("how", [*DAMAGES, "wrong shape"])
def test_a_damaged_vector_block_is_set_aside_and_rewritten(tmp_home, monkeypatch, caplog, how):
    monkeypatch.setattr(cached_encoding, "BLOCK_MIN", 10)  # blocks for a small request
    encoder = TrigramEncoder()
    first, _ = encode_cached(encoder, NAMES)
    [block] = (default_path().parent / "blocks").glob("*.npy")
    if how == "wrong shape":
        np.save(block, np.ones((3, 64), np.float32))
    else:
        damage(block, how)
    with caplog.at_level(logging.WARNING):
        again, stats = encode_cached(encoder, NAMES)
    np.testing.assert_array_equal(again, first)
    assert stats.cache_hits == len(NAMES)  # served by the database instead
    assert _warned_set_aside(caplog) and [p.name.split(".corrupt-")[0] for p in set_aside_copies(tmp_home)] == \
        [block.name]
    np.testing.assert_array_equal(VectorCache().get_block(encoder.fingerprint, NAMES), first)  # written again


# ------------------------------------------------------------------------------ projections (.npz)


@pytest.mark.parametrize("how", [*DAMAGES, "wrong shape", "not finite"])
def test_a_damaged_projection_is_set_aside_and_recomputed(tmp_home, caplog, how):
    vectors = np.random.default_rng(0).standard_normal((40, 16)).astype(np.float32)
    space = Space(tuple(f"n{i}" for i in range(40)), vectors / np.linalg.norm(vectors, axis=1, keepdims=True), "m")
    params = ProjectionParams(method="pca")
    first = project(space, params)
    path = cache_path(space, np.arange(40), params)
    if how == "wrong shape":
        np.savez(path, coords=np.zeros((3, 2), np.float32))
    elif how == "not finite":
        np.savez(path, coords=np.full((40, 2), np.nan, np.float32))
    else:
        damage(path, how)
    with caplog.at_level(logging.WARNING):
        again = project(space, params)
    np.testing.assert_allclose(again, first, atol=1e-5)
    assert _warned_set_aside(caplog) and len(set_aside_copies(tmp_home)) == 1
    with np.load(path) as data:  # stored again, soundly
        np.testing.assert_allclose(data["coords"], first, atol=1e-5)


# ---------------------------------------------------------------------------- char-tfidf (.npz)


@pytest.mark.parametrize("how", [*DAMAGES, "arrays that do not fit"])
def test_a_damaged_char_tfidf_fit_is_set_aside_and_refitted(tmp_home, monkeypatch, how):
    monkeypatch.setattr(char_tfidf, "default_corpus", lambda: NAMES)  # a fit of a second, not of ICD-10 and HPO
    first = char_tfidf.load_default()
    [path] = (tmp_home / "models").glob("char-tfidf-*.npz")
    if how == "arrays that do not fit":
        char_tfidf.CharTfidfModel(first.vocabulary, first.idf[:-1], first.components, first.settings).save(path)
    else:
        damage(path, how)
    again = char_tfidf.load_default()
    assert again.fingerprint == first.fingerprint
    np.testing.assert_allclose(again.transform(["fever"]), first.transform(["fever"]), atol=1e-6)
    assert len(set_aside_copies(tmp_home)) == 1
    assert char_tfidf.CharTfidfModel.load(path).fingerprint == first.fingerprint  # stored again


# ------------------------------------------------------------------------- evaluation results (.json)

_DAMAGED_JSON = {"garbage": None, "truncated": None, "empty": None, "a list": b"[]", "null": b"null",
                 "metrics not an object": b'{"model": "m", "task": "ranking", "metrics": [1]}'}


@pytest.fixture
def mini_level():
    onto = load_source(str(MINI))
    view = level_view(onto, depth=1)
    return onto, view, SplitSpec(shots=2).make(view)


@pytest.mark.parametrize("how", _DAMAGED_JSON)
def test_a_damaged_cached_result_is_set_aside_and_recomputed(tmp_home, fake_eval_models, mini_level, how):
    onto, view, split = mini_level
    settings = evaluation.EvalSettings(n_boot=20)
    [first] = evaluation.evaluate(view, split, "a", ["ranking"], ontology=onto, settings=settings)
    [path] = (tmp_home / "eval").glob("*.json")
    if _DAMAGED_JSON[how] is None:
        damage(path, how)
    else:
        path.write_bytes(_DAMAGED_JSON[how])
    [again] = evaluation.evaluate(view, split, "a", ["ranking"], ontology=onto, settings=settings)
    assert not again.cached and again.metrics == first.metrics and again.ci == first.ci
    assert len(set_aside_copies(tmp_home)) == 1
    [cached] = evaluation.evaluate(view, split, "a", ["ranking"], ontology=onto, settings=settings)
    assert cached.cached  # cached again


_DAMAGED_RUN_RESULTS = {"garbage": None, "truncated": None, "empty": None, "a list": b"[]",
                        "results not an object": b'{"version": 1, "results": []}'}


@pytest.mark.parametrize("how", _DAMAGED_RUN_RESULTS)
def test_damaged_results_stored_with_a_run_are_set_aside_not_overwritten(evaluated_run, how):
    path = evaluated_run / store.RUN_EVAL_FILE
    if _DAMAGED_RUN_RESULTS[how] is None:
        damage(path, how)
    else:
        path.write_bytes(_DAMAGED_RUN_RESULTS[how])
    assert store.read_run_evaluations(evaluated_run) == []
    [aside] = set_aside_copies(evaluated_run)  # kept for whoever wants to see what happened
    assert aside.name.startswith(".eval.json.corrupt-")
    store.store_with_run(evaluated_run, "key", {"model": "m", "task": "ranking", "metrics": {"map": 0.5}})
    assert [r["task"] for r in store.read_run_evaluations(evaluated_run)] == ["ranking"]


def test_a_damaged_file_replaced_meanwhile_by_another_process_is_left_alone(tmp_path):
    """Two processes read the same damaged file; the first sets it aside and writes a sound one:
    the second must not set that sound replacement aside."""
    path = tmp_path / "result.json"
    path.write_text("{damaged")

    def read(file: Path):
        text = file.read_text()
        fresh = tmp_path / "fresh"
        fresh.write_text('{"sound": true}')
        os.replace(fresh, file)  # the other process's rebuild lands meanwhile
        return json.loads(text)

    assert read_cache(path, read) is None
    assert json.loads(path.read_text()) == {"sound": True} and set_aside_copies(tmp_path) == []
    path.write_text("{damaged")
    assert read_cache(path, lambda file: json.loads(file.read_text())) is None
    assert not path.exists() and len(set_aside_copies(tmp_path)) == 1  # alone, it is set aside
