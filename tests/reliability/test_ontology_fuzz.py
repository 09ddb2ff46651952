"""Fuzzing the source and benchmark readers (issue 13): only BiovizError escapes, in one line
that never repeats the file's text; whatever loads survives the cache round trip and a level cut.

Inputs mix well-formed lines with random text and bytes, a byte-order mark, CRLF and CR line
ends, huge lines, blank fields and wrong column counts. Every input hides MARKER, which no
message may contain.
"""

from __future__ import annotations

from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from bioviz.errors import BiovizError
from bioviz.evaluation.benchmarks import parse_pairs
from bioviz.ontology.levels import level_view, synonym_view
from bioviz.ontology.model import Ontology
from bioviz.ontology.obo import load_obo
from bioviz.ontology.sources import deserialize, serialize
from bioviz.ontology.table import load_table
from bioviz.ontology.umls import load_umls

MARKER = "Mq7xMarker"
HUGE = MARKER * 17_000  # longer than csv's field limit (131,072 characters)

texts = st.text(max_size=12)
cells = st.one_of(texts, st.sampled_from(["", " ", MARKER, HUGE[:3000], '"', "a|b", "\t", ","]))
endings = st.sampled_from(["\n", "\r\n", "\r"])


def assemble(lines: list[str], ending: str, bom: bool) -> bytes:
    return (("\ufeff" if bom else "") + ending.join(lines) + ending).encode("utf-8", errors="surrogatepass")


def check_error(error: BiovizError) -> None:
    message = str(error)
    assert "\n" not in message and "\r" not in message, message
    assert MARKER not in message, message


def check_loaded(onto: Ontology) -> None:
    """A loaded ontology is what the cache gives back, and it can be cut."""
    again = deserialize(serialize(onto))
    assert again.concepts == onto.concepts and set(again.graph.edges) == set(onto.graph.edges)
    assert again.taxonomy()[1:] == onto.taxonomy()[1:]
    for cut in (lambda: level_view(onto, depth=1), lambda: level_view(onto, depth=1, keep_ambiguous=True),
                lambda: synonym_view(onto)):
        try:
            cut()
        except BiovizError as error:
            assert "\n" not in str(error)


def read(loader, path: Path, **options) -> None:
    try:
        onto = loader(path, **options)
    except BiovizError as error:
        check_error(error)
    else:
        check_loaded(onto)


# ------------------------------------------------------------------------------------- OBO

ids = st.integers(0, 6).map(lambda i: f"X:{i}")
obo_lines = st.one_of(
    st.sampled_from(["[Term]", "[Term]", "[Typedef]", "[Instance]", "[Term", "", "", "format-version: 1.2",
                     "! a comment", "is_obsolete: true", "relationship: part_of", "id:", "name:", MARKER,
                     f"{MARKER} no colon", f"name: {HUGE}", "synonym: broken"]),
    ids.map(lambda i: f"id: {i}"),
    ids.map(lambda i: f"is_a: {i} ! parent"),
    ids.map(lambda i: f"relationship: part_of {i}"),
    texts.map(lambda t: f"name: {t}"),
    st.tuples(texts, st.sampled_from(["EXACT", "RELATED", "NARROW", "odd"])).map(lambda p: f'synonym: "{p[0]}" {p[1]} []'),
    texts.map(lambda t: f'def: "{t}" [src:1]'),
    texts,
)


@given(lines=st.lists(obo_lines, max_size=30), ending=endings, bom=st.booleans())
def test_obo_reader(tmp_path, lines, ending, bom):
    path = tmp_path / "fuzz.obo"
    path.write_bytes(assemble(["[Term]", *lines], ending, bom))
    read(load_obo, path)


@given(data=st.binary(max_size=400), prefix=st.sampled_from([b"", b"[Term]\n", b"[Term]\nid: X:1\nname: a\n"]))
def test_obo_reader_on_random_bytes(tmp_path, data, prefix):
    path = tmp_path / "fuzz.obo"
    path.write_bytes(prefix + data + MARKER.encode())
    read(load_obo, path)


# ----------------------------------------------------------------------------------- tables

headers = st.sampled_from([
    ["concept_id", "name", "parent_id"],
    ["concept_id", "name", "parent_id", "definition", "synonyms"],
    [" Concept_ID ", "NAME", "Parent_Id"],
    ["concept_id", "name"],
    ["concept_id", "name", "parent_id", "name"],
    [MARKER, "name", "parent_id"],
    [],
])
table_cells = st.one_of(cells, st.sampled_from(["A", "B", "C", "A|B", "B|C|", "Z"]))


