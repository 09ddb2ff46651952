"""Type-ahead name search speed over a large level (default: every ICD-10-CM name).

Builds :class:`bioviz.search.name_search.NameSearch` once (timed), then times what a user types:
for random names of the level, every prefix of 2, 5, 8, ... characters (as typed
character by character), the name's words in reverse order, and a fragment from inside a
word (the substring tier). Prints the median, 95th percentile and worst milliseconds per
search and the share of names found at rank 1 when typed in full.

    python benchmarks/bench_name_search.py                 # ICD-10-CM, 200 names
    python benchmarks/bench_name_search.py --source hpo --names 500

Runs in a temporary BIOVIZ_HOME unless ``--home`` is given.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--source", default="icd10cm")
    parser.add_argument("--depth", type=int, default=1)
    parser.add_argument("--names", type=int, default=200, help="random names whose typing is timed")
    parser.add_argument("--limit", type=int, default=50, help="suggestions asked for (the page asks 50)")
    parser.add_argument("--home", default=None, help="BIOVIZ_HOME to use (default: a temporary directory)")
    args = parser.parse_args(argv)
    os.environ["BIOVIZ_HOME"] = args.home or tempfile.mkdtemp(prefix="bench-names-")

    from bioviz.search.name_search import NameSearch
    from bioviz.ontology import level_view, load_source

    view = level_view(load_source(args.source), depth=args.depth)
    started = time.perf_counter()
    index = NameSearch.from_view(view)
    build = time.perf_counter() - started

    rng = np.random.default_rng(0)
    picks = [view.names[i] for i in rng.choice(len(view.names), min(args.names, len(view.names)), replace=False)]
    typed = []
    for name in picks:
        typed += [name[:n] for n in range(2, len(name) + 1, 3)]
        typed.append(" ".join(reversed(name.split())))
        words = [w for w in name.split() if len(w) > 5]
        if words:
            typed.append(words[0][2:5])
    index.search(typed[0], limit=args.limit)  # warm-up
    times = []
    for text in typed:
        started = time.perf_counter()
        index.search(text, limit=args.limit)
        times.append(time.perf_counter() - started)
    ms = np.array(times) * 1000
    full = np.mean([index.search(name, limit=1)[0].casefold() == " ".join(name.split()).casefold() for name in picks])
    result = {
        "source": view.title, "names_indexed": len(index), "build_seconds": round(build, 2),
        "searches": len(typed), "limit": args.limit,
        "ms_median": round(float(np.median(ms)), 3), "ms_p95": round(float(np.percentile(ms, 95)), 3),
        "ms_max": round(float(ms.max()), 3), "full_name_at_rank_1": round(float(full), 3),
        "load_average": [round(x, 2) for x in os.getloadavg()],
    }
    print(json.dumps(result, indent=2))
    return result


if __name__ == "__main__":
    main()
