"""Issue 41 findings 6 and 8: ``python -m bioviz.models.merge`` deletes nothing it did not make, leaves no half output.

Before: ``--out .../keep`` silently deleted an existing ``keep.partial`` folder (a user's file
in it); ``--out`` a symlink or a file gave a NotADirectoryError traceback and left
``<out>.partial`` (a whole model copy) behind; a vectors file was refused as "char-tfidf has no
weights to merge". Tiny safetensors models stand in for real ones (no transformers loaded).
"""

from __future__ import annotations

import errno
import json
import os

import numpy as np
import pytest

from bioviz.models import merge
from bioviz.models.merge import MERGE_FILE, WEIGHTS_FILE, main


def _model(folder, value: float):
    from safetensors.numpy import save_file  # here: as merge itself imports it

    folder.mkdir()
    (folder / "config.json").write_text("{}")
    (folder / "tokenizer.json").write_text("{}")
    save_file({"w": np.full((2, 2), value, np.float32)}, str(folder / WEIGHTS_FILE), metadata={"format": "pt"})
    return folder


@pytest.fixture
def models(tmp_path):
    return str(_model(tmp_path / "base", 0.0)), str(_model(tmp_path / "tuned", 1.0))


def _run(args, capsys):
    code = main([*args, "--alpha", "0.5"])
    captured = capsys.readouterr()
    return code, captured.err.strip().splitlines()


def _listing(folder):
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


def test_a_merge_writes_the_model_and_leaves_nothing_beside_it(models, tmp_path, capsys):
    base, tuned = models
    (tmp_path / "keep.partial").mkdir()
    (tmp_path / "keep.partial" / "notes.txt").write_text("a user's file")
    code, err = _run([base, tuned, "--out", str(tmp_path / "keep"), "--dtype", "float32"], capsys)
    assert code == 0, err
    assert (tmp_path / "keep.partial" / "notes.txt").read_text() == "a user's file"  # before: deleted
    assert json.loads((tmp_path / "keep" / MERGE_FILE).read_text())["alpha"] == 0.5
    assert sorted(p.name for p in tmp_path.iterdir()) == ["base", "keep", "keep.partial", "tuned"]
    assert sorted(p.name for p in (tmp_path / "keep").iterdir()) == sorted([MERGE_FILE, "config.json", WEIGHTS_FILE,
                                                                            "tokenizer.json"])
    assert os.stat(tmp_path / "keep").st_mode & 0o755 == 0o755  # not mkdtemp's private 0o700


def test_an_empty_out_folder_is_filled(models, tmp_path, capsys):
    base, tuned = models
    (tmp_path / "empty").mkdir()
    assert _run([base, tuned, "--out", str(tmp_path / "empty")], capsys)[0] == 0
    assert (tmp_path / "empty" / WEIGHTS_FILE).is_file()


@pytest.mark.parametrize("kind", ["symlink", "file", "non-empty"])
def test_an_out_that_is_not_a_new_folder_is_refused_in_one_line_before_any_work(models, tmp_path, capsys, kind):
    base, tuned = models
    out = tmp_path / "linkout"
    if kind == "symlink":
        (tmp_path / "target").mkdir()
        out.symlink_to(tmp_path / "target")
    elif kind == "file":
        out.write_text("a user's file")
    else:
        out.mkdir()
        (out / "x").write_text("keep")
    before = _listing(tmp_path)
    code, err = _run([base, tuned, "--out", str(out)], capsys)
    assert code == 2 and len(err) == 1 and err[0].startswith("error: ") and str(out) in err[0], err
    assert _listing(tmp_path) == before, "nothing made, nothing deleted"


def test_a_failed_write_removes_only_its_own_temporary_folder(models, tmp_path, capsys, monkeypatch):
    base, tuned = models

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), "model.safetensors")

    monkeypatch.setattr(merge, "_save_weights", full)
    before = _listing(tmp_path)
    code, err = _run([base, tuned, "--out", str(tmp_path / "new")], capsys)
    assert code == 2 and len(err) == 1 and "No space left on device" in err[0], err
    assert _listing(tmp_path) == before


@pytest.mark.parametrize("suffix", [".npz", ".tsv"])
def test_a_vectors_file_is_named_as_one_that_cannot_be_merged(models, tmp_path, capsys, suffix):
    base, _ = models
    vectors = tmp_path / f"x{suffix}"
    vectors.write_bytes(b"")
    if suffix == ".tsv":
        (tmp_path / "x.metadata.tsv").write_text("")
    code, err = _run([base, str(vectors), "--out", str(tmp_path / "new")], capsys)
    assert code == 2 and err == [f"error: {vectors.name} is a vectors file: only trained runs/models with weights "
                                 "can be merged"], err
    assert not (tmp_path / "new").exists()
