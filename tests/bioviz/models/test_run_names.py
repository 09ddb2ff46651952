"""Readable run names (bioviz.models.runs): a default built from the config, a name the user sets.

The name lives in its own file written atomically: run.json is never rewritten, a refused
write keeps the old name, and a damaged name file never breaks a listing.
"""

from __future__ import annotations

import errno
import json
import logging
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from bioviz.errors import BiovizError, ModelError
from bioviz.models import runs as runs_module
from bioviz.models.runs import (NAME_FILE, NAME_MAX, check_run_name, default_run_name, distinct_labels, list_runs,
                                read_run, set_run_name)

CONFIG = {"encoder": "residual", "source": "hpo", "depth": 1, "shots": 15}


def make_run(folder: Path, run_id: str = "20261122-192803-ecd5", config: dict | None = None) -> Path:
    folder.mkdir(parents=True)
    (folder / "run.json").write_text(json.dumps({"run_id": run_id, "config": config or CONFIG}))
    return folder


@pytest.mark.parametrize("config, name", [
    (CONFIG, "residual · HPO d1 · 15-shot"),
    ({"encoder": "dan", "source": "icd10cm", "depth": 2, "shots": None}, "dan · ICD-10-CM d2 · all names"),
    ({"encoder": "cca", "source": "/data/onto/mini.obo", "root": "MINI:1", "synonyms": True, "shots": 3},
     "cca · mini under MINI:1 synonym sets · 3-shot"),
    ({"encoder": "hierarchical", "finetune": True, "source": "/umls/2025AA/META", "depth": 1, "shots": 5},
     "hierarchical fine-tuned · UMLS 2025AA d1 · 5-shot"),
    ({"encoder": "residual", "init": "/runs/x", "source": "icd10", "depth": 1, "shots": 15},
     "residual (continued) · ICD-10 d1 · 15-shot"),
])
def test_default_names_say_what_was_trained(config, name):
    assert default_run_name(config) == name


def test_a_run_is_labelled_by_its_name_and_short_id(tmp_home):
    run = read_run(make_run(tmp_home / "runs" / "20261122-192803-ecd5"))
    assert run.name == "residual · HPO d1 · 15-shot" and run.short_id == "ecd5"
    assert run.label == "residual · HPO d1 · 15-shot (ecd5)" and run.run_id == "20261122-192803-ecd5"
    other = read_run(make_run(tmp_home / "runs" / "my-run", run_id="my-run"))
    assert other.label == "residual · HPO d1 · 15-shot (my-run)"  # ids that are not job ids stay whole


def test_set_run_name_writes_its_own_file_and_never_touches_run_json(tmp_home):
    path = make_run(tmp_home / "runs" / "20261122-192803-ecd5")
    record = (path / "run.json").read_bytes()
    renamed = set_run_name(path, "  HPO residual, 15 shots, w=0.3 ")
    assert renamed.name == "HPO residual, 15 shots, w=0.3" and renamed.label == "HPO residual, 15 shots, w=0.3 (ecd5)"
    assert (path / NAME_FILE).read_text(encoding="utf-8") == "HPO residual, 15 shots, w=0.3\n"
    assert (path / "run.json").read_bytes() == record
    assert [r.name for r in list_runs()] == ["HPO residual, 15 shots, w=0.3"]
    assert set_run_name(path, "Hypothèse: χ² ≥ 0.4 — ✓").name == "Hypothèse: χ² ≥ 0.4 — ✓"
    back = set_run_name(path, "   ")  # blank (or None): back to the default name
    assert back.name == back.default_name and not (path / NAME_FILE).exists()
    assert set_run_name(path, None).name == back.default_name


@pytest.mark.parametrize("name, words", [
    ("two\nlines", "several lines"),
    ("carriage\rreturn", "several lines"),
    ("tab\there", "control character"),
    ("bell\x07", "control character"),
    ("right-to-left \u202eoverride", "control character"),
    ("x" * (NAME_MAX + 1), f"at most {NAME_MAX}"),
    (42, "text"),
])
def test_invalid_names_are_refused_with_one_line_and_change_nothing(tmp_home, name, words):
    path = make_run(tmp_home / "runs" / "20261122-192803-ecd5")
    set_run_name(path, "kept")
    with pytest.raises(BiovizError, match=words) as caught:
        set_run_name(path, name)
    assert "\n" not in str(caught.value)
    assert read_run(path).name == "kept"


