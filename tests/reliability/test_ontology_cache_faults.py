"""The parsed-source cache is only a cache (issue 13, finding 7).

A write that fails after parsing succeeded (``ulimit -f``, a full disk) is a warning and
the command still answers; a damaged cache file (truncated, garbage, another layout) is set
aside and the source parsed again, never a traceback.
"""

from __future__ import annotations

import errno
import io
import json
import logging
import pathlib

import numpy as np
import pytest

from bioviz.ontology import load_source, sources
from ontology_support import run_limited


def cache_file(home: pathlib.Path, spec: str) -> pathlib.Path:
    """Where ``load_source(spec)`` keeps its parsed form."""
    return home / "sources" / f"{sources._fingerprint(spec, sources.source_kind(spec), {})}.npz"


def leftovers(home: pathlib.Path) -> list[str]:
    return sorted(p.name for p in (home / "sources").iterdir()) if (home / "sources").exists() else []


def test_levels_answers_when_ulimit_f_stops_the_cache_write(tmp_path, data_dir):
    home = tmp_path / "home"
    result = run_limited(["levels", str(data_dir / "mini.obo"), "--depth", "1", "--json"], home,
                         memory_mb=1024, seconds=120, file_blocks=1024)  # the cache file is about 3 KB
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["classes"] == 2
    assert "could not write the source cache" in result.stderr and "Traceback" not in result.stderr
    assert leftovers(home) == [], "no partial cache file or temporary file is left"


def test_a_full_disk_while_caching_is_a_warning(data_dir, tmp_home, monkeypatch, caplog):
    def full(self, data):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(pathlib.Path, "write_bytes", full)
    with caplog.at_level(logging.WARNING, logger="bioviz.ontology.sources"):
        onto = load_source(str(data_dir / "mini.obo"))
    assert onto.concept("MINI:0000011").name == "myocardial infarction"
    assert "No space left on device" in caplog.text
    assert leftovers(tmp_home) == []


@pytest.fixture(scope="module")
def mini(tmp_path_factory):
    """mini.obo parsed once for the module: (ontology, its cache file's bytes)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("BIOVIZ_HOME", str(tmp_path_factory.mktemp("home")))
        onto = load_source(str(pathlib.Path(__file__).parents[1] / "data" / "mini.obo"), use_cache=False)
    return onto, sources.serialize(onto)


def _other_arrays() -> bytes:
    buffer = io.BytesIO()
    np.savez(buffer, something=np.arange(3))
    return buffer.getvalue()


def _edges_out_of_range(valid: bytes) -> bytes:
    with np.load(io.BytesIO(valid)) as data:
        arrays = dict(data)
    arrays["edges"] = arrays["edges"] + 1000
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    return buffer.getvalue()


DAMAGE = {
    "truncated": lambda valid: valid[:1500],
    "garbage": lambda valid: bytes(range(256)) * 8,
    "empty": lambda valid: b"",
    "other arrays": lambda valid: _other_arrays(),
    "edges out of range": _edges_out_of_range,
}


@pytest.mark.parametrize("damage", DAMAGE)
def test_a_damaged_cache_file_is_set_aside_and_the_source_parsed_again(data_dir, tmp_home, caplog, mini, damage):
    spec = str(data_dir / "mini.obo")
    fresh, valid = mini
    target = cache_file(tmp_home, spec)
    target.parent.mkdir(parents=True, exist_ok=True)
    bad = DAMAGE[damage](valid)
    target.write_bytes(bad)
    with caplog.at_level(logging.WARNING, logger="bioviz.ontology.sources"):
        onto = load_source(spec)
    assert onto.concepts == fresh.concepts and set(onto.graph.edges) == set(fresh.graph.edges)
    assert "unreadable" in caplog.text
    assert target.with_name(target.name + ".corrupt").read_bytes() == bad, "set aside for a look, not deleted"
    assert sources.deserialize(target).concepts == fresh.concepts, "a good cache replaced it"


def test_levels_answers_over_a_truncated_cache(tmp_path, data_dir, mini):
    home = tmp_path / "home"
    spec = str(data_dir / "mini.obo")
    target = home / "sources" / f"{sources._fingerprint(spec, 'obo', {})}.npz"
    target.parent.mkdir(parents=True)
    target.write_bytes(mini[1][:1000])
    result = run_limited(["levels", spec, "--depth", "1", "--json"], home, memory_mb=1024, seconds=120)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["classes"] == 2
