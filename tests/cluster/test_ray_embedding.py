"""A level embedded through Ray Data on the session's Ray head equals the local vectors."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from bioviz.cli import main
from bioviz.models.cached_encoding import encode_cached
from bioviz.models.registry import load_encoder
from bioviz.models.vector_cache import VectorCache
from bioviz.ontology import level_view, load_source

pytestmark = [pytest.mark.timeout(600), pytest.mark.slow]  # a real local Ray head: tens of seconds each


def test_embed_with_the_ray_executor_caches_the_local_vectors(ray_head, data_dir, tmp_home, capsys, monkeypatch):
    monkeypatch.delenv("BIOVIZ_EXECUTOR", raising=False)
    source = str(data_dir / "mini.obo")
    code = main(["embed", source, "--model", "minilm", "--depth", "1", "--executor", "ray", "--json", "--quiet"])
    out, err = capsys.readouterr()
    assert code == 0, err
    report = json.loads(out)
    assert report["executor"] == "ray" and report["encoded"] == report["names"] > 0
    names = list(level_view(load_source(source), depth=1).names)
    encoder = load_encoder("minilm")
    # What Ray Data put into this machine's vector cache...
    cached = VectorCache().get(encoder.fingerprint, names)
    assert sorted(cached) == sorted(set(names))
    # ...is what this machine encodes (float32 rounding: batches may pad differently).
    local = encoder.encode(names)
    np.testing.assert_allclose(np.stack([cached[n] for n in names]), local, atol=1e-6)
    vectors, stats = encode_cached(encoder, names)  # a second look: all from the cache, no cluster needed
    assert stats.encoded == 0 and np.allclose(vectors, local, atol=1e-6)


def test_ray_executor_setting_sends_large_sets_only(ray_head, tmp_home, monkeypatch):
    from bioviz.models import ray_embedding

    monkeypatch.setenv("BIOVIZ_EXECUTOR", "ray")
    monkeypatch.setenv(ray_embedding.MIN_NAMES_ENV, "100")
    assert ray_embedding.wanted("minilm", "bundled", 100)
    assert not ray_embedding.wanted("minilm", "bundled", 99)  # the cluster's start-up would cost more
    assert not ray_embedding.wanted("a run", "run", 10_000)  # a worker cannot load this machine's folder
    with ray_embedding.executor("ray"):
        assert ray_embedding.wanted("minilm", "bundled", 1)  # --executor ray: any number
    with ray_embedding.executor("local"):
        assert not ray_embedding.wanted("minilm", "bundled", 10_000)


def test_embed_on_an_unreachable_cluster_is_one_line_and_caches_nothing(data_dir, tmp_home, capsys, monkeypatch):
    pytest.importorskip("ray", reason="ray is not installed (pip install -r requirements-ray.txt; CI has it)")
    from cluster_support import free_port

    monkeypatch.setenv("RAY_ADDRESS", f"127.0.0.1:{free_port()}")  # nothing listens there
    code = main(["embed", str(data_dir / "mini.obo"), "--model", "minilm", "--executor", "ray", "--quiet"])
    _, err = capsys.readouterr()
    assert code == 2
    assert err.strip().splitlines() == [f"error: the Ray cluster at {os.environ['RAY_ADDRESS']} is unreachable "
                                        "(Connection refused)"]
    assert VectorCache().stats() == []
