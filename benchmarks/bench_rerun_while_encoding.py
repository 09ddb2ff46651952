"""Page reruns with and without a first encoding running beside them, side by side in one run.

The background warm-up (``python -m bioviz.warmup``, the real process, at its lower CPU
priority) encodes a generated level of ``--names`` names with ``--model``, while the app's
Projection page (PCA, one model, a small cached level) is rerun in Streamlit's AppTest (the
same script a browser's rerun executes). Rounds alternate: in *idle* rounds the warm-up is
paused (SIGSTOP), in *busy* rounds it runs (SIGCONT), so both see the same machine load
from everybody else. The ratio busy/idle of the median rerun says how much a running
encoding slows the pages down.

Usage::

    python benchmarks/bench_rerun_while_encoding.py [--names 30000] [--rounds 4] [--reruns 4]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ["BIOVIZ_WARMUP"] = "0"  # the app starts no warm-up of its own: the benchmark's is the one
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
PAGE_LEVEL = ROOT / "tests" / "data" / "views_table.tsv"


def write_level(path: Path, names: int) -> Path:
    """A table level of about ``names`` names under 20 classes (nothing in any cache yet)."""
    per_class = max(1, names // 20)
    rows = ["concept_id\tname\tparent_id\tdefinition\tsynonyms", "R\tdisorder\t\t\t"]
    for c in range(20):
        rows.append(f"C{c}\tgroup {c} condition\tR\t\t")
        rows += [f"C{c}_{i}\tsubtype {i} of group {c} condition, {path.stem}\tC{c}\t\t" for i in range(per_class)]
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return path


def start_warm_up(level: Path, model: str, home: Path) -> subprocess.Popen:
    from bioviz.ontology import LevelSpec

    levels = json.dumps([LevelSpec(str(level), depth=1).to_config()])
    env = {**os.environ, "BIOVIZ_HOME": str(home), "PYTHONPATH": str(ROOT)}
    return subprocess.Popen([sys.executable, "-m", "bioviz.warmup", "--model", model, "--levels", levels],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def wait_encoding(home: Path, timeout_s: float = 600) -> None:
    """Until the warm-up has loaded its level and its weights and encodes names."""
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        try:
            state = json.loads((home / "warmup.json").read_text())
        except (OSError, ValueError):
            state = {}
        if state.get("encoded"):
            return
        time.sleep(0.5)
    raise SystemExit("the warm-up never started encoding")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--names", type=int, default=30_000, help="names of the level the warm-up encodes")
    parser.add_argument("--model", default="minilm")
    parser.add_argument("--rounds", type=int, default=4, help="idle/busy pairs of rounds")
    parser.add_argument("--reruns", type=int, default=4, help="page reruns per round")
    args = parser.parse_args()
    home = Path(tempfile.mkdtemp(prefix="bench-rerun-"))
    os.environ["BIOVIZ_HOME"] = str(home)
    os.environ["BIOVIZ_DATA_DIRS"] = str(PAGE_LEVEL.parent)
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=900)
    at.query_params.update({"source": str(PAGE_LEVEL), "depth": "1", "model_a": args.model, "one": "1",
                            "method": "pca"})
    at.run()
    at.switch_page("app_pages/2_Projection.py").run()
    assert not at.exception and not at.error, (at.exception, [e.value for e in at.error])
    warm_up = start_warm_up(write_level(home / "encoded.tsv", args.names), args.model, home)
    times: dict[str, list[float]] = {"idle": [], "busy": []}
    try:
        wait_encoding(home)
        for _ in range(args.rounds):
            for setting in ("idle", "busy"):
                warm_up.send_signal(signal.SIGSTOP if setting == "idle" else signal.SIGCONT)
                time.sleep(1.0)
                for _ in range(args.reruns):
                    started = time.perf_counter()
                    at.run()
                    times[setting].append(time.perf_counter() - started)
                    assert not at.exception, at.exception
        state = json.loads((home / "warmup.json").read_text())
    finally:
        warm_up.send_signal(signal.SIGCONT)
        warm_up.terminate()
        warm_up.wait()
    idle, busy = statistics.median(times["idle"]), statistics.median(times["busy"])
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores; the warm-up encoded "
          f"{state.get('encoded', 0):,} names of {args.names:,} with {args.model} meanwhile "
          f"({state.get('rate')} names/s)")
    print(f"Projection rerun, nothing encoding: median {idle:.3f} s, worst {max(times['idle']):.3f} s "
          f"over {len(times['idle'])}")
    print(f"Projection rerun, the warm-up encoding: median {busy:.3f} s, worst {max(times['busy']):.3f} s "
          f"over {len(times['busy'])}")
    print(f"RATIO busy/idle: {busy / idle:.2f}x")


if __name__ == "__main__":
    main()
