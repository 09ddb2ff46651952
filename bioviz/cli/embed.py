"""``python -m bioviz embed SOURCE --model MODEL [--root ID --depth K] --json``: encode a level.

Encodes every name of the level view through the vector cache and reports how long it
took; a second call is served from the cache (``cache_hits`` = ``names``). With
``--executor ray`` (or ``BIOVIZ_EXECUTOR=ray``) the missing names are encoded on the Ray
cluster at ``RAY_ADDRESS`` (:mod:`bioviz.models.ray_embedding`) and cached here.
"""

from __future__ import annotations

from bioviz.cli.common import add_json, add_level_options, level_spec_from_args, model_argument
from bioviz.cli.embed_backend import add_backend_option, run_backend
from bioviz.cli.progress import progress_bar
from bioviz.errors import BiovizError
from bioviz.models import ray_embedding
from bioviz.ray_cluster import executor_name
from bioviz.search.neighbours import level_space


def register(subparsers) -> None:
    """Add the ``embed`` sub-command."""
    parser = subparsers.add_parser("embed", help="encode every name of a concept level (cached on disk)")
    parser.add_argument("source", help="icd10, icd10cm, hpo, or a path (.obo, UMLS META dir, .tsv/.csv)")
    parser.add_argument("--model", default="minilm", type=model_argument,
                        help="minilm, char-tfidf, a sentence-transformers directory or hub id, or a run directory")
    add_level_options(parser)
    parser.add_argument("--batch-size", type=int, default=64, help="names per forward pass")
    parser.add_argument("--no-cache", action="store_true",
                        help="encode everything, neither reading nor writing the cache")
    parser.add_argument("--executor", choices=("local", "ray"), default=None,
                        help="where missing names are encoded: here, or on the Ray cluster at RAY_ADDRESS with "
                             "Ray Data (default: BIOVIZ_EXECUTOR, else local)")
    parser.add_argument("--quiet", action="store_true", help="no progress bar on stderr")
    add_backend_option(parser)
    add_json(parser)
    parser.set_defaults(handler=run)


def run(args) -> dict:
    """Encode the level view's names and report throughput and cache hits."""
    view = level_spec_from_args(args).load()
    if args.backend != "torch":
        # The int8 export lives in this machine's BIOVIZ_HOME: it runs here, not on a cluster.
        if args.executor == "ray":
            raise BiovizError(f"--backend {args.backend} encodes on this machine only; drop --executor ray")
        return run_backend(args, view)
    where = executor_name(args.executor)
    with ray_embedding.executor(where), progress_bar(f"encoding ({args.model.spec})", disable=args.quiet) as progress:
        space, info = level_space(view, args.model, batch_size=args.batch_size, progress=progress,
                                  use_cache=not args.no_cache)
    return {"source": view.source, "level": view.title, "model": space.model_id, "executor": where, **info}
