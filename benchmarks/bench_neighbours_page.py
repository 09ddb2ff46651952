"""Second and later Neighbours queries on a cached level: the whole page rerun, where the time goes.

The page runs through the app's router in Streamlit's AppTest (the same script a browser's
rerun executes, without the browser), on a level whose vectors are cached for both models.
After a first query (indexes built, weights loaded), each later query is one rerun, timed:

- *image table closed* (the page now: the image-ready figure is built only while its
  expander is open);
- *image table open* (what every rerun cost before: the figure built each time);

side by side in one run, with a cProfile of one rerun (the page's own calls, cumulative).

Usage::

    BIOVIZ_HOME=/tmp/h14bench python benchmarks/bench_neighbours_page.py --source hpo --depth 1 \\
        --model-b /tmp/h14bench/runs/<run>

The default compared model is char-tfidf (nothing to train); pass a run directory to compare
with a head run as after "Open in views".
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

# The router, run with a profiler around it when PROFILE_TO names a file (AppTest runs the
# script in its own thread: the profiler must be started there).
WRAPPER = '''
import cProfile, os
_profile = cProfile.Profile() if os.environ.get("PROFILE_TO") else None
if _profile:
    _profile.enable()
try:
    exec(compile(open({app!r}).read(), {app!r}, "exec"))
finally:
    if _profile:
        _profile.disable()
        _profile.dump_stats(os.environ["PROFILE_TO"])
'''


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--source", default="hpo")
    parser.add_argument("--depth", default="1")
    parser.add_argument("--model-a", default="minilm")
    parser.add_argument("--model-b", default="char-tfidf")
    parser.add_argument("--queries", nargs="+", default=None,
                        help="names of the level to query in turn (default: a few spread over the level)")
    parser.add_argument("--repeat", type=int, default=2, help="rounds over the queries, per setting")
    args = parser.parse_args()

    from streamlit.testing.v1 import AppTest

    from bioviz.ontology import LevelSpec

    view = LevelSpec(args.source, depth=int(args.depth)).load()
    names = sorted(set(view.names))
    queries = args.queries or [names[i] for i in range(len(names) // 7, len(names), max(1, len(names) // 7))][:5]
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores; level {view.title}: "
          f"{len(view.names):,} names; models {args.model_a} vs {args.model_b}")

    with tempfile.NamedTemporaryFile("w", suffix=".py", dir=ROOT, delete=False) as handle:
        handle.write(WRAPPER.format(app=str(ROOT / "app.py")))
        wrapper = Path(handle.name)
    try:
        at = AppTest.from_file(str(wrapper), default_timeout=1800)
        at.query_params.update({"source": args.source, "depth": args.depth, "model_a": args.model_a,
                                "model_b": args.model_b, "query": queries[0]})
        at.run()
        at.switch_page("app_pages/4_Neighbours.py")
        started = time.perf_counter()
        at.run()
        assert not at.exception and not at.error, (at.exception, [e.value for e in at.error])
        print(f"first open of the page (indexes, weights): {time.perf_counter() - started:.2f} s")

        def rerun(query: str) -> float:
            started = time.perf_counter()
            at.selectbox(key="nb_query").set_value(query).run()
            assert not at.exception and not at.error, (at.exception, [e.value for e in at.error])
            return time.perf_counter() - started

        # warm-up: each query once (its query vectors are then cached, as a repeated query is)
        for query in queries:
            rerun(query)
        times: dict[str, list[float]] = {"closed": [], "open": []}
        for _ in range(args.repeat):
            for setting in ("closed", "open"):  # interleaved: the machine's load hits both alike
                at.session_state["nb_image_open"] = setting == "open"
                for query in queries[1:] + queries[:1]:
                    times[setting].append(rerun(query))
        at.session_state["nb_image_open"] = False
        profile_file = Path(tempfile.mkstemp(suffix=".prof")[1])
        os.environ["PROFILE_TO"] = str(profile_file)
        rerun(queries[1 % len(queries)])
        os.environ.pop("PROFILE_TO")
    finally:
        wrapper.unlink()

    closed, opened = statistics.median(times["closed"]), statistics.median(times["open"])
    print(f"later queries, image table closed (now): median {closed:.3f} s, worst {max(times['closed']):.3f} s "
          f"over {len(times['closed'])}")
    print(f"later queries, image table open (every rerun before): median {opened:.3f} s, "
          f"worst {max(times['open']):.3f} s")
    print(f"RATIO open/closed: {opened / closed:.2f}x")
    out = io.StringIO()
    stats = pstats.Stats(str(profile_file), stream=out)
    stats.sort_stats("cumulative").print_stats(r"(app_pages|bioviz|ui)/", 25)
    profile_file.unlink()
    print("\none rerun, the app's own calls by cumulative time:")
    print("\n".join(line for line in out.getvalue().splitlines() if line.strip())[-3000:])


if __name__ == "__main__":
    main()
