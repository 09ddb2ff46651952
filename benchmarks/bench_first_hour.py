"""The first hour's worst waits, library side: a head run's first query, and a repeated Neighbours query.

Side by side in one process, on a level whose names the base model (minilm) has encoded
before (the first run of this script encodes them: that is the precondition, timed too):

1. **A head run's first query** ("Open in views", then Neighbours): the run's vectors for every
   name of the level
   - *old path*: the run's whole sentence-transformers model (transformer + head), as every
     run was encoded before (``HeadRunEncoder.encode_full``); on ``--old-names`` names when
     given (the rate is then extrapolated to the level, and said so);
   - *new path*: the base model's cached vectors put through the head
     (``HeadRunEncoder``), through ``level_space`` as the page calls it: cache writes included;
   then the index over the names and the first ranking (baseline and run side by side);
   - *job-cached path*: a second run of the same size whose level the "training job" has
     encoded as its last step (``trainer.runs.encode_level``, after the run is published):
     "Open in views" then reads one cached block; the job's extra seconds are printed too.
2. **The second open and later queries**: the run's vectors again (now one cached block), the
   index, and a new query as a page rerun does it (resolve the text, the query's vectors, two
   rankings with ranks under the other model, the cache statistics the sidebar shows).
3. **The cache statistics**: ``VectorCache.stats()`` (stored counts) against the ``GROUP BY``
   count over every vector it replaced.

The head is a random residual head of the trained size (``--hidden``, 9,600 by default as
in the fewshot paper) mixed with its input as a trained run's is: timings do not depend on
its weights. The run is written with ``trainer.export.save_head_model``, exactly as a job
writes one, under ``BIOVIZ_HOME/runs`` (a new one each time, so its vectors are never cached).

Usage::

    BIOVIZ_HOME=/tmp/h14bench python benchmarks/bench_first_hour.py --source hpo --depth 1 --old-names 3000
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sqlite3
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

from bioviz.models import vector_cache  # noqa: E402
from bioviz.models.encoders import HeadRunEncoder  # noqa: E402
from bioviz.models.model_spec import ModelSpec  # noqa: E402
from bioviz.models.registry import load_encoder
from bioviz.models.runs import runs_dir, set_run_name  # noqa: E402
from bioviz.ontology import LevelSpec  # noqa: E402
from bioviz.search.index import NeighbourIndex  # noqa: E402
from bioviz.search.neighbours import (concept_card, level_space, query_vector, rank_neighbours,  # noqa: E402
                                      resolve_query)
from trainer.runs import encode_level  # noqa: E402


class Timings:
    """Seconds spent in a few library calls (wrapped while the benchmark runs)."""

    def __init__(self) -> None:
        self.spent: dict[str, float] = {}

    @contextlib.contextmanager
    def wrap(self, owner, name: str, label: str):
        original = getattr(owner, name)

        def timed(*args, **kwargs):
            started = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                self.spent[label] = self.spent.get(label, 0.0) + time.perf_counter() - started

        setattr(owner, name, timed)
        try:
            yield
        finally:
            setattr(owner, name, original)

    def take(self) -> dict[str, float]:
        spent, self.spent = self.spent, {}
        return spent


def timed(call, *args, **kwargs):
    started = time.perf_counter()
    value = call(*args, **kwargs)
    return value, time.perf_counter() - started


def make_head_run(hidden: int, level: LevelSpec) -> Path:
    """A residual head run on minilm, written as a training job writes it (random weights)."""
    import torch

    from trainer.encoders import BaseMix, ResidualEncoder
    from trainer.export import save_head_model

    # a fresh random head each time: the same weights would be the same fingerprint, already cached
    torch.manual_seed(int.from_bytes(os.urandom(4), "little"))
    head = BaseMix(ResidualEncoder(384, hidden, 0.5), 0.3, 1.0).eval()
    run_id = time.strftime("%Y%m%d-%H%M%S-") + os.urandom(2).hex()
    path = runs_dir() / run_id
    save_head_model(head, ModelSpec.parse("minilm"), path)
    config = {"encoder": "residual", **level.to_config(), "shots": 15, "hidden": hidden, "base": "minilm",
              "init": None, "input_model": "minilm", "base_fingerprint": load_encoder("minilm").fingerprint}
    (path / "run.json").write_text(json.dumps({"run_id": run_id, "config": config}), encoding="utf-8")
    return path


def group_by_counts(path: Path) -> dict:
    """The statistics query the cache ran before counts were stored: every vector counted."""
    with sqlite3.connect(path) as conn:
        return dict(conn.execute("SELECT model, COUNT(*) FROM vectors GROUP BY model"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--source", default="hpo")
    parser.add_argument("--depth", type=int, default=1)
    parser.add_argument("--root", default=None)
    parser.add_argument("--hidden", type=int, default=9600, help="the head's hidden width (fewshot: 9,600)")
    parser.add_argument("--old-names", type=int, default=0,
                        help="encode only this many names on the old path and extrapolate (0: the whole level)")
    parser.add_argument("--query", default="HP:0001250", help="the first query (a code resolves to its concept)")
    parser.add_argument("--later", nargs="+", default=["seizures in infancy", "HP:0000365", "short stature",
                                                       "abnormal heart rhythm", "hearing impairment"],
                        help="the later queries (reruns of the page)")
    parser.add_argument("-k", type=int, default=10)
    args = parser.parse_args()
    import torch

    print(f"BIOVIZ_HOME={os.environ.get('BIOVIZ_HOME', '.bioviz')}  torch threads={torch.get_num_threads()}  "
          f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    level = LevelSpec(args.source, root=args.root, depth=args.depth)
    (ontology, view), load_s = timed(lambda: (lambda o: (o, level.load(o)))(level.ontology()))
    names = list(view.names)
    print(f"level {view.title}: {len(names):,} names (loaded in {load_s:.1f} s)")

    # -- precondition: the base model's vectors of the level are cached -------------------------
    (_, base_info), base_s = timed(level_space, view, "minilm")
    print(f"base vectors (minilm): {base_info['cache_hits']:,} cached, {base_info['encoded']:,} encoded "
          f"in {base_s:.1f} s")

    run, make_s = timed(make_head_run, args.hidden, level)
    encoder = load_encoder(str(run))
    assert isinstance(encoder, HeadRunEncoder), encoder
    assert not vector_cache.VectorCache().get(encoder.fingerprint, names[:50]), "the run's vectors are cached"
    print(f"head run {encoder.label} (hidden {args.hidden}) written in {make_s:.1f} s")

    # -- 1. the first query with the head run -------------------------------------------------------
    sample = names
    if args.old_names and args.old_names < len(names):  # every n-th name: the level's mix of name lengths
        sample = names[:: max(1, len(names) // args.old_names)][: args.old_names]
    _, load_weights_s = timed(lambda: encoder.model)  # the old path loads the run's whole model first
    old_vectors, old_s = timed(encoder.encode_full, sample)
    old_rate = len(sample) / old_s
    old_level_s = load_weights_s + len(names) / old_rate
    extrapolated = len(sample) < len(names)

    def first_answer(run_path: Path, parts: Timings | None = None) -> dict:
        """What the Neighbours page does on its first query with the run: vectors, indexes, rankings."""
        started = time.perf_counter()
        space_run, info_run = level_space(view, str(run_path))
        out = {"vectors_s": time.perf_counter() - started, "info": info_run, "space": space_run,
               "parts": parts.take() if parts else {}}
        space_base, _ = level_space(view, "minilm")
        out["index_base"], out["index_base_s"] = timed(NeighbourIndex.from_view, space_base, view)
        out["index_run"], out["index_run_s"] = timed(NeighbourIndex.from_view, space_run, view)
        out["query"], out["resolve_s"] = timed(resolve_query, args.query, view, ontology)
        text = out["query"].text
        (qv_base, qv_run), out["qv_s"] = timed(lambda: (query_vector(text, "minilm"), query_vector(text, str(run_path))))
        _, out["rank_s"] = timed(lambda: (
            rank_neighbours(out["index_base"], qv_base, out["query"], k=args.k, other=(out["index_run"], qv_run)),
            rank_neighbours(out["index_run"], qv_run, out["query"], k=args.k, other=(out["index_base"], qv_base))))
        out["total_s"] = time.perf_counter() - started
        return out

    timings = Timings()
    cache = vector_cache.VectorCache
    with timings.wrap(cache, "put", "cache write (SQLite rows)"), \
            timings.wrap(cache, "put_block", "cache write (block)"), \
            timings.wrap(cache, "get", "cache lookup (SQLite rows)"), \
            timings.wrap(cache, "get_block", "cache read (blocks)"), \
            timings.wrap(encoder.chain, "apply", "head (matrix products)"):
        head = first_answer(run, timings)
    # The training job's last step (trainer.runs.encode_level, after the rename): a second run of
    # the same size, its level encoded by the "job", then opened in the views.
    run_job, _ = timed(make_head_run, args.hidden, level)
    _, job_s = timed(encode_level, run_job, names)
    job = first_answer(run_job)
    index_base, index_run, query = head["index_base"], head["index_run"], head["query"]
    space_run, new_first_s = head["space"], head["total_s"]
    rows = {n: i for i, n in enumerate(names)}
    same = np.abs(space_run.vectors[[rows[n] for n in sample]] - old_vectors).max()

    print("\n== 1. first Neighbours query with the head run (\"Open in views\") ==")
    print(f"old path: the run's whole model on {len(sample):,} names: {old_s:.1f} s ({old_rate:.0f} names/s)"
          f" + loading its weights {load_weights_s:.1f} s")
    print(f"          -> the level's {len(names):,} names: {old_level_s:.0f} s"
          + (" (extrapolated from the sample's rate)" if extrapolated else " (measured)"))
    for title, got in (("head path (vectors not cached)", head), ("job-cached (trainer encodes at publish)", job)):
        print(f"{title}: level_space(run) {got['vectors_s']:.2f} s ({got['info']['encoded']:,} encoded, "
              f"{got['info']['cache_hits']:,} cached), both indexes {got['index_base_s'] + got['index_run_s']:.2f} s, "
              f"resolve {got['resolve_s'] * 1000:.1f} ms ({args.query!r} -> {got['query'].text!r}), "
              f"query vectors {got['qv_s']:.2f} s, rankings {got['rank_s'] * 1000:.1f} ms")
        for label, seconds in sorted(got["parts"].items(), key=lambda kv: -kv[1]):
            print(f"          {label:<28} {seconds:7.2f} s")
        print(f"          first answer in {got['total_s']:.2f} s")
    print(f"the job's extra last step (encode_level: head through the cached minilm vectors, stored): {job_s:.2f} s")
    print(f"max |head path - old| over the sample: {same:.2e}")
    print(f"RATIO old/head path (first answer): {old_level_s / new_first_s:.1f}x; "
          f"old/job-cached: {old_level_s / job['total_s']:.1f}x; head path/job-cached: "
          f"{new_first_s / job['total_s']:.1f}x")

    # -- 2. second open and later queries ------------------------------------------------------------
    (space_again, info_again), again_s = timed(level_space, view, str(run))
    index_again, index_again_s = timed(NeighbourIndex.from_view, space_again, view)
    query_vector("warm-up: load minilm's weights for free text", "minilm")  # once per app process
    from bioviz.figures.neighbours import neighbour_table_figure  # the page's tables, built on every rerun
    from bioviz.figures.ranking_table import ranking_table

    reruns, drawn = [], []
    stats_new, stats_old = [], []
    for text in args.later:
        started = time.perf_counter()
        info = resolve_query(text, view, ontology)
        va, vb = query_vector(info.text, "minilm"), query_vector(info.text, str(run))
        pair = (rank_neighbours(index_base, va, info, k=args.k, other=(index_again, vb)),
                rank_neighbours(index_again, vb, info, k=args.k, other=(index_base, va)))
        if info.concept_ids:
            concept_card(ontology, info.concept_ids[0])
        cache_now = vector_cache.VectorCache()
        cache_now.summary()  # the sidebar's caption: counts and bytes on disk
        reruns.append(time.perf_counter() - started)
        stats_new.append(timed(cache_now.stats)[1])
        stats_old.append(timed(group_by_counts, cache_now.path)[1])
        started = time.perf_counter()
        for rows in pair:
            ranking_table(rows)
        neighbour_table_figure(info.text, [("minilm", pair[0]), (encoder.label, pair[1])], view.title, args.k,
                               query_class=info.class_label)
        drawn.append(time.perf_counter() - started)
    print("\n== 2. the second open of the level and later queries ==")
    print(f"second open: the run's vectors {again_s:.2f} s ({info_again['cache_hits']:,} cached), "
          f"index {index_again_s:.2f} s")
    print(f"later queries (resolve, 2 query vectors, 2 rankings, concept card, cache summary): "
          f"median {statistics.median(reruns) * 1000:.0f} ms, worst {max(reruns) * 1000:.0f} ms over {len(reruns)}")
    print(f"the page's two tables and the image-ready table figure (bioviz.figures): "
          f"median {statistics.median(drawn) * 1000:.0f} ms, worst {max(drawn) * 1000:.0f} ms")

    # -- 3. the sidebar's cache statistics ---------------------------------------------------------------
    total = sum(group_by_counts(vector_cache.VectorCache().path).values())
    print("\n== 3. cache statistics on every rerun ==")
    print(f"{total:,} vectors cached: stats() from stored counts {statistics.median(stats_new) * 1000:.1f} ms vs "
          f"the GROUP BY it replaced {statistics.median(stats_old) * 1000:.1f} ms "
          f"(RATIO {statistics.median(stats_old) / statistics.median(stats_new):.1f}x)")

    for made in (run, run_job):
        set_run_name(made, "benchmark head (random weights)")  # so a person browsing the home knows what it is


if __name__ == "__main__":
    main()
