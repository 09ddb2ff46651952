"""Build a reproducible ~1M-name level from the bundled ICD-10-CM and HPO, as a table bioviz reads.

Every ICD-10-CM and HPO concept keeps its id, its names (preferred name and synonyms,
inclusion terms included) and its parents, so the hierarchy is the real one; the two
ontologies hang under one root (``LARGE:ROOT`` > ``LARGE:ICD10CM`` | ``LARGE:HPO``).
To reach ``--names`` names, each real name gets systematic clinical variants as extra
synonyms of its own concept, from :data:`TEMPLATES` in a fixed order ("history of ...",
"... (disorder)", "suspected ...", ...): name i of the ontology gets the first v templates,
plus one more for the first r names, with v and r fixed by the target. Variants keep the
concept and class of the name they vary, so the level is as hard as the real one, only larger.

The output is a tab-separated table (``concept_id, name, parent_id, definition, synonyms``;
:mod:`bioviz.ontology.table`), byte-identical for the same installed sources and target;
its SHA-256 is printed with the counts.

    python benchmarks/large_level.py --out .bioviz/large_level.tsv            # ~1,000,000 names
    python -m bioviz levels .bioviz/large_level.tsv --json                    # the levels it offers
    python -m bioviz embed .bioviz/large_level.tsv --depth 2 --backend onnx-int8 --json

A smaller level for tests and CI is the same construction with a lower target (``--names 200000``:
every real name, plus one variant for the first names). ``--prefill MODEL ...`` then stores
seeded random vectors for every name of the level at ``--depth`` in the vector cache of
``BIOVIZ_HOME`` (a whole-level block per model, as the pages read them), so the pages can be
opened on the level without encoding it: for measuring the pages, where encoding is not the point.

    python benchmarks/large_level.py --names 200000 --out .bioviz/large200k.tsv --prefill minilm char-tfidf --depth 1 3
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

ROOT = "LARGE:ROOT"
TOPS = {"icd10cm": ("LARGE:ICD10CM", "ICD-10-CM"), "hpo": ("LARGE:HPO", "Human Phenotype Ontology")}
TEMPLATES = (
    "history of {}", "{} (disorder)", "suspected {}", "{}, unspecified", "{} NOS", "family history of {}",
    "{} in remission", "acute {}", "chronic {}", "recurrent {}", "screening for {}", "{} (finding)",
    "rule out {}", "{}, resolved", "{} of left side", "{} of right side", "congenital {}", "mild {}",
    "severe {}", "{} with complications",
)


def _clean(text: str) -> str:
    """One table cell: no tabs, newlines or the synonym separator."""
    return " ".join(text.replace("|", "/").split())


def _inner(name: str) -> str:
    """A name as it reads inside a phrase: first letter lowered unless it starts an acronym."""
    return name if len(name) > 1 and name[:2].isupper() else name[:1].lower() + name[1:]


def build(target: int, out: Path) -> dict:
    from bioviz.ontology import load_source

    concepts = []  # (id, names, parents) in a fixed order
    for source, (top, _label) in TOPS.items():
        ontology = load_source(source)
        for cid in sorted(ontology.concepts):
            concept = ontology.concepts[cid]
            names = [_clean(n) for n in concept.names if _clean(n)]
            parents = sorted(ontology.parents(cid)) or [top]
            concepts.append((cid, names, parents))
    real = sum(len(names) for _, names, _ in concepts)
    extra = max(0, target - real - 3)
    per_name, remainder = divmod(extra, real) if real else (0, 0)
    if per_name >= len(TEMPLATES):
        raise SystemExit(f"--names {target} needs more than {len(TEMPLATES)} variants per name")
    digest = hashlib.sha256()
    total = 0
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.tmp")
    with tmp.open("w", encoding="utf-8", newline="") as handle:
        def write(line: str) -> None:
            handle.write(line)
            digest.update(line.encode())

        write("concept_id\tname\tparent_id\tdefinition\tsynonyms\n")
        write(f"{ROOT}\tICD-10-CM and HPO (large level)\t\t\t\n")
        for top, label in TOPS.values():
            write(f"{top}\t{label}\t{ROOT}\t\t\n")
        total += 3
        index = 0
        for cid, names, parents in concepts:
            synonyms = list(names[1:])
            for name in names:
                count = per_name + (1 if index < remainder else 0)
                synonyms.extend(template.format(_inner(name)) for template in TEMPLATES[:count])
                index += 1
            write(f"{cid}\t{names[0]}\t{'|'.join(parents)}\t\t{'|'.join(synonyms)}\n")
            total += 1 + len(synonyms)
    os.replace(tmp, out)
    return {"out": str(out), "concepts": len(concepts) + 3, "real_names": real, "names": total,
            "variants_per_name": per_name, "sha256": digest.hexdigest()}


def prefill_vectors(source: Path, depths, models, seed: int = 0) -> dict:
    """Store seeded random unit vectors for every name of ``source``'s levels at ``depths`` under ``models``.

    Each class gets a random centre and its names scatter around it (so the per-class
    measures have something to find); one whole-level block per (model, depth) goes into the
    vector cache of ``BIOVIZ_HOME`` (:meth:`~bioviz.models.vector_cache.VectorCache.put_block`),
    which is what the pages read for a level. Names outside these levels (queries, hypernym
    names) are still encoded by the real model when a page needs them.

    Returns
    -------
    dict
        ``{"<model>@<depth>": names}`` for each block written.
    """
    import numpy as np

    from bioviz.models.registry import load_encoder, model_dimension
    from bioviz.models.vector_cache import VectorCache
    from bioviz.ontology import LevelSpec, load_source

    spec_of = {depth: LevelSpec.from_query({"source": str(source), "depth": str(depth)}, default_source="icd10")
               for depth in depths}
    ontology = load_source(str(source))
    views = {depth: spec.load(ontology) for depth, spec in spec_of.items()}
    cache = VectorCache()
    written = {}
    for model in models:
        encoder = load_encoder(model)
        dim = model_dimension(model)  # from the model's files: no weights loaded
        for depth, view in views.items():
            rng = np.random.default_rng([seed, depth, dim])
            centres = rng.standard_normal((len(view.classes), dim), dtype=np.float32)
            vectors = centres[view.labels] + 1.5 * rng.standard_normal((len(view.names), dim), dtype=np.float32)
            vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
            cache.put_block(encoder.fingerprint, view.names, vectors)
            written[f"{model}@{depth}"] = len(view.names)
    return written


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--names", type=int, default=1_000_000, help="names to reach (real ones plus variants)")
    parser.add_argument("--out", default=".bioviz/large_level.tsv")
    parser.add_argument("--prefill", nargs="*", default=[], metavar="MODEL",
                        help="store random vectors of the level's names for these models (no encoding)")
    parser.add_argument("--depth", nargs="*", type=int, default=[1], help="levels whose names --prefill covers")
    args = parser.parse_args(argv)
    result = build(args.names, Path(args.out))
    if args.prefill:
        result["prefilled"] = prefill_vectors(Path(args.out), args.depth, args.prefill)
    print(json.dumps(result, indent=2))
    return result


if __name__ == "__main__":
    main()
