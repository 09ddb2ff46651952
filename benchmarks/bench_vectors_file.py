"""Opening a large vectors file (issue 34): conversion, memory-mapped reopening, lookups, peak memory.

Writes a seeded synthetic Parquet file of ``--names`` names x ``--dim`` float32 (streamed one row
group at a time, so writing it never holds it whole), then, each in a fresh process so peak RSS is
the step's own:

- **first open**: the file read chunk by chunk, checked and written as unit rows into
  ``BIOVIZ_HOME/vectors`` (:func:`bioviz.models.vectors_file.open_vectors`); peak RSS next to the
  matrix's size says whether a second copy was held;
- **reopen**: the converted copy memory-mapped (what every later process does);
- **lookup**: the rows of 20,000 level names (exact, then normalised), and their vectors gathered;
- **stand-in**: a query the file lacks answered from its nearest name (the lexical index over the
  file's names, built once per process).

Load averages are printed next to each figure (the machine may be shared).

    nice -n 10 python benchmarks/bench_vectors_file.py --names 1000000 --dim 384
    python benchmarks/bench_vectors_file.py --names 200000 --dim 384 --out benchmarks/results/vectors_file.json
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

ROW_GROUP = 100_000


def write_file(path: Path, names: int, dim: int) -> float:
    """A seeded Parquet vectors file (``name``, fixed-size ``vector``), one row group at a time; seconds taken."""
    import pyarrow as pa  # imported here: only writing the synthetic file needs it
    import pyarrow.parquet as pq

    started = time.perf_counter()
    rng = np.random.default_rng(0)
    schema = pa.schema([("name", pa.string()), ("vector", pa.list_(pa.float32(), dim))])
    with pq.ParquetWriter(path, schema) as writer:
        for start in range(0, names, ROW_GROUP):
            rows = min(ROW_GROUP, names - start)
            block = rng.normal(size=(rows, dim)).astype(np.float32)
            column = pa.FixedSizeListArray.from_arrays(pa.array(block.reshape(-1)), dim)
            label = [f"synthetic concept {i} of theme {i % 997}" for i in range(start, start + rows)]
            writer.write_table(pa.table({"name": label, "vector": column}, schema=schema))
    return time.perf_counter() - started


def step(kind: str, path: Path, names: int) -> dict:
    """One measured step in this process (called by :func:`measured` in a fresh one)."""
    from bioviz.models.model_spec import ModelSpec
    from bioviz.models.vectors_file import open_vectors

    started = time.perf_counter()
    file = open_vectors(path)
    out = {"open_s": round(time.perf_counter() - started, 3), "memmap": isinstance(file.vectors, np.memmap)}
    if kind == "lookup":
        wanted = [f"Synthetic  Concept {i} of theme {i % 997}" for i in range(0, names, max(1, names // 20_000))]
        started = time.perf_counter()
        rows = file.rows(wanted)
        out["lookup_s"] = round(time.perf_counter() - started, 3)
        started = time.perf_counter()
        gathered = np.asarray(file.vectors[rows])
        out.update(gather_s=round(time.perf_counter() - started, 3), looked_up=len(wanted),
                   found=int((rows >= 0).sum()), gathered_mb=round(gathered.nbytes / 2**20, 1))
    if kind == "stand-in":
        from bioviz.search.vectors_query import query_answer

        model = ModelSpec.parse(str(path))
        started = time.perf_counter()
        answer = query_answer("synthetic concept 12345 of theme", model)
        out.update(first_stand_in_s=round(time.perf_counter() - started, 3), note=answer.note)
        started = time.perf_counter()
        query_answer("concept 777 of theme 3x", model)
        out["second_stand_in_s"] = round(time.perf_counter() - started, 3)
    out["peak_rss_mb"] = peak_rss_mb()
    return out


def peak_rss_mb() -> float:
    """This process's peak resident memory: ``VmHWM`` (ru_maxrss keeps the parent's peak across fork and exec)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        pass
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def measured(kind: str, path: Path, names: int, home: Path) -> dict:
    """:func:`step` in a fresh process (its own peak RSS), with the load average before it."""
    load = [round(x, 1) for x in os.getloadavg()]
    env = {**os.environ, "BIOVIZ_HOME": str(home), "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, __file__, "--step", kind, "--file", str(path), "--names", str(names)],
                          env=env, capture_output=True, text=True, check=True)
    return {"step": kind, "load_before": load, **json.loads(proc.stdout.strip().splitlines()[-1])}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--names", type=int, default=1_000_000)
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--out", type=Path, default=None, help="also write the results as JSON")
    parser.add_argument("--step", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--file", type=Path, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.step:
        print(json.dumps(step(args.step, args.file, args.names)))
        return
    with tempfile.TemporaryDirectory(prefix="bioviz-vectors-bench-") as folder:
        folder = Path(folder)
        path, home = folder / "synthetic.parquet", folder / "home"
        written = write_file(path, args.names, args.dim)
        result = {"names": args.names, "dim": args.dim, "matrix_mb": round(args.names * args.dim * 4 / 2**20, 1),
                  "parquet_mb": round(path.stat().st_size / 2**20, 1), "write_s": round(written, 2),
                  "steps": [measured(kind, path, args.names, home) for kind in ("first open", "reopen", "lookup",
                                                                                "stand-in")]}
    text = json.dumps(result, indent=1)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
