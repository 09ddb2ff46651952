"""``python -m bioviz embed ... --backend onnx-int8``: encode a level with an int8 backend.

Kept apart from :mod:`bioviz.cli.embed` (which calls it for any backend but ``torch``) so the
backends of issue 16 and the command's other options change independently.
"""

from __future__ import annotations

from bioviz.cli.progress import progress_bar
from bioviz.models.cached_encoding import encode_cached
from bioviz.models.quantized import BACKENDS
from bioviz.models.registry import backend_encoder


def add_backend_option(parser) -> None:
    """``--backend torch|onnx-int8|openvino-int8``: None when not given (the default backend then encodes).

    :func:`bioviz.cli.main` runs the command under the backend given
    (:func:`~bioviz.models.backend_choice.backend_override`), so every encoder the command
    loads, for names and queries alike, uses it.
    """
    parser.add_argument("--backend", choices=BACKENDS, default=None,
                        help="torch (the model as trained), or onnx-int8: its transformer as an int8 ONNX Runtime "
                             "graph, exported once into BIOVIZ_HOME/onnx (faster on CPU; drift in docs/scale.md). "
                             "Default: BIOVIZ_BACKEND, else onnx-int8 on a CPU and torch on a GPU")


def run_backend(args, view) -> dict:
    """Encode ``view``'s names with ``args.model`` under ``args.backend``, through the vector cache.

    Each backend's vectors are cached under their own fingerprint, so a second call is served
    from the cache and never mixes torch and int8 vectors.
    """
    encoder = backend_encoder(args.model, args.backend)
    with progress_bar(f"encoding ({args.model.spec}, {args.backend})", disable=args.quiet) as progress:
        vectors, stats = encode_cached(encoder, view.names, batch_size=args.batch_size, progress=progress,
                                       use_cache=not args.no_cache)
    return {"source": view.source, "level": view.title, "model": encoder.label, "backend": args.backend,
            "names": stats.names, "cache_hits": stats.cache_hits, "encoded": stats.encoded,
            "seconds": round(stats.seconds, 3), "names_per_second": round(stats.names_per_second, 1),
            "dim": int(vectors.shape[1]), "fingerprint": encoder.fingerprint}
