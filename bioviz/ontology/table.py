"""Plain tables (.tsv / .csv): ``concept_id, name, parent_id[, definition][, synonyms]``.

One row per concept, or several rows per concept to give it several parents or names: the
first name seen is the preferred name, later ones become synonyms. ``parent_id`` may be
empty for top concepts; several parents can also be given separated by ``|``. An optional
``synonyms`` column holds ``|``-separated names.
"""

from __future__ import annotations

from pathlib import Path

import networkx as nx
import pandas as pd

from bioviz.errors import SourceError
from bioviz.ontology.model import Concept, Ontology

REQUIRED = ("concept_id", "name", "parent_id")
SYNTHETIC_ROOT = "TABLE:ROOT"


def load_table(path: str | Path, source: str | None = None) -> Ontology:
    """Load a concept table.

    Raises
    ------
    SourceError
        Missing file, unreadable table, missing columns, or a parent id that is not a concept.
    """
    path = Path(path)
    if not path.is_file():
        raise SourceError(f"table not found: {path}")
    sep = "," if path.suffix.lower() == ".csv" else "\t"
    try:
        frame = pd.read_csv(path, sep=sep, dtype=str, keep_default_na=False, comment=None)
    except Exception as error:
        raise SourceError(f"unreadable table {path.name}: {str(error).splitlines()[0]}") from None
    frame.columns = [c.strip().lower() for c in frame.columns]
    missing = [c for c in REQUIRED if c not in frame.columns]
    if missing:
        raise SourceError(
            f"table {path.name} lacks column(s) {', '.join(missing)}; "
            f"expected {', '.join(REQUIRED)}[, definition][, synonyms]"
        )
    frame = frame[frame["concept_id"].str.strip() != ""]
    if frame.empty:
        raise SourceError(f"table {path.name} has no concept rows")
    names: dict[str, list[str]] = {}
    definitions: dict[str, str] = {}
    parents: dict[str, set[str]] = {}
    has_definition = "definition" in frame.columns
    has_synonyms = "synonyms" in frame.columns
    for row in frame.itertuples(index=False):
        cid = row.concept_id.strip()
        bucket = names.setdefault(cid, [])
        for text in [row.name, *((row.synonyms.split("|")) if has_synonyms else [])]:
            if text.strip() and text.strip() not in bucket:
                bucket.append(text.strip())
        if has_definition and row.definition.strip():
            definitions.setdefault(cid, row.definition.strip())
        parents.setdefault(cid, set()).update(p.strip() for p in row.parent_id.split("|") if p.strip())
    nameless = [c for c, n in names.items() if not n]
    if nameless:
        raise SourceError(f"table {path.name}: concept {nameless[0]} has no name")
    unknown = sorted({p for ps in parents.values() for p in ps} - set(names))
    if unknown:
        raise SourceError(f"table {path.name}: parent_id {unknown[0]} is not a concept_id ({len(unknown)} such)")
    concepts = {c: Concept(c, n[0], tuple(n[1:]), definitions.get(c)) for c, n in names.items()}
    graph = nx.DiGraph()
    graph.add_nodes_from(concepts)
    graph.add_edges_from((p, c) for c, ps in parents.items() for p in ps)
    tops = sorted(n for n in graph if graph.in_degree(n) == 0)
    if len(tops) == 1:
        root = tops[0]
    else:
        root = SYNTHETIC_ROOT
        concepts[root] = Concept(root, f"{path.stem} (all top concepts)")
        graph.add_edges_from((root, t) for t in tops)
    return Ontology(source or path.stem, "", concepts, graph, root)
