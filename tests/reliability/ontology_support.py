"""Helpers for the ontology reliability tests: hostile graph shapes as tables, and a limited CLI run."""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def write_table(path: Path, rows) -> Path:
    """Write ``(concept_id, parent ids)`` rows as a concept table; every concept is named after its id."""
    with path.open("w", encoding="utf-8") as handle:
        handle.write("concept_id\tname\tparent_id\n")
        for concept, parents in rows:
            handle.write(f"{concept}\tname of {concept}\t{'|'.join(parents)}\n")
    return path


def ladder(n: int):
    """Node ``i`` under ``i-1`` and ``i-2``: every second edge is a shortcut (the issue's 275 KB file at 8,000)."""
    return ((f"N{i}", [f"N{j}" for j in (i - 1, i - 2) if j >= 0]) for i in range(n))


def chain(n: int):
    """One path of ``n`` concepts."""
    return ((f"N{i}", [f"N{i - 1}"] if i else []) for i in range(n))


def cycle(n: int):
    """A root above a cycle of ``n`` concepts (``N0`` is under the root and under the last one)."""
    yield "R", []
    yield "N0", ["R", f"N{n - 1}"]
    yield from ((f"N{i}", [f"N{i - 1}"]) for i in range(1, n))


def dense_layers(width: int, layers: int):
    """A root, ``width`` classes each with a private leaf, then ``layers`` layers each under all of the one above."""
    yield "R", []
    classes = [f"C{a}" for a in range(width)]
    yield from ((c, ["R"]) for c in classes)
    yield from ((f"P{a}", [c]) for a, c in enumerate(classes))
    above = classes
    for layer in range(layers):
        current = [f"L{layer}_{b}" for b in range(width)]
        yield from ((node, above) for node in current)
        above = current


def run_limited(argv: list[str], home: Path, memory_mb: int, seconds: float, env: dict | None = None,
                file_blocks: int | None = None) -> subprocess.CompletedProcess:
    """``python -m bioviz ARGV`` under an address-space limit (``ulimit -v``) and a wall-clock limit.

    The whole process group is killed on timeout (the load's own worker included), so a
    regression fails the test instead of hanging the suite. ``file_blocks`` adds ``ulimit -f``
    (in bytes).
    """

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (memory_mb * 2**20, memory_mb * 2**20))
        if file_blocks is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (file_blocks, file_blocks))

    environment = {"PATH": os.environ.get("PATH", ""), "BIOVIZ_HOME": str(home), "PYTHONPATH": str(ROOT),
                   "OPENBLAS_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1",
                   # no .pyc writes: under ulimit -f CPython can install a truncated one for every later run
                   "PYTHONDONTWRITEBYTECODE": "1", **(env or {})}
    process = subprocess.Popen([sys.executable, "-m", "bioviz", *argv], cwd=ROOT, env=environment, text=True,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, preexec_fn=limit,
                               start_new_session=True)
    try:
        out, err = process.communicate(timeout=seconds)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.communicate()
        raise AssertionError(f"python -m bioviz {' '.join(argv[:2])} took longer than {seconds} s") from None
    return subprocess.CompletedProcess(argv, process.returncode, out, err)
