"""Open every view page of the app on a large level (AppTest, in this process) and time each.

The level is a table from ``benchmarks/large_level.py`` whose vectors were prefilled there
(``--prefill minilm char-tfidf --depth D``) into the same ``BIOVIZ_HOME``, so what is timed is
the pages' own work on the level, not encoding. Each page runs twice in a fresh session (the
first run pays the level's parsing and vector reads, shared by later pages through Streamlit's
caches; the second is a rerun); errors and exceptions are printed with the times.

    BIOVIZ_HOME=.bioviz python benchmarks/bench_large_pages.py .bioviz/large200k.tsv --depth 3
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

PAGES = {
    "Similarity matrix (class)": ("app_pages/3_Similarity_matrix.py", {"from": "class", "limit": "60"}),
    "Neighbours": ("app_pages/4_Neighbours.py", {"query": "heart attack"}),
    "Hierarchy": ("app_pages/5_Hierarchy.py", {}),
    "Code terms": ("app_pages/7_Code_terms.py", {}),
    "Evaluation": ("app_pages/6_Evaluation.py", {}),
    "Projection": ("app_pages/2_Projection.py", {}),
}


TERMS = ["heart attack", "R39.11", "shortness of breath on exertion", "broken hip", "type 2 diabetes with neuropathy",
         *(f"chronic {w} pain" for w in ("back", "neck", "knee", "hip", "pelvic")),
         *(f"acute {w}" for w in ("bronchitis", "sinusitis", "pancreatitis", "appendicitis", "otitis media"))] * 10


def open_page(page: str, query: dict, timeout: float):
    """A fresh session of the app on ``page`` with ``query`` as its URL; returns (AppTest, seconds of the page's run)."""
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=timeout)
    at.query_params.update(query)
    at.session_state["_bench_names"] = TERMS
    at.run()
    at.switch_page(page)
    started = time.perf_counter()
    at.run()
    return at, time.perf_counter() - started


def main(argv=None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("source", help="the level's table (its folder is shared as a data folder)")
    parser.add_argument("--depth", type=int, default=1)
    parser.add_argument("--pages", nargs="*", default=list(PAGES), help=f"of {', '.join(PAGES)}")
    parser.add_argument("--timeout", type=float, default=1800)
    args = parser.parse_args(argv)
    source = Path(args.source).resolve()
    os.environ["BIOVIZ_DATA_DIRS"] = str(source.parent)
    base = {"source": str(source), "depth": str(args.depth), "model_a": "minilm", "model_b": "char-tfidf"}
    results = []
    for name in args.pages:
        page, query = PAGES[name]
        at, first = open_page(page, {**base, **query}, args.timeout)
        started = time.perf_counter()
        if name == "Code terms":  # the page codes only when asked: the 15 distinct TERMS
            at.text_area(key="ct_text").set_value("\n".join(at.session_state["_bench_names"]))
            at.button[0].click()
        at.run()
        rerun = time.perf_counter() - started
        row = {"page": name, "first_s": round(first, 2), "rerun_s": round(rerun, 2),  # Code terms: coding the 15 distinct TERMS
               "errors": [e.value[:200] for e in at.error], "exceptions": [e.message[:200] for e in at.exception],
               "load": round(os.getloadavg()[0], 1)}
        results.append(row)
        print(json.dumps(row), flush=True)
    return results


if __name__ == "__main__":
    main()
