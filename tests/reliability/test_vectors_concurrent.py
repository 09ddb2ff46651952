"""Two processes converting the same vectors file at once into one BIOVIZ_HOME (issue 41, finding 1).

Before the fix each process wrote the same ``<key>.part`` and unlinked the other's: one of them
stored (and opened) zero rows. Now a lock file per content key serialises the conversions, each
writes its own temporary file, and what is read back is checked row by row.
"""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

CHILD = Path(__file__).with_name("vectors_open_child.py")
ROOT = Path(__file__).resolve().parents[2]


def _start(file: Path, out: Path, home: Path, barrier: Path | None = None) -> subprocess.Popen:
    env = {**os.environ, "BIOVIZ_HOME": str(home), "PYTHONPATH": str(ROOT)}
    argv = [sys.executable, str(CHILD), str(file), str(out)] + ([str(barrier)] if barrier else [])
    return subprocess.Popen(argv, env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _writing(home: Path, size: int) -> bool:
    """Whether a conversion's temporary file under ``home`` holds ``size`` bytes of rows yet."""
    for part in home.glob("vectors/*.part"):
        try:
            if part.stat().st_size >= size:
                return True
        except FileNotFoundError:
            pass
    return False


def _result(process: subprocess.Popen, out: Path) -> dict:
    _, stderr = process.communicate(timeout=240)
    assert process.returncode == 0, stderr[-2000:]
    return json.loads(out.read_text())


def test_two_processes_converting_one_file_at_once_both_get_whole_unit_rows(tmp_path):
    rows, dim = 400_000, 32
    matrix = np.random.default_rng(1).normal(size=(rows, dim)).astype(np.float32)
    file = tmp_path / "big.npz"
    np.savez(file, names=np.array([f"name {i}" for i in range(rows)]), vectors=matrix)
    home = tmp_path / "home"
    home.mkdir()
    barriers = [tmp_path / "go0", tmp_path / "go1"]
    children = [_start(file, tmp_path / f"out{i}.json", home, barriers[i]) for i in range(2)]
    time.sleep(3)  # both have imported bioviz and wait at their barrier
    barriers[0].touch()
    deadline = time.monotonic() + 60
    while not _writing(home, rows * dim * 4 // 3) and time.monotonic() < deadline:
        time.sleep(0.002)
    barriers[1].touch()  # the second starts while the first is writing its rows (where the old code lost them)
    first, second = (_result(child, tmp_path / f"out{i}.json") for i, child in enumerate(children))
    for seen in (first, second):
        assert "error" not in seen, seen
        assert (seen["rows"], seen["names"], seen["zero_rows"], seen["non_unit_rows"]) == (rows, rows, 0, 0)
    assert first["checksum"] == second["checksum"]
    third = _result(_start(file, tmp_path / "out3.json", home), tmp_path / "out3.json")
    assert third["checksum"] == first["checksum"] and third["non_unit_rows"] == 0
    leftovers = [p.name for p in (home / "vectors").iterdir() if p.suffix in (".part", ".tmp")]
    assert not leftovers


def test_a_converted_copy_with_zero_rows_is_set_aside_and_converted_again(tmp_home, tmp_path, monkeypatch):
    from bioviz.models import vectors_file

    monkeypatch.setattr(vectors_file, "_OPEN", {})
    matrix = np.random.default_rng(2).normal(size=(1_000, 8)).astype(np.float32)
    np.savez(tmp_path / "v.npz", names=np.array([f"n{i}" for i in range(1_000)]), vectors=matrix)
    first = vectors_file.open_vectors(tmp_path / "v.npz")
    copy = tmp_home / "vectors" / f"{first.key}.npy"
    broken = np.array(np.load(copy))
    broken[500:] = 0  # what the race of two conversions stored, read back by a later process
    np.save(tmp_path / "broken.npy", broken)
    os.replace(tmp_path / "broken.npy", copy)  # written by another process: a new file
    del first
    monkeypatch.setattr(vectors_file, "_OPEN", {})  # another process
    again = vectors_file.open_vectors(tmp_path / "v.npz")
    np.testing.assert_allclose(np.linalg.norm(again.vectors, axis=1), 1, atol=1e-5)
    assert list((tmp_home / "vectors").glob(f"{again.key}.npy.corrupt-*"))


def test_a_copy_read_back_once_is_not_read_again_by_later_processes(tmp_home, tmp_path, monkeypatch):
    from bioviz.models import vectors_file

    monkeypatch.setattr(vectors_file, "_OPEN", {})
    np.savez(tmp_path / "v.npz", names=np.array(["a", "b"]), vectors=np.eye(2, 3, dtype=np.float32))
    checks = []
    real = vectors_file._unit_rows
    monkeypatch.setattr(vectors_file, "_unit_rows", lambda vectors: checks.append(1) or real(vectors))
    vectors_file.open_vectors(tmp_path / "v.npz")
    monkeypatch.setattr(vectors_file, "_OPEN", {})
    vectors_file.open_vectors(tmp_path / "v.npz")
    assert len(checks) == 1  # after the conversion; the later open trusts the note of that very file
