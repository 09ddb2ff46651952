"""Disk bytes a training run adds to ``BIOVIZ_HOME`` (issue 32, finding 6: every run copied the base).

    .venv/bin/python benchmarks/bench_run_disk.py [--runs 3] [--hidden 9600] [--no-share]

Trains ``--runs`` residual runs of one epoch on ``tests/data/trainer_tiny.tsv`` over ``minilm``
with seeds 0, 1, ... (so their heads differ) into a fresh ``BIOVIZ_HOME`` (``python -m trainer
train``, as a user or a job does) and prints, after each, the bytes on the disk under the home's
``runs/`` and ``blobs/``: hard links counted once (by inode), as ``du`` counts them.
``--no-share`` makes every link fail (the fallback: each run keeps its own copy, as before the
store). Also prints each large file of the first run with its size and link count.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
_NO_LINKS = ("import errno, os\n"
             "def _refuse(*a, **k):\n    raise OSError(errno.EXDEV, 'no links here')\n"
             "os.link = _refuse\n")


def disk_bytes(*folders: Path) -> int:
    """Bytes of the regular files under ``folders``, each inode once."""
    seen, total = set(), 0
    for folder in folders:
        for path in folder.rglob("*") if folder.is_dir() else ():
            info = path.lstat()
            if path.is_file() and not path.is_symlink() and (info.st_dev, info.st_ino) not in seen:
                seen.add((info.st_dev, info.st_ino))
                total += info.st_size
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--hidden", type=int, default=9600)
    parser.add_argument("--no-share", action="store_true", help="refuse every hard link (each run its own copy)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-run-disk-") as scratch:
        home = Path(scratch) / "home"
        env = {**os.environ, "BIOVIZ_HOME": str(home), "HF_HUB_OFFLINE": "1", "BIOVIZ_WARMUP": "0",
               "PYTHONPATH": str(ROOT)}
        if args.no_share:
            (Path(scratch) / "sitecustomize.py").write_text(_NO_LINKS)
            env["PYTHONPATH"] = os.pathsep.join([scratch, str(ROOT)])
        before = 0
        for i in range(args.runs):
            out = home / "runs" / f"run-{i}"
            subprocess.run([sys.executable, "-m", "trainer", "train", "--source",
                            str(ROOT / "tests" / "data" / "trainer_tiny.tsv"), "--depth", "1", "--shots", "3",
                            "--hidden", str(args.hidden), "--epochs", "1", "--base", "minilm", "--seed", str(i),
                            "--out", str(out),
                            "--json"], cwd=ROOT, env=env, check=True, capture_output=True)
            now = disk_bytes(home / "runs", home / "blobs")
            print(f"run {i + 1}: +{now - before:,} bytes (runs + blobs: {now:,})")
            before = now
        for path in sorted((home / "runs" / "run-0").rglob("*")):
            if path.is_file() and path.stat().st_size >= 100_000:
                print(f"  {path.relative_to(home / 'runs' / 'run-0')}: {path.stat().st_size:,} bytes, "
                      f"{path.stat().st_nlink} link(s)")


if __name__ == "__main__":
    main()
