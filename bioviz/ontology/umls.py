"""A licensed UMLS release (``META`` directory of Rich Release Format files).

Concepts are UMLS CUIs that have English atoms in the chosen source vocabulary (e.g.
``SNOMEDCT_US``); their names are those atoms' strings. IS-A edges come from MRREL, either
from the ``PAR``/``CHD`` relations or from ``RELA=isa``/``inverse_isa``, restricted to the
same vocabulary. An optional semantic group (``DISO``, disorders, as in the papers) keeps
only concepts whose semantic types (MRSTY) belong to it.

The files are read line by line and only matching rows are kept, so a multi-GB release
needs memory in proportion to the selected vocabulary, not to the files.

RRF columns used (pipe-separated, as documented in the UMLS Reference Manual):

- MRCONSO: CUI|LAT|TS|LUI|STT|SUI|ISPREF|AUI|SAUI|SCUI|SDUI|SAB|TTY|CODE|STR|SRL|SUPPRESS|CVF|
- MRREL:   CUI1|AUI1|STYPE1|REL|CUI2|AUI2|STYPE2|RELA|RUI|SRUI|SAB|SL|RG|DIR|SUPPRESS|CVF|
- MRSTY:   CUI|TUI|STN|STY|ATUI|CVF|

In MRREL, REL and RELA describe the second concept relative to the first: ``PAR`` means
CUI2 is a parent of CUI1, ``CHD`` a child; ``RELA=isa`` means CUI2 is-a CUI1.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Callable, Iterator

import networkx as nx

from bioviz.errors import SourceError
from bioviz.ontology.model import Concept, Ontology

logger = logging.getLogger(__name__)

SYNTHETIC_ROOT = "UMLS:ROOT"
# Semantic types of the UMLS semantic group "Disorders" (DISO), from NLM's SemGroups.txt.
SEMANTIC_GROUPS = {
    "DISO": frozenset({
        "T020", "T190", "T049", "T019", "T047", "T050", "T033", "T037", "T048", "T191", "T046", "T184",
    }),
}
# Term types preferred as a concept's name, best first (SNOMED CT, then generic UMLS ones).
PREFERRED_TTYS = ("PT", "PN", "MH", "FN", "SY")
# Where IS-A edges come from (the ``hierarchy`` option): REL=PAR/CHD, or RELA=isa/inverse_isa.
HIERARCHIES = {"parchd": "PAR/CHD relations", "isa": "RELA isa / inverse_isa"}
DEFAULT_SAB = "SNOMEDCT_US"
# Vocabularies offered first in the app; any other SAB can be typed.
COMMON_SABS = ("SNOMEDCT_US", "MSH", "NCI", "MDR", "ICD10CM", "HPO", "OMIM", "MEDLINEPLUS")
REQUIRED_FILES = ("MRCONSO.RRF", "MRREL.RRF")


def _rows(path: Path, n_fields: int, progress: Callable | None, share: tuple[float, float]) -> Iterator[list[str]]:
    """Yield the fields of each non-blank line of an RRF file, checking the column count.

    Raises
    ------
    SourceError
        A line with too few fields (by number; its text is not repeated), or a read error.
    """
    try:
        size = max(path.stat().st_size, 1)
        with path.open("rb") as handle:
            for number, raw in enumerate(handle, start=1):
                line = raw.decode("utf-8", errors="replace").rstrip("\r\n")
                if not line.strip():
                    continue  # a blank line, e.g. at the end of a file edited by hand
                fields = line.split("|")
                if len(fields) < n_fields:
                    raise SourceError(
                        f"malformed {path.name} line {number}: {len(fields) - 1} fields, expected {n_fields - 1}"
                    )
                if progress and number % 200_000 == 0:
                    progress(share[0] + share[1] * handle.tell() / size, f"reading {path.name}")
                yield fields
    except OSError as error:
        raise SourceError(f"cannot read {path.name}: {error.strerror or type(error).__name__}") from None


def _find(directory: Path, name: str) -> Path | None:
    for candidate in (directory / name, directory / "META" / name):
        if candidate.is_file():
            return candidate
    return None


def semantic_types_for(group: str | None) -> frozenset[str] | None:
    """TUIs of a semantic group name (``DISO``) or of a comma list of TUIs (``T047,T191``)."""
    if not group:
        return None
    if group.upper() in SEMANTIC_GROUPS:
        return SEMANTIC_GROUPS[group.upper()]
    tuis = frozenset(t.strip().upper() for t in group.split(",") if t.strip())
    if not tuis or not all(t.startswith("T") and t[1:].isdigit() for t in tuis):
        raise SourceError(
            f"unknown semantic group {group!r}: use {', '.join(SEMANTIC_GROUPS)} or a comma list of TUIs (T047,T191)"
        )
    return tuis


def load_umls(
    directory: str | Path,
    *,
    sab: str = DEFAULT_SAB,
    semantic_group: str | None = None,
    hierarchy: str = "parchd",
    language: str = "ENG",
    progress: Callable[[float, str], None] | None = None,
) -> Ontology:
    """Load one source vocabulary of a UMLS release.

    Parameters
    ----------
    directory : path-like
        The release's ``META`` directory (or its parent).
    sab : str
        Source abbreviation, e.g. ``SNOMEDCT_US``, ``MSH``, ``ICD10CM``.
    semantic_group : str, optional
        ``DISO`` or a comma list of TUIs; needs MRSTY.RRF.
    hierarchy : {"parchd", "isa"}
        IS-A edges from REL=PAR/CHD, or from RELA=isa/inverse_isa.
    language : str
        MRCONSO LAT value of the names to keep.
    progress : callable, optional
        ``progress(fraction, message)`` while streaming.

    Raises
    ------
    SourceError
        Missing files, malformed lines, no matching concepts, or bad options.
    """
    directory = Path(directory)
    if hierarchy not in HIERARCHIES:
        raise SourceError(f"hierarchy must be {' or '.join(map(repr, HIERARCHIES))} (got {hierarchy!r})")
    paths = {name: _find(directory, name) for name in (*REQUIRED_FILES, "MRSTY.RRF")}
    missing = [name for name in REQUIRED_FILES if paths[name] is None]
    tuis = semantic_types_for(semantic_group)
    if tuis is not None and paths["MRSTY.RRF"] is None:
        missing.append("MRSTY.RRF (needed for a semantic group)")
    if missing:
        raise SourceError(f"incomplete UMLS directory {directory}: missing {', '.join(missing)}")

    allowed: set[str] | None = None
    if tuis is not None:
        allowed = {f[0] for f in _rows(paths["MRSTY.RRF"], 6, progress, (0.0, 0.1)) if f[1] in tuis}

    atoms: dict[str, list[tuple[int, str]]] = {}  # CUI -> (rank, name)
    blank = 0
    for f in _rows(paths["MRCONSO.RRF"], 18, progress, (0.1, 0.5)):
        if f[11] != sab or f[1] != language or f[16] not in ("N", ""):
            continue
        if allowed is not None and f[0] not in allowed:
            continue
        if not f[0].strip() or not f[14].strip():
            blank += 1  # an atom without a CUI or a name gives no concept and no name
            continue
        tty = f[12]
        rank = PREFERRED_TTYS.index(tty) if tty in PREFERRED_TTYS else len(PREFERRED_TTYS)
        if f[6] == "Y" and f[2] == "P":
            rank -= 0.5  # the source's own preferred atom breaks ties within a term type
        atoms.setdefault(f[0], []).append((rank, f[14].strip()))
    if blank:
        logger.warning("%s: skipped %d %s atoms of %s with a blank CUI or name", paths["MRCONSO.RRF"].name, blank,
                       language, sab)
    if not atoms:
        raise SourceError(f"no {language} atoms of {sab} in {directory}" + (f" in group {semantic_group}" if tuis else ""))

    graph = nx.DiGraph()
    graph.add_nodes_from(atoms)
    for f in _rows(paths["MRREL.RRF"], 16, progress, (0.6, 0.4)):
        if f[10] != sab or f[0] == f[4]:
            continue
        cui1, rel, cui2, rela = f[0], f[3], f[4], f[7]
        if hierarchy == "parchd":
            edge = (cui2, cui1) if rel == "PAR" else (cui1, cui2) if rel == "CHD" else None
        else:
            edge = (cui1, cui2) if rela == "isa" else (cui2, cui1) if rela == "inverse_isa" else None
        if edge and edge[0] in atoms and edge[1] in atoms:
            graph.add_edge(*edge)

    concepts = {}
    for cui, entries in atoms.items():
        entries.sort(key=lambda e: e[0])
        names = list(dict.fromkeys(name for _, name in entries))  # never empty: blank names were skipped
        concepts[cui] = Concept(cui, names[0], tuple(names[1:]))
    tops = sorted(n for n in graph if graph.in_degree(n) == 0 and graph.out_degree(n) > 0)
    if len(tops) == 1:
        root = tops[0]
    else:
        root = SYNTHETIC_ROOT
        label = f"{sab}" + (f" {semantic_group}" if semantic_group else "") + " (all top concepts)"
        concepts[root] = Concept(root, label)
        graph.add_edges_from((root, t) for t in tops)
    if progress:
        progress(1.0, "done")
    logger.info("UMLS %s: %d concepts, %d IS-A edges", sab, len(concepts), graph.number_of_edges())
    version = directory.resolve().parent.name if directory.name == "META" else directory.name
    return Ontology(f"umls-{sab}" + (f"-{semantic_group}" if semantic_group else ""), version, concepts, graph, root)
