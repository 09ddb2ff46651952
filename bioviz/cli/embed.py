"""``python -m bioviz embed SOURCE --model MODEL [--root ID --depth K] --json``: encode a level.

Encodes every name of the level view through the vector cache and reports how long it
took; a second call is served from the cache (``cache_hits`` = ``names``). With
``--executor ray`` (or ``BIOVIZ_EXECUTOR=ray``) the missing names are encoded on the Ray
cluster at ``RAY_ADDRESS`` (:mod:`bioviz.models.ray_embedding`) and cached here.

``--out vectors.parquet`` (or ``.npz``, or ``x_vectors.tsv`` for the Projector's pair) writes the
level's names and the class names with their vectors, and a model card beside them
(:mod:`bioviz.models.vectors_export`): a vectors file any bioviz opens as ``--model``.
"""

from __future__ import annotations

import numpy as np

from bioviz.cli.common import add_json, add_level_options, covered_level, level_spec_from_args, model_argument
from bioviz.cli.embed_backend import add_backend_option, run_backend
from bioviz.cli.progress import progress_bar
from bioviz.errors import BiovizError
from bioviz.models import ray_embedding
from bioviz.models.backend_choice import backend_override
from bioviz.models.registry import embed, load_encoder
from bioviz.models.vectors_export import export_names, write_vectors
from bioviz.models.vectors_file import VectorsCard
from bioviz.models.vectors_formats import SUFFIXES
from bioviz.output_paths import check_output_file
from bioviz.ray_cluster import executor_name
from bioviz.search.neighbours import level_space


def register(subparsers) -> None:
    """Add the ``embed`` sub-command."""
    parser = subparsers.add_parser("embed", help="encode every name of a concept level (cached on disk)")
    parser.add_argument("source", help="icd10, icd10cm, hpo, or a path (.obo, UMLS META dir, .tsv/.csv)")
    parser.add_argument("--model", default="minilm", type=model_argument,
                        help="minilm, char-tfidf, a sentence-transformers directory or hub id, a run directory, "
                             "or a vectors file (.parquet, .npz, the Projector's vectors .tsv)")
    parser.add_argument("--out", default=None,
                        help="write the level's names and class names with their vectors: .parquet, .npz, or "
                             "x_vectors.tsv (and x_metadata.tsv beside it, for the TensorFlow Projector)")
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
    if args.out:
        _check_out(args.out)
    view, coverage = covered_level(args, [args.model])
    where = executor_name(args.executor)
    if args.backend not in (None, "torch"):
        # The int8 export lives in this machine's BIOVIZ_HOME: it runs here, not on a cluster.
        if args.executor == "ray":
            raise BiovizError(f"--backend {args.backend} encodes on this machine only; drop --executor ray")
        if not args.out:
            return run_backend(args, view)
    # Without --backend: the default backend (onnx-int8 on a CPU), as the pages and neighbours use, so
    # a file written with --out ranks as the model does there (int8 vectors do not depend on their
    # batch: bioviz.models.per_token_int8); --backend torch writes the model as trained. A cluster
    # encodes in torch (its workers load the model as trained, by name).
    backend = "torch" if args.backend is None and where == "ray" else args.backend
    with backend_override(backend):
        with ray_embedding.executor(where), \
                progress_bar(f"encoding ({args.model.spec})", disable=args.quiet) as progress:
            space, info = level_space(view, args.model, batch_size=args.batch_size, progress=progress,
                                      use_cache=not args.no_cache)
        result = {"source": view.source, "level": view.title, "model": space.model_id, "executor": where, **info}
        if coverage:
            result["coverage"] = coverage
        if args.out:
            result["out"] = [str(p) for p in _export(args, view, space)]
    return result


def _check_out(out: str) -> None:
    """Refuse an output file bioviz could not read back, or cannot write, before anything is encoded."""
    if not out.lower().endswith(SUFFIXES):
        raise BiovizError(f"--out {out}: write vectors as {', '.join(SUFFIXES)}")
    check_output_file(out)


def _export(args, view, space) -> list:
    """Write the level's names, and every other name its evaluations use, with their vectors."""
    names = export_names(view, level_spec_from_args(args).ontology())
    extra = names[len(space.names):]
    if extra and args.model.kind == "vectors":  # a file exports the names it holds
        extra = [n for n, row in zip(extra, load_encoder(args.model).file.rows(extra)) if row >= 0]
    vectors = space.vectors
    if extra:
        with progress_bar(f"encoding {len(extra):,} class and other names under the root", disable=args.quiet) as bar:
            vectors = np.concatenate([vectors, embed(extra, args.model, batch_size=args.batch_size, progress=bar,
                                                     use_cache=not args.no_cache).vectors])
    card = VectorsCard(f"{space.model_id} vectors", int(vectors.shape[1]),
                       f"bioviz embed --model {args.model.spec} on {view.title}")
    return write_vectors([*space.names, *extra], vectors, args.out, card)