def test_a_refused_write_keeps_the_old_name_and_leaves_no_temporary_file(tmp_home, monkeypatch):
    path = make_run(tmp_home / "runs" / "20261122-192803-ecd5")
    set_run_name(path, "kept")
    real_write = Path.write_text

    def full_disk(self, *args, **kwargs):
        if self.name.startswith(f".{NAME_FILE}."):  # the temporary file of the atomic write
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_write(self, *args, **kwargs)

    monkeypatch.setattr(Path, "write_text", full_disk)
    with pytest.raises(ModelError, match="cannot name run 20261122-192803-ecd5: No space left on device"):
        set_run_name(path, "new")
    assert read_run(path).name == "kept"
    assert sorted(p.name for p in path.iterdir()) == [NAME_FILE, "run.json"]


def test_a_write_killed_before_the_rename_leaves_the_old_name(tmp_home, monkeypatch):
    path = make_run(tmp_home / "runs" / "20261122-192803-ecd5")
    set_run_name(path, "kept")
    from bioviz import paths

    def killed(*args):
        raise KeyboardInterrupt  # the process dies between writing the new file and renaming it

    monkeypatch.setattr(paths.os, "replace", killed)
    with pytest.raises(KeyboardInterrupt):
        set_run_name(path, "half written")
    monkeypatch.undo()
    assert read_run(path).name == "kept"


def test_naming_a_damaged_or_missing_run_is_a_model_error(tmp_home):
    damaged = tmp_home / "runs" / "broken"
    damaged.mkdir(parents=True)
    (damaged / "run.json").write_text("{not json")
    with pytest.raises(ModelError, match="damaged"):
        set_run_name(damaged, "name")
    with pytest.raises(ModelError, match="not a trained run"):
        set_run_name(tmp_home / "runs" / "nothing", "name")
    assert not (damaged / NAME_FILE).exists()


@pytest.mark.parametrize("content", [b"\xff\xfe binary", b"two\nlines\n", b"x" * 500, b"", b"\x00\x01"])
def test_a_damaged_name_file_falls_back_to_the_default_name(tmp_home, content, caplog):
    path = make_run(tmp_home / "runs" / "20261122-192803-ecd5")
    (path / NAME_FILE).write_bytes(content)
    with caplog.at_level(logging.WARNING):
        listed = list_runs()
    assert [r.name for r in listed] == ["residual · HPO d1 · 15-shot"]
    assert read_run(path).label == "residual · HPO d1 · 15-shot (ecd5)"


@settings(max_examples=60)
@given(st.text(max_size=120))
def test_any_accepted_name_reads_back_exactly(tmp_path_factory, text):
    path = make_run(tmp_path_factory.mktemp("runs") / "20261122-192803-ecd5")
    try:
        expected = check_run_name(text)
    except BiovizError:
        return
    assert set_run_name(path, text).name == expected
    assert "\n" not in read_run(path).label and len(expected) <= NAME_MAX


def test_runs_whose_labels_would_be_equal_are_told_apart_by_their_whole_id(tmp_home):
    make_run(tmp_home / "runs" / "a", run_id="20261122-192803-ecd5")
    make_run(tmp_home / "runs" / "b", run_id="20261201-080000-ecd5")  # same random tail, same default name
    make_run(tmp_home / "runs" / "c", run_id="20261201-090000-0001")
    labels = distinct_labels(list_runs())
    assert labels[tmp_home / "runs" / "a"] == "residual · HPO d1 · 15-shot (20261122-192803-ecd5)"
    assert labels[tmp_home / "runs" / "b"] == "residual · HPO d1 · 15-shot (20261201-080000-ecd5)"
    assert labels[tmp_home / "runs" / "c"] == "residual · HPO d1 · 15-shot (0001)"
    assert len(set(labels.values())) == 3


def test_model_labels_name_runs_by_label_never_by_path(tmp_path):
    from bioviz.models.runs import model_labels

    run = make_run(tmp_path / "runs" / "20261122-192803-ecd5")
    folder = tmp_path / "models" / "my-sapbert"
    folder.mkdir(parents=True)
    labels = model_labels(["minilm", str(run), str(folder), "org/model"])
    assert labels == ["minilm", "residual · HPO d1 · 15-shot (ecd5)", "my-sapbert", "org/model"]
    assert not any(str(tmp_path) in label for label in labels)


def test_model_labels_keep_two_models_apart(tmp_path):
    from bioviz.models.runs import model_labels

    first = make_run(tmp_path / "a" / "20261122-192803-ecd5")
    second = make_run(tmp_path / "b" / "x", run_id="20261123-101010-ecd5")  # same name, same short id
    assert model_labels([str(first), str(second)]) == ["residual · HPO d1 · 15-shot (20261122-192803-ecd5)",
                                                      "residual · HPO d1 · 15-shot (20261123-101010-ecd5)"]
    assert model_labels(["minilm", "minilm"]) == ["minilm (A)", "minilm (B)"]
