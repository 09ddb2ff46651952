"""Complexity and resource budgets of loading a user's source (issue 13, finding 1).

Hostile shapes (a ladder, a dense layered graph, a 100k chain, a 100k cycle) load and give
a depth-1 level through the command line under ``ulimit -v`` and a wall-clock limit; a
parse that exceeds its budget is one ``SourceError`` line and leaves no worker behind.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from bioviz.errors import SourceError
from bioviz.ontology import load_source
from ontology_support import chain, cycle, dense_layers, ladder, run_limited, write_table

# The ladder took 2.2 GB at 8,000 nodes and grew quadratically: 20,000 would need
# about 14 GB. Everything here fits in 1 GiB of address space, the CLI and its worker each.
MEMORY_MB = 1024
SECONDS = 120  # seconds of a shared 2-core machine; a quadratic regression takes far longer

SHAPES = {
    # name: (rows, extra CLI options, expected classes, expected names)
    "ladder-20k": (lambda: ladder(20_000), [], 1, 19_998),
    "dense-60x40": (lambda: dense_layers(60, 40), ["--keep-ambiguous"], 60, 60 * (1 + 60 * 40)),
    "chain-100k": (lambda: chain(100_000), [], 1, 99_998),
    "cycle-100k": (lambda: cycle(100_000), [], 1, 99_999),
}


@pytest.mark.slow  # over 5 s in a full run (CI lists the times)
@pytest.mark.parametrize("shape", SHAPES)
def test_hostile_shapes_load_and_cut_within_memory_and_time(tmp_path, shape):
    rows, options, classes, names = SHAPES[shape]
    table = write_table(tmp_path / f"{shape}.tsv", rows())
    result = run_limited(["levels", str(table), "--depth", "1", "--json", *options], tmp_path / "home",
                         memory_mb=MEMORY_MB, seconds=SECONDS)
    assert result.returncode == 0, result.stderr[-2000:]
    stats = json.loads(result.stdout)
    assert (stats["classes"], stats["names"]) == (classes, names)
    if shape == "ladder-20k":
        assert stats["removed_shortcuts"] == 19_998, "every i-2 -> i edge jumps a level"
    if shape == "cycle-100k":
        assert stats["removed_cycles"] == 1


def test_dense_layers_drop_shared_names_in_linear_time(tmp_path):
    """Without --keep-ambiguous only each class's private leaf is unambiguous."""
    table = write_table(tmp_path / "dense.tsv", dense_layers(60, 40))
    result = run_limited(["levels", str(table), "--depth", "1", "--json"], tmp_path / "home",
                         memory_mb=MEMORY_MB, seconds=SECONDS)
    assert result.returncode == 0, result.stderr[-2000:]
    stats = json.loads(result.stdout)
    assert (stats["classes"], stats["names"], stats["ambiguous_names"]) == (60, 60, 60 * 40)


def _children() -> list[int]:
    """Process ids whose parent is this process (from /proc)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rpartition(")")[2].split()[1]) == os.getpid():
                found.append(int(entry.name))
    return found


def test_time_budget_exceeded_is_one_line_and_kills_the_worker(tmp_path, tmp_home, monkeypatch):
    table = write_table(tmp_path / "ladder.tsv", ladder(20_000))
    monkeypatch.setenv("BIOVIZ_LOAD_MAX_SECONDS", "0.05")
    monkeypatch.setenv("BIOVIZ_LOAD_SECONDS_PER_GB", "0")
    before = set(_children())
    with pytest.raises(SourceError) as error:
        load_source(str(table))
    message = str(error.value)
    assert message.startswith("ladder.tsv exceeded the 0.05 s / 4 GiB budget for loading a source (out of time)")
    assert "BIOVIZ_LOAD_MAX_SECONDS" in message and "\n" not in message
    assert set(_children()) <= before, "the worker was killed and reaped"
    assert not list((tmp_home / "sources").glob("*.npz")), "nothing cached"


def test_memory_budget_exceeded_is_one_line(tmp_path, tmp_home, monkeypatch):
    table = write_table(tmp_path / "ladder.tsv", ladder(20_000))
    monkeypatch.setenv("BIOVIZ_LOAD_MAX_MEMORY_MB", "8")
    monkeypatch.setenv("BIOVIZ_LOAD_SECONDS_PER_GB", "0")
    with pytest.raises(SourceError, match=r"^ladder\.tsv exceeded the 60 s / 8 MiB budget for loading a source \(") as error:
        load_source(str(table))
    assert "\n" not in str(error.value)
    monkeypatch.delenv("BIOVIZ_LOAD_MAX_MEMORY_MB")
    assert len(load_source(str(table))) == 20_000, "with the default budget the same file loads"


def test_budget_exceeded_on_the_command_line_is_exit_2_and_one_line(tmp_path, data_dir):
    result = run_limited(["levels", str(data_dir / "mini.obo"), "--depth", "1"], tmp_path / "home",
                         memory_mb=MEMORY_MB, seconds=SECONDS, env={"BIOVIZ_LOAD_MAX_SECONDS": "0.001", "BIOVIZ_LOAD_SECONDS_PER_GB": "0"})
    assert result.returncode == 2
    assert result.stderr.startswith("error: mini.obo exceeded the 0.001 s / 4 GiB budget for loading a source")
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr


@pytest.mark.parametrize("variable, value", [("BIOVIZ_LOAD_MAX_SECONDS", "soon"), ("BIOVIZ_LOAD_MAX_MEMORY_MB", "-1"),
                                             ("BIOVIZ_LOAD_MAX_SECONDS", "nan")])
def test_a_bad_budget_setting_is_one_line(data_dir, tmp_home, monkeypatch, variable, value):
    monkeypatch.setenv(variable, value)
    with pytest.raises(SourceError, match=f"^{variable} must be a positive number"):
        load_source(str(data_dir / "mini.obo"))

