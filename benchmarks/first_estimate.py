"""Time from Enter to the first estimate on Neighbours, for a level with no stored vectors.

Before a first encoding the page says how long it will take (``prepare_vectors`` in
``ui/cache.py``): it cuts the level (``view(spec)``), loads the encoder (``load_encoder``),
looks for a stored block (``VectorCache().has_block``) and asks ``estimate_encoding``.
Each step is timed here as the page runs them, library-level (no Streamlit), in a fresh
process: the first time in this process (what Enter costs on a server that has not used the
model yet), then the median of three more passes. On a level above 60,000 names the page also
builds its type-ahead name search on the first Enter, before the estimate: timed too.

    python benchmarks/first_estimate.py                    # HPO level 1, minilm, a fresh temporary home
    python benchmarks/first_estimate.py --source icd10cm --home /tmp/fe   # keep the home (its parsed sources)

The home's vector cache holds no vectors for the level, so every name is missing; the parsed
source is prepared before the clock starts unless ``--cold-source`` (a first parse is the
home page's cost, not Neighbours').
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
MAX_BROWSER_NAMES = 60_000  # ui.cache's: above it the Neighbours page searches names as they are typed


def steps(source: str, depth: int, model: str) -> list[tuple[str, float]]:
    """``[(step, seconds), ...]`` of the page's path to the estimate, in this process."""
    timings = []

    def timed(name, fn):
        started = time.perf_counter()
        value = fn()
        timings.append((name, time.perf_counter() - started))
        return value

    from bioviz.ontology import LevelSpec

    spec = LevelSpec(source, depth=depth)
    view = timed("view(spec)", spec.load)
    from bioviz.models.encoding_estimate import estimate_encoding
    from bioviz.models.registry import load_encoder
    from bioviz.models.vector_cache import VectorCache
    from bioviz.search.name_search import NameSearch

    if len(view.names) > MAX_BROWSER_NAMES:  # the page's type-ahead, built on the first Enter on a large level
        timed("name_search", lambda: NameSearch.from_view(view))
    encoder = timed("load_encoder", lambda: load_encoder(model))
    timed("has_block", lambda: VectorCache().has_block(encoder.fingerprint, view.names))
    estimate = timed("estimate_encoding", lambda: estimate_encoding(encoder, view.names))
    timings.append(("missing", estimate.missing))
    return timings


def child(args) -> None:
    """Print the first pass's steps and the median of three more, as JSON."""
    first = steps(args.source, args.depth, args.model)
    later = [steps(args.source, args.depth, args.model) for _ in range(3)]
    again = [(name, statistics.median(run[i][1] for run in later)) for i, (name, _) in enumerate(first)]
    print(json.dumps({"first": first, "again": again}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--source", default="hpo")
    parser.add_argument("--depth", type=int, default=1)
    parser.add_argument("--model", default="minilm")
    parser.add_argument("--home", help="BIOVIZ_HOME to use (default: a fresh temporary one)")
    parser.add_argument("--cold-source", action="store_true", help="time the source's first parse too")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child(args)
    with tempfile.TemporaryDirectory(prefix="first-estimate-") as fresh:
        report(args, Path(args.home or fresh))


def report(args, home: Path) -> None:
    """Run the timed steps in a fresh process with ``home`` as BIOVIZ_HOME and print them."""
    env = {**os.environ, "BIOVIZ_HOME": str(home), "PYTHONPATH": str(ROOT)}
    if not args.cold_source:  # the parsed source cached, as after the home page
        subprocess.run([sys.executable, "-c", f"from bioviz.ontology import LevelSpec; "
                        f"LevelSpec({args.source!r}, depth={args.depth}).load()"], env=env, check=True)
    out = subprocess.run([sys.executable, __file__, "--child", "--source", args.source, "--depth", str(args.depth),
                          "--model", args.model], env=env, check=True, capture_output=True, text=True).stdout
    result = json.loads(out.strip().splitlines()[-1])
    print(f"{args.source} depth {args.depth}, {args.model}" + (f", home {home}" if args.home else ""))
    for name, key in (("first in a process", "first"), ("again (median of 3)", "again")):
        rows = dict(result[key])
        missing = rows.pop("missing")
        print(f"  {name}: " + " · ".join(f"{step} {seconds:.2f} s" for step, seconds in rows.items())
              + f"  ({missing:,.0f} names missing)")
        # in the app the level's view is cached before Enter: Enter pays for the rest
        print(f"    Enter -> estimate (view cached): {sum(rows.values()) - rows['view(spec)']:.2f} s")

if __name__ == "__main__":
    main()