@given(header=headers, rows=st.lists(st.lists(table_cells, max_size=6), max_size=12), suffix=st.sampled_from([".tsv", ".csv"]),
       ending=endings, bom=st.booleans())
def test_table_reader(tmp_path, header, rows, suffix, ending, bom):
    separator = "," if suffix == ".csv" else "\t"
    path = tmp_path / f"fuzz{suffix}"
    path.write_bytes(assemble([separator.join(header), *(separator.join(row) for row in rows), MARKER], ending, bom))
    read(load_table, path)


@given(data=st.binary(max_size=400), suffix=st.sampled_from([".tsv", ".csv"]))
def test_table_reader_on_random_bytes(tmp_path, data, suffix):
    path = tmp_path / f"fuzz{suffix}"
    path.write_bytes(b"concept_id\tname\tparent_id\n" + data + MARKER.encode())
    read(load_table, path)


# ------------------------------------------------------------------------------------- UMLS

cuis = st.sampled_from(["C1", "C2", "C3", "C4", "", " "])


def mrconso_row(cui, language, sab, tty, name, suppress, width):
    fields = [cui, language, "P", "L1", "PF", "S1", "Y", "A1", "", "", "", sab, tty, "1", name, "0", suppress, "256", ""]
    return "|".join(fields[:width])


mrconso_rows = st.builds(mrconso_row, cuis, st.sampled_from(["ENG", "FRE", ""]), st.sampled_from(["SNOMEDCT_US", "MSH"]),
                         st.sampled_from(["PT", "SY", "FN", ""]), cells, st.sampled_from(["N", "O", ""]),
                         st.sampled_from([19, 19, 19, 18, 5, 1]))


def mrrel_row(cui1, rel, cui2, rela, sab, width):
    fields = [cui1, "A1", "SCUI", rel, cui2, "A2", "SCUI", rela, "R1", "", sab, "SNOMEDCT_US", "", "", "N", "", ""]
    return "|".join(fields[:width])


mrrel_rows = st.builds(mrrel_row, cuis, st.sampled_from(["PAR", "CHD", "RO", ""]), cuis,
                       st.sampled_from(["isa", "inverse_isa", ""]), st.sampled_from(["SNOMEDCT_US", "MSH"]),
                       st.sampled_from([17, 17, 17, 16, 3]))
mrsty_rows = st.builds(lambda cui, tui, width: "|".join([cui, tui, "B2.2", "Disease", "AT1", ""][:width]), cuis,
                       st.sampled_from(["T047", "T191", "T001", ""]), st.sampled_from([6, 6, 2]))


@given(conso=st.lists(mrconso_rows, max_size=12), rel=st.lists(mrrel_rows, max_size=12),
       sty=st.one_of(st.none(), st.lists(mrsty_rows, max_size=6)), ending=endings, bom=st.booleans(),
       group=st.sampled_from([None, "DISO", "T047,T191", "bogus"]), hierarchy=st.sampled_from(["parchd", "isa"]))
def test_umls_reader(tmp_path, conso, rel, sty, ending, bom, group, hierarchy):
    meta = tmp_path / "META"
    meta.mkdir(exist_ok=True)
    (meta / "MRCONSO.RRF").write_bytes(assemble([*conso, MARKER], ending, bom))
    (meta / "MRREL.RRF").write_bytes(assemble(rel, ending, False))
    (meta / "MRSTY.RRF").unlink(missing_ok=True)
    if sty is not None:
        (meta / "MRSTY.RRF").write_bytes(assemble(sty, ending, False))
    read(load_umls, meta, semantic_group=group, hierarchy=hierarchy)


# ------------------------------------------------------------------------------- benchmarks

scores = st.sampled_from(["1", "2.5", "-3", "nan", "inf", "1e400", "x", "", MARKER, "3 "])


@given(rows=st.lists(st.lists(st.one_of(cells, scores), max_size=5), max_size=12), delimiter=st.sampled_from([None, "\t", ","]),
       ending=endings, bom=st.booleans(), header=st.booleans(), as_text=st.booleans())
def test_benchmark_reader(rows, delimiter, ending, bom, header, as_text):
    separator = delimiter or "\t"
    lines = (["term1\tterm2\tscore"] if header else []) + [separator.join(row) for row in rows] + [MARKER]
    data = assemble(lines, ending, bom)
    try:
        parse_pairs(data.decode("utf-8", errors="surrogatepass") if as_text else data, name="upload.tsv",
                    delimiter=delimiter)
    except BiovizError as error:
        check_error(error)


@given(data=st.binary(max_size=400))
def test_benchmark_reader_on_random_bytes(data):
    try:
        parse_pairs(data + MARKER.encode(), name="upload.tsv")
    except BiovizError as error:
        check_error(error)
