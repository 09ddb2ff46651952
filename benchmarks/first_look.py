"""The first look at a level on a fresh home: fp32 (torch) against the int8 backend, side by side.

A new user's first ``python -m bioviz neighbours TERM --source icd10cm`` spends its time encoding
the level's names (110,233 for ICD-10-CM chapters); this times exactly that, as
``python -m bioviz embed SOURCE --backend B`` on an empty ``BIOVIZ_HOME`` per backend (nothing
cached: the ontology's parse, the model's load, an int8 backend's one-off export and every name),
in one run, one after the other, and prints each wall time, which one is this machine's default
(:func:`bioviz.models.backend_choice.default_backend`: onnx-int8 on a CPU) and the ratio. Issue 33's targets:
int8/torch >= 1.8 on ICD-10 chapters; a whole ICD-10-CM first look under 4 minutes on an idle
2-core CPU under the default backend.

    python benchmarks/first_look.py --source icd10            # ICD-10 chapters (a few minutes)
    python benchmarks/first_look.py --source icd10cm --out benchmarks/results/first_look_icd10cm.json
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

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run from anywhere, without installing
BACKENDS = ("torch", "onnx-int8")


def first_look(source: str, backend: str, model: str) -> dict:
    """Wall seconds of one ``embed`` on an empty home, and what it reported."""
    with tempfile.TemporaryDirectory(prefix="bioviz-first-look-") as home:
        env = {**os.environ, "BIOVIZ_HOME": home, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
        started = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "bioviz", "embed", source, "--model", model, "--backend", backend,
                               "--quiet", "--json"], cwd=ROOT, env=env, capture_output=True, text=True, check=False)
        seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{backend}: exit {done.returncode}: {done.stderr.strip().splitlines()[-1:]}")
    report = json.loads(done.stdout)
    return {"seconds": round(seconds, 1), "names": report.get("names"), "encoded": report.get("encoded")}


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--source", default="icd10cm")
    parser.add_argument("--model", default="med-minilm")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    from bioviz.models.backend_choice import default_backend  # after sys.path is set

    os.environ.pop("BIOVIZ_BACKEND", None)  # the default a new user gets on this machine, not a pinned one
    default = default_backend()
    rows = {b: first_look(args.source, b, args.model) for b in BACKENDS}
    result = {"source": args.source, "model": args.model, "default backend": default, "backends": rows,
              "ratio int8/torch": round(rows["torch"]["seconds"] / rows["onnx-int8"]["seconds"], 2),
              "load": [round(x, 2) for x in os.getloadavg()], "cpus": os.cpu_count()}
    for backend, row in rows.items():
        mark = "  <- the default here" if backend == default else ""
        print(f"{backend:<10} {row['seconds']:>8.1f} s  ({row['names']} names){mark}")
    print(f"ratio int8/torch: {result['ratio int8/torch']}  (load {result['load']})")
    if args.out:
        args.out.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    return result


if __name__ == "__main__":
    main()
