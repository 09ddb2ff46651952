"""Damaged and vanishing run directories (issue 13, finding 6): listed as damaged, never fatal.

One bad ``run.json`` used to take down every page that lists runs (AttributeError), and a run
deleted while the list was read raised FileNotFoundError. Here every damaged form is listed
with a one-line reason (or left out of model pickers with a warning), a damaged run used as
a MODEL is a one-line ModelError (exit 2 on the command line), and runs deleted at any point
of the listing are simply not listed.
"""

from __future__ import annotations

import json
import logging
import os
import pathlib
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from bioviz.cli import main
from bioviz.errors import ModelError, SplitError
from bioviz.evaluation.run_list import run_row, stored_results_rows
from bioviz.evaluation.splits import split_spec_for_run
from bioviz.models.model_spec import ModelSpec, bundled_minilm_path
from bioviz.models.registry import embed
from bioviz.models.runs import list_runs, read_run, run_split
from bioviz.ontology import level_view, load_source

MINI = Path(__file__).resolve().parents[1] / "data" / "mini.obo"

# run.json as a crash, a power loss or a hand edit leaves it
DAMAGED_RUN_JSON = {
    "list": b"[]",
    "null": b"null",
    "empty string": b'""',
    "number": b"3",
    "config is a list": b'{"run_id": "x", "config": []}',
    "metrics is a string": b'{"config": {}, "metrics": "high"}',
    "not UTF-8": b'{"run_id": "\xff\xfe"}',
    "binary": bytes(range(256)),
    "truncated": b'{"run_id": "r", "config": {"sour',
    "empty file": b"",
}


def make_run(folder: Path, content: bytes | dict, weights: bool = False) -> Path:
    """A run directory with this ``run.json`` (and, with ``weights``, links to minilm's files)."""
    folder.mkdir(parents=True)
    data = json.dumps(content).encode() if isinstance(content, dict) else content
    (folder / "run.json").write_bytes(data)
    if weights:
        for file in bundled_minilm_path().iterdir():
            os.symlink(file, folder / file.name)
    return folder


SOUND = {"run_id": "sound", "created": "2026-01-02T03:04:05+00:00",
         "config": {"encoder": "definitions", "source": str(MINI), "depth": 1, "shots": 2},
         "metrics": {"trained": {"test": {"mAP": 0.75}}}}


@pytest.mark.parametrize("how", DAMAGED_RUN_JSON)
def test_a_damaged_run_is_listed_as_damaged_and_never_breaks_the_list(tmp_home, caplog, how):
    make_run(tmp_home / "runs" / "sound", SOUND)
    damaged = make_run(tmp_home / "runs" / "broken", DAMAGED_RUN_JSON[how])
    with caplog.at_level(logging.WARNING):
        pickable = list_runs()
    assert [r.run_id for r in pickable] == ["sound"]  # pickers never offer it as a model...
    assert any("broken" in r.getMessage() and "damaged" in r.getMessage() for r in caplog.records)  # ...and say so
    listed = {r.run_id: r for r in list_runs(include_damaged=True)}
    assert set(listed) == {"sound", "broken"}
    broken = listed["broken"]
    assert broken.damaged and "\n" not in broken.damaged and "run.json" in broken.damaged
    assert listed["sound"].damaged is None
    assert "damaged" in broken.label
    rows = {row["run"]: row for row in map(run_row, listed.values())}  # the Train page's run list
    assert rows["broken"]["damaged"] == broken.damaged and rows["broken"]["path"] == str(damaged)
    assert rows["sound"]["damaged"] is None and rows["sound"]["test mAP trained"] == 0.75
    assert stored_results_rows(damaged) == []


@pytest.mark.parametrize("how", DAMAGED_RUN_JSON)
def test_a_damaged_run_used_as_a_model_is_one_line(tmp_home, capsys, how):
    run = make_run(tmp_home / "runs" / "broken", DAMAGED_RUN_JSON[how])
    # choose_split takes ModelSpecs: a damaged run is refused where it is parsed (ModelSpec.parse)
    for read in (read_run, ModelSpec.parse, split_spec_for_run):
        with pytest.raises(ModelError, match=r"^run broken is damaged: .*run\.json") as caught:
            read(str(run))
        assert "\n" not in str(caught.value)
    view = level_view(load_source(str(MINI)), depth=1)
    with pytest.raises(SplitError, match="damaged"):  # the Projection page's run markers
        run_split(run, view)
    for argv in (["embed", str(MINI), "--model", str(run), "--quiet"],
                 ["eval", "--model", str(run), "--source", str(MINI), "--task", "ranking", "--quiet"]):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err.startswith("error: run broken is damaged: ") and "run.json" in err and err.count("\n") == 1


