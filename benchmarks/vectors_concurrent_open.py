"""Two processes opening one unconverted vectors file at once (issue 41, finding 1).

Builds a seeded ``.npz`` of ``--names`` names x ``--dim`` float32 in a temporary folder, then
starts two processes ``--gap`` seconds apart (2.5 s: the second arrives while the first is
writing rows, where the earlier code lost them), each opening the file in one fresh
``BIOVIZ_HOME``; then a third, fresh process opens it again. For each: rows, rows that are zero
or not of unit norm, seconds of the open (the second's includes waiting for the first's lock),
and a checksum of rows and names: equal checksums are the same vectors. Load averages are printed
(the machine may be shared).

    python benchmarks/vectors_concurrent_open.py --out benchmarks/results/vectors_concurrent_open.json
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")


# The same child as tests/reliability/test_vectors_concurrent.py: opens the file, writes rows, checks and checksum
CHILD = ROOT / "tests" / "reliability" / "vectors_open_child.py"


def _start(file: Path, out: Path, home: Path) -> subprocess.Popen:
    env = {**os.environ, "BIOVIZ_HOME": str(home), "PYTHONPATH": str(ROOT)}
    return subprocess.Popen([sys.executable, str(CHILD), str(file), str(out)], env=env, cwd=ROOT)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--names", type=int, default=1_000_000)
    parser.add_argument("--dim", type=int, default=64)
    parser.add_argument("--gap", type=float, default=2.5, help="seconds between the two processes' starts")
    parser.add_argument("--out", type=Path, help="write the figures as JSON here too")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bioviz-concurrent-") as folder:
        folder = Path(folder)
        matrix = np.random.default_rng(0).normal(size=(args.names, args.dim)).astype(np.float32)
        file = folder / "big.npz"
        np.savez(file, names=np.array([f"name {i}" for i in range(args.names)]), vectors=matrix)
        del matrix
        home = folder / "home"
        home.mkdir()
        outs = [folder / f"open{i}.json" for i in range(3)]
        first = _start(file, outs[0], home)
        time.sleep(args.gap)
        second = _start(file, outs[1], home)
        first.wait(), second.wait()
        third = _start(file, outs[2], home)  # later and fresh: reads the stored copy
        third.wait()
        codes = [first.returncode, second.returncode, third.returncode]
        results = [json.loads(out.read_text()) if out.is_file() else {"crashed": {"exit": code}}
                   for out, code in zip(outs, codes)]
        leftovers = sorted(p.name for p in (home / "vectors").iterdir() if p.suffix in (".part", ".tmp"))
    report = {"names": args.names, "dim": args.dim, "gap_s": args.gap, "load_average": os.getloadavg(),
              "first": results[0], "second": results[1], "later_fresh": results[2],
              "same_rows_everywhere": len({r.get("checksum") for r in results}) == 1,
              "temporary_files_left": leftovers}
    for label in ("first", "second", "later_fresh"):
        print(f"{label:12} {report[label]}")
    print(f"same rows in all three: {report['same_rows_everywhere']}; temporary files left: {leftovers}")
    if args.out:
        args.out.write_text(json.dumps(report, indent=1) + "\n")


if __name__ == "__main__":
    main()
