"""``python -m bioviz project SOURCE --model MODEL [--root ID] --depth K --method umap|pca --json``.

Computes the 2-D projection of a level the Projection page shows (the same class-stratified
point cap, settings and disk cache under ``BIOVIZ_HOME/projections``), or reads it back from
that cache, and reports how many points, how long it took and whether it came from the cache.
A view above ``bioviz.views.fast_umap.LANDMARK_THRESHOLD`` points takes the landmark UMAP path,
with a progress bar and the time left on stderr (``--quiet`` turns it off).
"""

from __future__ import annotations

import time

from bioviz.cli.common import add_json, add_level_options, covered_level, model_argument
from bioviz.cli.embed_backend import add_backend_option
from bioviz.cli.progress import progress_bar
from bioviz.search.neighbours import level_space
from bioviz.views.projection import METHODS, ProjectionParams, cache_path, project, stratified_sample

_DEFAULTS = ProjectionParams()


def register(subparsers) -> None:
    """Add the ``project`` sub-command."""
    parser = subparsers.add_parser("project", help="2-D projection (UMAP or PCA) of a concept level (cached on disk)")
    parser.add_argument("source", help="icd10, icd10cm, hpo, or a path (.obo, UMLS META dir, .tsv/.csv)")
    parser.add_argument("--model", default="minilm", type=model_argument,
                        help="minilm, char-tfidf, a sentence-transformers directory or hub id, or a run directory")
    add_level_options(parser)
    parser.add_argument("--method", choices=METHODS, default="umap", help="umap (cosine) or pca")
    parser.add_argument("--max-points", type=int, default=_DEFAULTS.max_points,
                        help="point cap: larger levels are sampled per class, as on the Projection page")
    parser.add_argument("--n-neighbors", type=int, default=_DEFAULTS.n_neighbors, help="UMAP neighbourhood size")
    parser.add_argument("--min-dist", type=float, default=_DEFAULTS.min_dist, help="UMAP minimum distance")
    parser.add_argument("--seed", type=int, default=_DEFAULTS.seed, help="seed of the sample and of UMAP")
    parser.add_argument("--quiet", action="store_true", help="no progress bar on stderr")
    add_backend_option(parser)
    add_json(parser)
    parser.set_defaults(handler=run)


def run(args) -> dict:
    """Project the level view's names (or read the projection from the cache)."""
    params = ProjectionParams(method=args.method, n_neighbors=args.n_neighbors, min_dist=args.min_dist,
                              max_points=args.max_points, seed=args.seed)  # BiovizError on bad settings
    started = time.perf_counter()
    view, coverage = covered_level(args, [args.model])
    with progress_bar(f"encoding ({args.model.spec})", disable=args.quiet) as progress:
        space, info = level_space(view, args.model, progress=progress)
    rows = stratified_sample(view.labels, params.max_points, params.seed)
    cached = cache_path(space, rows, params).exists()
    projected = time.perf_counter()
    with progress_bar(f"{params.method} of {len(rows):,} names", unit="step", disable=args.quiet) as step:
        # the landmark path of a large view reports its steps (with the time left) on stderr
        coords = project(space, params, rows=rows, labels=view.labels,
                         progress=lambda done, total, message: step(done, total))
    return {"source": view.source, "level": view.title, "model": space.model_id, "method": params.method,
            "names": len(view.names), "points": int(len(coords)), "n_components": int(coords.shape[1]),
            "from_cache": cached, "seconds": round(time.perf_counter() - started, 3),
            "projection_seconds": round(time.perf_counter() - projected, 3),
            "encoding_cache_hits": info["cache_hits"], "params": params.caption(),
            **({"coverage": coverage} if coverage else {})}