def test_split_settings_that_are_not_numbers_make_a_damaged_run(tmp_home):
    run = make_run(tmp_home / "runs" / "odd", {"config": {"shots": [2], "seed": {"a": 1}}})
    with pytest.raises(ModelError, match="odd is damaged: its split settings"):
        split_spec_for_run(run)


def test_a_run_without_model_files_is_refused_before_anything_loads(tmp_home):
    run = make_run(tmp_home / "runs" / "hollow", {"run_id": "hollow", "config": {}})
    with pytest.raises(ModelError, match="run hollow is damaged: it has neither modules.json"):
        ModelSpec.parse(str(run))


def test_a_run_missing_a_module_folder_is_one_line(tmp_home):
    run = make_run(tmp_home / "runs" / "partial", {"run_id": "partial", "config": {}}, weights=True)
    os.unlink(run / "1_Pooling")  # a run copied in part: sentence-transformers raised a TypeError
    with pytest.raises(ModelError, match="the module folder '1_Pooling' that modules.json names is missing") as caught:
        embed(["fever"], model=str(run), use_cache=False)
    assert "\n" not in str(caught.value)


class _Vanishing:
    """Delete a run directory just before the n-th file-system call that touches it."""

    def __init__(self, doomed: Path, at: int) -> None:
        self.doomed, self.at, self.calls, self.fired = str(doomed), at, 0, False

    def before(self, path) -> None:
        if str(path).startswith(self.doomed):
            if self.calls == self.at:
                shutil.rmtree(self.doomed, ignore_errors=True)
                self.fired = True
            self.calls += 1


def test_a_run_deleted_at_any_point_of_the_listing_is_left_out(tmp_home, monkeypatch):
    """Crash-point style: the run disappears before each file-system call in turn."""
    real_stat, real_open = pathlib.Path.stat, pathlib.Path.open
    at = 0
    while True:
        runs = tmp_home / "runs"
        shutil.rmtree(runs, ignore_errors=True)
        make_run(runs / "kept", SOUND)
        doomed = make_run(runs / "doomed", {**SOUND, "run_id": "doomed"})
        vanishing = _Vanishing(doomed, at)

        def stat(self, *args, **kwargs):
            vanishing.before(self)
            return real_stat(self, *args, **kwargs)

        def open_(self, *args, **kwargs):
            vanishing.before(self)
            return real_open(self, *args, **kwargs)

        with monkeypatch.context() as patch:
            patch.setattr(pathlib.Path, "stat", stat)
            patch.setattr(pathlib.Path, "open", open_)
            rows = [run_row(run) for run in list_runs(include_damaged=True)]  # what the Train page draws
        assert "sound" in [row["run"] for row in rows], at  # the other run is always listed
        if not vanishing.fired:  # every point has been tried
            break
        at += 1
    assert at >= 3  # the listing touched the doomed run several times, each one tried


# --------------------------------------------------------------------------------- any run.json

_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=8,
)
_CONFIG_KEYS = ("encoder", "source", "root", "depth", "synonyms", "shots", "init", "input_label", "base",
                "source_options", "view", "split", "seed", "split_seed", "test_per_class", "zero_shot_classes")
_RUN_JSON = st.one_of(
    st.binary(max_size=40),
    _JSON.map(lambda value: json.dumps(value).encode()),
    st.fixed_dictionaries({}, optional={
        "run_id": _JSON, "created": _JSON | st.sampled_from(["2026-01-02T03:04:05", "yesterday"]),
        "config": _JSON | st.fixed_dictionaries({}, optional={key: _JSON for key in _CONFIG_KEYS}),
        "metrics": _JSON | st.fixed_dictionaries({}, optional={key: _JSON for key in ("baseline", "trained",
                                                                                        "base_mix")}),
    }).map(lambda value: json.dumps(value).encode()),
)


@settings(max_examples=60)
@given(run_json=_RUN_JSON, eval_json=_JSON)
def test_any_run_json_gives_a_line_or_a_damaged_line(run_json, eval_json):
    with tempfile.TemporaryDirectory() as tmp:
        run = make_run(Path(tmp) / "run", run_json)
        (run / ".eval.json").write_text(json.dumps({"results": eval_json}))
        [info] = list_runs(Path(tmp), include_damaged=True)
        row = run_row(info)
        assert isinstance(info.label, str) and row["run"] == info.run_id
        assert all(value is None or isinstance(value, (str, int, float, bool)) for value in row.values())
        assert isinstance(stored_results_rows(run), list)
        if info.damaged:
            with pytest.raises(ModelError):
                read_run(run)
        else:
            try:
                split_spec_for_run(run)
            except ModelError as error:  # split settings of the wrong type: one line, never a traceback
                assert "\n" not in str(error)
