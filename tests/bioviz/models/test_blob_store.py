"""Runs share their base model's files: one stored copy (``BIOVIZ_HOME/blobs``), hard-linked (issue 32, finding 6).

Before, every run held its own 91 MB copy of minilm's transformer (a default run: 153 MB).
"""

from __future__ import annotations

import errno
import os
import shutil
from pathlib import Path

import numpy as np
import pytest

from bioviz.models import blob_store
from bioviz.models.blob_store import ShareReport, blobs_dir, file_digest, share_files, sweep_blobs

BIG = blob_store.MIN_SHARED_BYTES


def _run(folder: Path, weights: bytes, head: bytes) -> Path:
    """A run-like folder: shared weights, its own head, small records."""
    (folder / "3_Dense").mkdir(parents=True)
    (folder / "model.safetensors").write_bytes(weights)
    (folder / "3_Dense" / "model.safetensors").write_bytes(head)
    (folder / "run.json").write_bytes(b"{}" + b" " * BIG)  # large, but a record: never shared
    (folder / "config.json").write_text("{}")
    return folder


def test_two_runs_with_the_same_weights_share_one_inode(tmp_home, tmp_path):
    weights = os.urandom(BIG + 17)
    a = _run(tmp_path / "a", weights, os.urandom(BIG))
    b = _run(tmp_path / "b", weights, os.urandom(BIG))
    assert share_files(a) == ShareReport(linked=0, stored=2, kept=0, saved_bytes=0)
    report = share_files(b)
    assert report == ShareReport(linked=1, stored=1, kept=0, saved_bytes=len(weights))
    blob = blobs_dir() / file_digest(a / "model.safetensors")
    assert os.stat(a / "model.safetensors").st_ino == os.stat(b / "model.safetensors").st_ino == os.stat(blob).st_ino
    assert os.stat(blob).st_nlink == 3  # the store's name and one per run
    assert (b / "model.safetensors").read_bytes() == weights
    assert os.stat(a / "run.json").st_nlink == 1 and os.stat(a / "config.json").st_nlink == 1
    assert os.stat(a / "3_Dense" / "model.safetensors").st_ino != os.stat(b / "3_Dense" / "model.safetensors").st_ino


def test_a_run_deleted_leaves_the_other_whole_and_the_last_one_frees_the_blob(tmp_home, tmp_path):
    weights = os.urandom(BIG)
    a, b = _run(tmp_path / "a", weights, os.urandom(BIG)), _run(tmp_path / "b", weights, os.urandom(BIG))
    share_files(a), share_files(b)
    blob = blobs_dir() / file_digest(b / "model.safetensors")
    a_head = blobs_dir() / file_digest(a / "3_Dense" / "model.safetensors")
    shutil.rmtree(a)
    assert sweep_blobs() == [a_head]  # a's own head goes; the weights b links stay
    assert blob.is_file() and (b / "model.safetensors").read_bytes() == weights
    shutil.rmtree(b)
    sweep_blobs()
    assert not any(blobs_dir().iterdir())


def test_a_link_the_disk_refuses_keeps_the_runs_own_copy(tmp_home, tmp_path, monkeypatch):
    weights = os.urandom(BIG)
    a = _run(tmp_path / "a", weights, os.urandom(BIG))
    share_files(a)

    def cross_device(*args, **kwargs):
        raise OSError(errno.EXDEV, "Invalid cross-device link")

    monkeypatch.setattr(os, "link", cross_device)
    b = _run(tmp_path / "b", weights, os.urandom(BIG))
    assert share_files(b) == ShareReport(kept=2)
    assert os.stat(b / "model.safetensors").st_nlink == 1 and (b / "model.safetensors").read_bytes() == weights
    assert not [p for p in b.rglob(".*")]  # no spare link name left behind


def test_a_blob_whose_bytes_differ_from_its_name_is_never_linked(tmp_home, tmp_path):
    weights = os.urandom(BIG)
    a = _run(tmp_path / "a", weights, os.urandom(BIG))
    blobs_dir().mkdir()
    (blobs_dir() / file_digest(a / "model.safetensors")).write_bytes(os.urandom(BIG))  # damaged
    assert share_files(a).kept == 1
    assert (a / "model.safetensors").read_bytes() == weights and os.stat(a / "model.safetensors").st_nlink == 1


