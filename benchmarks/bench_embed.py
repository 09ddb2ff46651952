"""Encoding speed: bioviz vs a bare ``SentenceTransformer.encode``, and the cached second pass.

Printed ratios are measured side by side in one run, on the same names, model object and
batch size. On a shared machine the load drifts from second to second, so the two are
interleaved finely: the names are cut into slices of ``--slice`` names, and each slice is
encoded by both (in alternating order); the totals over all slices are compared. Each
round starts from an empty cache; the best round counts.

    python benchmarks/bench_embed.py --n 1000            # bioviz/bare >= 0.9, cached >= 50x
    python benchmarks/bench_embed.py --full-icd10cm      # every ICD-10-CM name, then reopen

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

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def timed(fn):
    started = time.perf_counter()
    value = fn()
    return time.perf_counter() - started, value


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--source", default="icd10")
    parser.add_argument("--model", default="minilm")
    parser.add_argument("--n", type=int, default=1000, help="names to encode (first n of the level view)")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--slice", type=int, default=256, help="names per interleaved slice")
    parser.add_argument("--full-icd10cm", action="store_true",
                        help="instead: encode every ICD-10-CM name with a progress bar, then reopen")
    parser.add_argument("--home", default=None, help="BIOVIZ_HOME to use (default: a temporary directory)")
    args = parser.parse_args(argv)
    os.environ["BIOVIZ_HOME"] = args.home or tempfile.mkdtemp(prefix="bench-embed-")

    from bioviz.models.cached_encoding import encode_cached
    from bioviz.models.registry import load_encoder
    from bioviz.ontology import level_view, load_source
    from bioviz.models.vector_cache import VectorCache

    if args.full_icd10cm:
        return full_icd10cm(args)
    names = level_view(load_source(args.source), depth=1).names[: args.n]
    encoder = load_encoder(args.model)
    model = encoder.model  # the very SentenceTransformer bioviz uses
    model.encode(names[:64], batch_size=args.batch_size)  # warm-up (allocations, lazy init)
    slices = [names[i:i + args.slice] for i in range(0, len(names), args.slice)]
    bare, ours, cached = [], [], []
    for _ in range(args.rounds):
        VectorCache().clear(encoder.fingerprint)
        bare_s = ours_s = 0.0
        for i, part in enumerate(slices):
            def run_bare(part=part):
                return model.encode(part, batch_size=args.batch_size, convert_to_numpy=True, normalize_embeddings=True)

            def run_ours(part=part):
                return encode_cached(encoder, part, batch_size=args.batch_size)

            if i % 2 == 0:
                bare_s += timed(run_bare)[0]
                ours_s += timed(run_ours)[0]
            else:
                ours_s += timed(run_ours)[0]
                bare_s += timed(run_bare)[0]
        bare.append(bare_s)
        ours.append(ours_s)
        cached.append(timed(lambda: encode_cached(encoder, names, batch_size=args.batch_size))[0])
    result = {
        "model": encoder.label, "names": len(names), "batch_size": args.batch_size, "rounds": args.rounds,
        "slice": args.slice,
        "bare_seconds": round(min(bare), 3), "bioviz_first_pass_seconds": round(min(ours), 3),
        "bioviz_cached_seconds": round(min(cached), 4),
        "bare_names_per_second": round(len(names) / min(bare), 1),
        "bioviz_names_per_second": round(len(names) / min(ours), 1),
        "speed_ratio_bioviz_over_bare": round(min(bare) / min(ours), 3),
        "cached_speedup_over_first_pass": round(min(ours) / min(cached), 1),
        "targets": {"speed_ratio_bioviz_over_bare": ">= 0.9", "cached_speedup_over_first_pass": ">= 50"},
    }
    print(json.dumps(result, indent=2))
    return result


def full_icd10cm(args) -> dict:
    """Every ICD-10-CM name (inclusion terms included) with a progress bar; then a second open."""
    from bioviz.cli.progress import progress_bar
    from bioviz.search.neighbours import level_space
    from bioviz.ontology import level_view, load_source

    view = level_view(load_source("icd10cm"), depth=1)
    with progress_bar(f"encoding ICD-10-CM ({args.model})") as progress:
        first, space = timed(lambda: level_space(view, args.model, batch_size=args.batch_size, progress=progress))
    second, (_, info) = timed(lambda: level_space(view, args.model, batch_size=args.batch_size))
    result = {"model": args.model, "names": len(view.names), "first_seconds": round(first, 1),
              "first_names_per_second": round(len(view.names) / first, 1), "first_cache_hits": space[1]["cache_hits"],
              "second_open_seconds": round(second, 2), "second_cache_hits": info["cache_hits"],
              "second_open_speedup": round(first / second, 1)}
    print(json.dumps(result, indent=2))
    return result


if __name__ == "__main__":
    main()
