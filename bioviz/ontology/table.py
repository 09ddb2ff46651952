"""Plain tables (.tsv / .csv): ``concept_id, name, parent_id[, definition][, synonyms]``.

One row per concept, or several rows per concept to give it several parents or names: the
first name seen is the preferred name, later ones become synonyms. ``parent_id`` may be
empty for top concepts; several parents can also be given separated by ``|``. An optional
``synonyms`` column holds ``|``-separated names. A row may leave out trailing empty cells.

Read with the standard library's ``csv`` module, row by row: its line numbers make every
error say where the problem is, and no message repeats the file's text (a path may name any
file the server can read).
"""

from __future__ import annotations

import csv
from pathlib import Path

import networkx as nx

from bioviz.errors import SourceError
from bioviz.ontology.model import Concept, Ontology

REQUIRED = ("concept_id", "name", "parent_id")
OPTIONAL = ("definition", "synonyms")
SYNTHETIC_ROOT = "TABLE:ROOT"


def _first_non_utf8_line(path: Path) -> int:
    """Number of the first line that is not UTF-8 (for the error message)."""
    with path.open("rb") as handle:
        for number, line in enumerate(handle, start=1):
            try:
                line.decode("utf-8")
            except UnicodeDecodeError:
                return number
    return 0


class _Rows:
    """The table's rows as dicts of the known columns, with their line numbers."""

    def __init__(self, path: Path, handle) -> None:
        self.name = path.name
        self.reader = csv.reader(handle, delimiter="," if path.suffix.lower() == ".csv" else "\t")
        header = self._next()
        if header is None:
            raise SourceError(f"table {self.name} is empty; expected a header row "
                              f"{', '.join(REQUIRED)}[, definition][, synonyms]")
        columns = [c.strip().lower() for c in header]
        missing = [c for c in REQUIRED if c not in columns]
        if missing:
            raise SourceError(
                f"table {self.name} lacks column(s) {', '.join(missing)}; "
                f"expected {', '.join(REQUIRED)}[, definition][, synonyms]"
            )
        twice = [c for c in (*REQUIRED, *OPTIONAL) if columns.count(c) > 1]
        if twice:
            raise SourceError(f"table {self.name}: column {twice[0]} appears {columns.count(twice[0])} times in the header")
        self.width = len(columns)
        self.position = {c: columns.index(c) for c in (*REQUIRED, *OPTIONAL) if c in columns}

    def _next(self) -> list[str] | None:
        try:
            return next(self.reader, None)
        except csv.Error as error:  # e.g. a field longer than csv's limit: the message holds no file text
            raise SourceError(f"table {self.name} line {self.reader.line_num}: unreadable row ({error})") from None

    def __iter__(self):
        while (row := self._next()) is not None:
            if not any(cell.strip() for cell in row):
                continue  # a blank line
            if len(row) > self.width:
                raise SourceError(f"table {self.name} line {self.reader.line_num}: {len(row)} fields, "
                                  f"but the header has {self.width}")
            yield self.reader.line_num, {c: (row[i] if i < len(row) else "") for c, i in self.position.items()}


def load_table(path: str | Path, source: str | None = None) -> Ontology:
    """Load a concept table.

    Raises
    ------
    SourceError
        Missing or unreadable file, missing columns, a row with more fields than the header,
        a concept without a name, or a parent id that is not a concept (with its line number).
    """
    path = Path(path)
    if not path.is_file():
        raise SourceError(f"table not found: {path}")
    names: dict[str, list[str]] = {}
    definitions: dict[str, str] = {}
    parents: dict[str, set[str]] = {}
    first_line: dict[str, int] = {}
    parent_line: dict[str, int] = {}
    try:
        # utf-8-sig: a spreadsheet's byte-order mark is not part of the first column name.
        with path.open(encoding="utf-8-sig", newline="") as handle:
            for line, row in _Rows(path, handle):
                cid = row["concept_id"].strip()
                if not cid:
                    continue
                first_line.setdefault(cid, line)
                bucket = names.setdefault(cid, [])
                for text in [row["name"], *row.get("synonyms", "").split("|")]:
                    if text.strip() and text.strip() not in bucket:
                        bucket.append(text.strip())
                if row.get("definition", "").strip():
                    definitions.setdefault(cid, row["definition"].strip())
                for parent in (p.strip() for p in row["parent_id"].split("|")):
                    if parent:
                        parents.setdefault(cid, set()).add(parent)
                        parent_line.setdefault(parent, line)
    except UnicodeDecodeError:
        raise SourceError(f"table {path.name} line {_first_non_utf8_line(path)} is not UTF-8 text") from None
    except OSError as error:
        raise SourceError(f"cannot read {path.name}: {error.strerror or type(error).__name__}") from None
    if not names:
        raise SourceError(f"table {path.name} has no concept rows")
    nameless = [c for c, n in names.items() if not n]
    if nameless:
        raise SourceError(f"table {path.name} line {first_line[nameless[0]]}: concept without a name "
                          f"({len(nameless)} such concepts)")
    unknown = [p for p in parent_line if p not in names]
    if unknown:
        first = min(unknown, key=parent_line.__getitem__)
        raise SourceError(f"table {path.name} line {parent_line[first]}: parent_id is not the concept_id of any row "
                          f"({len(unknown)} such parents)")
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