def test_an_unusable_store_shares_nothing_and_fails_nothing(tmp_home, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    blobs_dir().symlink_to(elsewhere)
    a = _run(tmp_path / "a", os.urandom(BIG), os.urandom(BIG))
    assert share_files(a) == ShareReport(kept=2) and not any(elsewhere.iterdir())
    assert sweep_blobs() == []


def test_a_blob_swept_between_the_look_and_the_link_is_stored_again(tmp_home, tmp_path, monkeypatch):
    weights = os.urandom(BIG)
    a, b = _run(tmp_path / "a", weights, os.urandom(BIG)), _run(tmp_path / "b", weights, os.urandom(BIG))
    share_files(a)
    shutil.rmtree(a)
    real_link, swept = os.link, []

    def sweep_first(src, dst, **kwargs):
        if not swept:
            swept.append(sweep_blobs())  # the blob a's weights left goes just before b links it
        return real_link(src, dst, **kwargs)

    monkeypatch.setattr(os, "link", sweep_first)
    report = share_files(b)
    assert swept[0] and report.kept == 0
    assert os.stat(blobs_dir() / file_digest(b / "model.safetensors")).st_ino == os.stat(b / "model.safetensors").st_ino


def test_sweep_leaves_what_it_did_not_write(tmp_home):
    blobs_dir().mkdir()
    (blobs_dir() / "notes.txt").write_text("mine")
    (blobs_dir() / ("0" * 64)).mkdir()
    assert sweep_blobs() == [] and (blobs_dir() / "notes.txt").is_file()


# -- real runs ------------------------------------------------------------------------------


def _train(out: Path) -> None:
    from trainer.config import TrainConfig, validate
    from trainer.runs import train_run

    data = Path(__file__).resolve().parents[2] / "data"
    train_run(validate(TrainConfig(source=str(data / "trainer_tiny.tsv"), depth=1, shots=3, hidden=32, epochs=1,
                                   base="minilm", device="cpu")), out)


@pytest.mark.slow
def test_two_trained_runs_share_the_base_and_each_loads_alone(tmp_home, monkeypatch):
    from bioviz.models.registry import embed
    from bioviz.models.runs import list_runs

    runs = tmp_home / "runs"
    _train(runs / "run-a")
    _train(runs / "run-b")
    a, b = runs / "run-a" / "model.safetensors", runs / "run-b" / "model.safetensors"
    assert os.stat(a).st_ino == os.stat(b).st_ino and os.stat(a).st_nlink == 3
    assert os.stat(runs / "run-a" / "tokenizer.json").st_ino == os.stat(runs / "run-b" / "tokenizer.json").st_ino
    names = ["heart attack", "hives"]
    before = embed(names, str(runs / "run-b"), use_cache=False).vectors
    shutil.rmtree(runs / "run-a")
    assert [r.path.name for r in list_runs()] == ["run-b"]  # the listing sweeps: b's blobs stay
    assert os.stat(b).st_nlink == 2
    assert np.allclose(embed(names, str(runs / "run-b"), use_cache=False).vectors, before, atol=1e-6)
    from sentence_transformers import SentenceTransformer

    direct = SentenceTransformer(str(runs / "run-b"), device="cpu").encode(names, normalize_embeddings=True)
    assert np.allclose(direct, before, atol=1e-5)

    def cross_device(*args, **kwargs):
        raise OSError(errno.EXDEV, "Invalid cross-device link")

    monkeypatch.setattr(os, "link", cross_device)  # --out on another disk than the home
    _train(runs / "run-c")
    c = runs / "run-c" / "model.safetensors"
    assert os.stat(c).st_nlink == 1 and c.read_bytes() == b.read_bytes()
    assert np.allclose(embed(names, str(runs / "run-c"), use_cache=False).vectors.shape, (2, 384))
