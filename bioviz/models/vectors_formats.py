"""Reading a vectors file someone computed elsewhere: Parquet, ``.npz`` or the TensorFlow Projector's TSV pair.

Each reader yields ``(names, rows)`` chunks, so a million-name file is converted (by
:mod:`bioviz.models.vectors_file`) without ever holding it twice. The formats:

Parquet
    a column of names (``name``, ``names``, ``text`` or ``term``; else the first string
    column) and a column of vectors (a list or fixed-size list of floats: ``vector``,
    ``vectors``, ``embedding``; else the first list column). Read one record batch at a time.
``.npz``
    arrays ``names`` (strings) and ``vectors`` (or ``embeddings``, ``matrix``: a 2-D float
    matrix, one row per name), as ``numpy.savez`` writes them. Read with ``allow_pickle`` off:
    an object array (a pickle) is refused, and the matrix's declared shape is checked against
    the size limit before a byte of it is read.
the Projector's TSV pair
    ``vectors.tsv`` (one vector a line, tab-separated, no header) and its ``metadata.tsv``
    beside it (one name a line; with several columns, a header row and the ``name`` column or
    the first).

Every problem is one line (:class:`~bioviz.errors.ModelError`): a file over the size limit
(``BIOVIZ_MAX_VECTORS_MB``, default 4096), rows of another dimension, NaN or infinite
values, zero rows, a name count that is not the row count, and anything else a reader raises
(a zip member compressed with a method Python lacks, an encrypted one, memory running out).

The decoded size is bounded too, not only the file's: a few KB of compressed zeros can declare
gigabytes. Whatever the format, the vectors read are at most :func:`max_bytes` as float32
(rows x dimension x 4), of dimension at most :data:`MAX_DIM`, each name at most
:data:`MAX_NAME_CHARS` characters and all names together at most :func:`max_names_bytes` of
UTF-8 (an eighth of the limit). Each is checked before reading where the file declares it
(an ``.npz`` member's header, Parquet's metadata, a TSV's line length) and again on the running
totals while reading, so no chunk larger than the budget is ever decoded. A name holding a lone
surrogate (not text: it cannot be written as UTF-8) is refused.

The Projector's metadata names are read as :func:`projector_name` writes them: a name a
spreadsheet would run as a formula carries a leading single quote there, which is dropped.
"""

from __future__ import annotations

import logging
import zipfile
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from bioviz.errors import ModelError, shown
from bioviz.settings import env_number

logger = logging.getLogger(__name__)

SUFFIXES = (".parquet", ".npz", ".tsv")
MAX_MB_ENV = "BIOVIZ_MAX_VECTORS_MB"
DEFAULT_MAX_MB = 4096
MAX_DIM = 16_384  # wider than any embedding model we know of; a larger "dimension" is a malformed file
# Longer than any term of UMLS, SNOMED CT or the bundled ontologies (a few hundred characters at
# most); a longer "name" is a sentence or an attack, and every name is held in memory and on pages
MAX_NAME_CHARS = 2_000
NAMES_SHARE = 8  # all names together: at most an eighth of the vectors limit (names are held in memory)
CHUNK_ROWS = 65_536  # rows per chunk while converting: bounded memory whatever the file's size
CHUNK_VALUES = 2**25  # values per chunk (128 MB of float32): fewer rows per chunk when vectors are wide
TSV_CHUNK_CHARS = 16 * 2**20  # text of a TSV chunk: each value is a Python string until parsed
TSV_VALUE_CHARS = 40  # longest text of one value bioviz expects ("-1.2345678901234567e-05" and spaces)
NAME_COLUMNS = ("name", "names", "text", "term")
VECTOR_COLUMNS = ("vector", "vectors", "embedding", "embeddings")
MATRIX_KEYS = ("vectors", "embeddings", "matrix")
Chunk = tuple[list[str], np.ndarray]


def max_bytes() -> int:
    """The largest vectors file (and declared matrix) read: ``BIOVIZ_MAX_VECTORS_MB`` (default 4096)."""
    return int(env_number(MAX_MB_ENV, DEFAULT_MAX_MB) * 2**20)


def max_names_bytes() -> int:
    """The most UTF-8 bytes all of a file's names may take together: :func:`max_bytes` / :data:`NAMES_SHARE`."""
    return max_bytes() // NAMES_SHARE


def chunk_rows(dim: int) -> int:
    """Rows per chunk for vectors of dimension ``dim``: :data:`CHUNK_ROWS`, fewer when they are wide.

    Examples
    --------
    >>> chunk_rows(384), chunk_rows(16_384)
    (65536, 2048)
    """
    return max(1, min(CHUNK_ROWS, CHUNK_VALUES // max(dim, 1)))


def _size(count: float) -> str:
    """Bytes as GB, or MB below one GB (a small ``BIOVIZ_MAX_VECTORS_MB``)."""
    return f"{count / 2**30:.1f} GB" if count >= 2**30 else f"{count / 2**20:.1f} MB"


def check_shape(path: Path, rows: int, dim: int) -> None:
    """Refuse ``rows`` x ``dim`` vectors wider than :data:`MAX_DIM` or larger as float32 than :func:`max_bytes`.

    Raises
    ------
    ModelError
        One line naming the file and the bound.
    """
    if dim > MAX_DIM:
        raise ModelError(f"{path.name}: vectors of dimension {dim:,}, over the {MAX_DIM:,} bioviz reads "
                         "(a malformed file?)")
    decoded = rows * dim * 4
    if decoded > max_bytes():
        raise ModelError(f"{path.name}: {rows:,} x {dim:,} vectors are {_size(decoded)} as float32, over the "
                         f"{_size(max_bytes())} limit for vectors ({MAX_MB_ENV})")


def check_names_bytes(path: Path, count: int, what: str = "names") -> None:
    """Refuse names that take more than :func:`max_names_bytes` together.

    Raises
    ------
    ModelError
        One line naming the file and the bound.
    """
    if count > max_names_bytes():
        raise ModelError(f"{path.name}: {what} of {_size(count)}, over the {_size(max_names_bytes())} limit "
                         f"for a file's names (an eighth of {MAX_MB_ENV})")


class _Budget:
    """Running totals of what a file has decoded: rows and dimension, names' bytes (the checks while reading)."""

    def __init__(self, path: Path) -> None:
        self.path, self.rows, self.names_bytes = path, 0, 0

    def take(self, names: list[str], rows: np.ndarray) -> None:
        if rows.ndim == 2:
            check_shape(self.path, self.rows + len(rows), rows.shape[1])
        for row, name in enumerate(names):
            if not isinstance(name, str):
                continue  # refused by the conversion's name check (empty, a line break)
            if len(name) > MAX_NAME_CHARS:
                raise ModelError(f"{self.path.name}: the name of row {self.rows + row + 1:,} has "
                                 f"{len(name):,} characters, over the {MAX_NAME_CHARS:,} characters a name may have")
            try:
                self.names_bytes += len(name.encode("utf-8"))
            except UnicodeEncodeError:
                raise ModelError(f"{self.path.name}: the name of row {self.rows + row + 1:,} holds a lone "
                                 f"surrogate ({shown(name)}): not text; "
                                 "save names as valid Unicode") from None
        check_names_bytes(self.path, self.names_bytes)
        self.rows += len(rows)


def projector_name(name: str) -> str:
    """A name as the Projector's metadata TSV holds it: with a leading single quote when a spreadsheet would run it.

    The rule of :func:`bioviz.csv_export.neutralise_cell`, plus a quote for a name that already
    starts with a quote followed by what the rule quotes, so :func:`read_projector_name` gives
    back every name as it was.

    Examples
    --------
    >>> projector_name("=HYPERLINK(1)"), projector_name("'=x"), projector_name("-0.5"), projector_name("'tis")
    ("'=HYPERLINK(1)", "''=x", '-0.5', "'tis")
    """
    return "'" + name if _quoted(name) else name


def read_projector_name(text: str) -> str:
    """A name read from a Projector metadata TSV: :func:`projector_name`'s quote dropped.

    Examples
    --------
    >>> read_projector_name("'=HYPERLINK(1)"), read_projector_name("''=x"), read_projector_name("'tis")
    ('=HYPERLINK(1)', "'=x", "'tis")
    """
    return text[1:] if text.startswith("'") and _quoted(text[1:]) else text


def _quoted(name: str) -> bool:
    """Whether :func:`projector_name` quotes ``name`` (a formula-like text, or a quote before one)."""
    from bioviz.csv_export import neutralise_cell  # imported here: bioviz.csv_export imports pandas (start-up time)

    while True:
        if neutralise_cell(name) != name:
            return True
        if not name.startswith("'"):
            return False
        name = name[1:]


def is_vectors_path(path: Path | str) -> bool:
    """Whether a path's suffix names a vectors file format (``.parquet``, ``.npz``, ``.tsv``).

    Examples
    --------
    >>> is_vectors_path("sapbert.parquet"), is_vectors_path("hp.obo")
    (True, False)
    """
    return Path(path).suffix.lower() in SUFFIXES


def metadata_path(vectors: Path) -> Path:
    """The Projector metadata TSV beside ``vectors``: ``vectors.tsv`` -> ``metadata.tsv``, ``x_vectors.tsv`` ->
    ``x_metadata.tsv``, ``x.tsv`` -> ``x.metadata.tsv``.

    Examples
    --------
    >>> metadata_path(Path("out/sapbert_vectors.tsv")).name, metadata_path(Path("v.tsv")).name
    ('sapbert_metadata.tsv', 'v.metadata.tsv')
    """
    stem = vectors.stem
    if stem.endswith("vectors"):
        return vectors.with_name(stem[: -len("vectors")] + "metadata.tsv")
    return vectors.with_name(stem + ".metadata.tsv")


def source_files(path: Path) -> tuple[Path, ...]:
    """The files a vectors file reads (a TSV's metadata beside it), each checked to exist and fit the limit.

    Raises
    ------
    ModelError
        A missing metadata TSV, or files larger together than :func:`max_bytes`.
    """
    files = (path, metadata_path(path)) if path.suffix.lower() == ".tsv" else (path,)
    for file in files[1:]:
        if not file.is_file():
            raise ModelError(f"{path.name}: the Projector's vectors TSV needs its names in {file.name} beside it")
    size = sum(file.stat().st_size for file in files)
    if size > max_bytes():
        raise ModelError(f"{path.name} is {_size(size)}, over the {_size(max_bytes())} limit "
                         f"for vectors files ({MAX_MB_ENV})")
    return files


def read_chunks(path: Path) -> Iterator[Chunk]:
    """``(names, rows)`` chunks of a vectors file, rows float32 as stored (not yet checked or normalised).

    Raises
    ------
    ModelError
        A file that is not such a vectors file (one line).
    """
    suffix = path.suffix.lower()
    readers = {".parquet": _parquet_chunks, ".npz": _npz_chunks, ".tsv": _tsv_chunks}
    if suffix not in readers:
        raise ModelError(f"{path.name}: a vectors file is {', '.join(SUFFIXES)}")
    budget = _Budget(path)
    try:
        for names, rows in readers[suffix](path):
            budget.take(names, rows)
            yield names, rows
    except ModelError:
        raise
    except MemoryError:
        raise ModelError(f"{path.name}: not enough memory to read it as a vectors file "
                         f"(a smaller {MAX_MB_ENV} refuses such files sooner)") from None
    except Exception as error:  # noqa: BLE001 - a hostile file raises anything (zipfile: NotImplementedError for
        # an unknown compression, RuntimeError for an encrypted member; pyarrow its own types): always one line
        logger.debug("reading %s failed", path, exc_info=True)
        first = (str(error).strip().splitlines() or [type(error).__name__])[0]
        kind = "Parquet" if type(error).__module__.startswith("pyarrow") else "a vectors file"
        raise ModelError(f"{path.name} cannot be read as {kind}: {shown(first, 160)}") from None


def _pick(columns: list[str], preferred: tuple[str, ...], fits) -> str | None:
    """The first preferred column name that fits, else the first column that fits."""
    lowered = {c.lower(): c for c in columns}
    for name in preferred:
        if name in lowered and fits(lowered[name]):
            return lowered[name]
    return next((c for c in columns if fits(c)), None)


def _is_text(kind) -> bool:
    """Whether an Arrow type holds names: a string, or a dictionary of strings (Parquet writers often encode so)."""
    import pyarrow as pa  # imported here: only Parquet vectors files need it (and it takes a second)

    if pa.types.is_dictionary(kind):
        kind = kind.value_type
    return pa.types.is_string(kind) or pa.types.is_large_string(kind) or \
        (hasattr(pa.types, "is_string_view") and pa.types.is_string_view(kind))


def _parquet_declared(table, names: str, vectors: str, path: Path) -> int:
    """Refuse, from the metadata alone, vectors wider or larger than the budget and names over theirs; the width."""
    import pyarrow as pa  # imported here: only Parquet vectors files need it

    meta, kind = table.metadata, table.schema_arrow.field(vectors).type
    columns = [meta.schema.column(i).path.split(".")[0] for i in range(meta.num_columns)]
    values = names_bytes = 0
    for group in range(meta.num_row_groups):
        row_group, group_values = meta.row_group(group), 0
        for index, column in enumerate(columns):
            if column == vectors:
                group_values += row_group.column(index).num_values
            elif column == names:
                names_bytes += row_group.column(index).total_uncompressed_size
        if row_group.num_rows:  # every row of a file has one width: a group's mean is its width
            check_shape(path, row_group.num_rows, -(-group_values // row_group.num_rows))
        values += group_values
    width = kind.list_size if pa.types.is_fixed_size_list(kind) else -(-values // max(meta.num_rows, 1))
    check_shape(path, meta.num_rows, width)
    if values * 4 > max_bytes():
        raise ModelError(f"{path.name}: {values:,} values are {_size(values * 4)} as float32, over the "
                         f"{_size(max_bytes())} limit for vectors ({MAX_MB_ENV})")
    check_names_bytes(path, names_bytes, "names stored as")
    return width


def _parquet_chunks(path: Path) -> Iterator[Chunk]:
    import pyarrow as pa  # imported here: only Parquet vectors files need it (and it takes a second)
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    # Read, not memory-mapped: a batch at a time is all this process holds (a map's touched pages would stay resident)
    table = pq.ParquetFile(path, memory_map=False)
    schema = table.schema_arrow
    names = _pick(schema.names, NAME_COLUMNS, lambda c: _is_text(schema.field(c).type))
    vectors = _pick(schema.names, VECTOR_COLUMNS, lambda c: pa.types.is_list(schema.field(c).type)
                    or pa.types.is_fixed_size_list(schema.field(c).type)
                    or pa.types.is_large_list(schema.field(c).type))
    if names is None or vectors is None:
        raise ModelError(f"{path.name}: a Parquet vectors file needs a string column of names and a list column "
                         f"of vectors; it has {', '.join(schema.names)[:160]}")
    declared = _parquet_declared(table, names, vectors, path)
    # Names kept dictionary-encoded while read: a few bytes of dictionary indices can repeat one long name
    # a million times, so their lengths are checked before a single one is decoded
    table = pq.ParquetFile(path, memory_map=False, read_dictionary=[names])
    for batch in table.iter_batches(batch_size=chunk_rows(declared), columns=[names, vectors]):
        column = batch.column(1)
        if column.null_count:
            raise ModelError(f"{path.name}: {column.null_count:,} rows have no vector (null)")
        lengths = pc.list_value_length(column).to_numpy(zero_copy_only=False)
        width = int(lengths[0]) if len(lengths) else 0
        if len(lengths) and (lengths != width).any():
            row = int(np.flatnonzero(lengths != width)[0])
            raise ModelError(f"{path.name}: vectors of different dimensions ({width} and {int(lengths[row])})")
        name_column = batch.column(0)
        if name_column.null_count:
            raise ModelError(f"{path.name}: a row has no name (null)")
        if pa.types.is_dictionary(name_column.type):
            sizes = pc.take(pc.binary_length(name_column.dictionary), name_column.indices)
        else:
            sizes = pc.binary_length(name_column)
        longest, total = pc.max(sizes).as_py() or 0, pc.sum(sizes).as_py() or 0
        if longest > MAX_NAME_CHARS * 4:  # UTF-8 takes at most 4 bytes a character
            raise ModelError(f"{path.name}: a name of {longest:,} bytes, over the {MAX_NAME_CHARS:,} characters "
                             "a name may have")
        check_names_bytes(path, total)
        values = column.flatten().to_numpy(zero_copy_only=False)
        name_list = name_column.to_pylist()
        yield name_list, np.asarray(values, dtype=np.float32).reshape(len(name_list), width)


def _npy_header(handle, member: str, path: Path) -> tuple[tuple[int, ...], np.dtype, bool]:
    """Shape, dtype and Fortran order of an ``.npy`` member, read from its header alone."""
    version = np.lib.format.read_magic(handle)
    read = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
    shape, fortran, dtype = read(handle, max_header_size=10_000)
    if dtype.hasobject:
        raise ModelError(f"{path.name}: {member} is an object array (a pickle); bioviz never unpickles: "
                         "save names as strings (numpy.str_) and vectors as floats")
    return shape, dtype, fortran


def _npz_member(archive: zipfile.ZipFile, keys: tuple[str, ...], path: Path) -> str:
    members = {name[:-4]: name for name in archive.namelist() if name.endswith(".npy")}
    found = next((members[k] for k in keys if k in members), None)
    if found is None:
        raise ModelError(f"{path.name}: an .npz vectors file holds arrays {' and '.join(('names', 'vectors'))}; "
                         f"it has {', '.join(members)[:160] or 'none'}")
    return found


def _npz_names(archive: zipfile.ZipFile, path: Path) -> list[str]:
    member = _npz_member(archive, ("names",), path)
    with archive.open(member) as handle:
        shape, dtype, _ = _npy_header(handle, "names", path)
        if len(shape) != 1 or dtype.kind not in "US":
            raise ModelError(f"{path.name}: names must be a 1-D array of strings, not {dtype} {shape}")
        chars = dtype.itemsize // 4 if dtype.kind == "U" else dtype.itemsize
        if chars > MAX_NAME_CHARS * (1 if dtype.kind == "U" else 4):  # bytes: UTF-8, at most 4 a character
            raise ModelError(f"{path.name}: names declare up to {chars:,} {'characters' if dtype.kind == 'U' else 'bytes'}"
                             f" each, over the {MAX_NAME_CHARS:,} characters a name may have")
        count = int(shape[0])
        size = count * dtype.itemsize
        if size > max_bytes():
            raise ModelError(f"{path.name}: names declare {_size(size)}, over the {_size(max_bytes())} limit "
                             f"({MAX_MB_ENV})")
        names: list[str] = []
        step = max(1, 2**24 // max(dtype.itemsize, 1))  # 16 MB of the array at a time, never all of it
        for start in range(0, count, step):
            rows = min(step, count - start)
            data = handle.read(rows * dtype.itemsize)
            if len(data) < rows * dtype.itemsize:
                raise ModelError(f"{path.name}: the names are truncated after row {start:,}")
            block = np.frombuffer(data, dtype=dtype, count=rows).tolist()
            names.extend(n.decode("utf-8") if isinstance(n, bytes) else str(n) for n in block)
    return names


def _npz_chunks(path: Path) -> Iterator[Chunk]:
    with zipfile.ZipFile(path) as archive:
        member = _npz_member(archive, MATRIX_KEYS, path)
        with archive.open(member) as handle:  # the matrix's header first: refused before any name is read
            shape, dtype, fortran = _npy_header(handle, "the matrix", path)
        if len(shape) != 2 or dtype.kind not in "fiu":
            raise ModelError(f"{path.name}: vectors must be a 2-D float matrix, not {dtype} of shape {shape}")
        check_shape(path, 0, shape[1])  # the dimension; the size as read or as float32, whichever is larger:
        declared = shape[0] * shape[1] * max(dtype.itemsize, 4)
        if declared > max_bytes():
            raise ModelError(f"{path.name} declares a {shape[0]:,} x {shape[1]:,} {dtype} matrix "
                             f"({declared / 2**30:.1f} GB), over the {max_bytes() / 2**30:.1f} GB limit "
                             f"({MAX_MB_ENV})")
        if fortran and shape[0] > 1 and shape[1] > 1:
            raise ModelError(f"{path.name}: the matrix is stored column-major; save numpy.ascontiguousarray(m)")
        names = _npz_names(archive, path)
        if shape[0] != len(names):
            raise ModelError(f"{path.name}: {len(names):,} names but {shape[0]:,} vector rows")
        with archive.open(member) as handle:
            _npy_header(handle, "the matrix", path)
            step = chunk_rows(shape[1])
            for start in range(0, shape[0], step):
                rows = min(step, shape[0] - start)
                data = handle.read(rows * shape[1] * dtype.itemsize)
                if len(data) < rows * shape[1] * dtype.itemsize:
                    raise ModelError(f"{path.name}: the matrix is truncated after row {start:,}")
                block = np.frombuffer(data, dtype=dtype).reshape(rows, shape[1]).astype(np.float32)
                yield names[start:start + rows], block


def _metadata_names(path: Path) -> list[str]:
    """The names of a Projector metadata TSV (a header row only when it has several columns), unquoted.

    :func:`read_projector_name` drops the quote :func:`projector_name` put before a formula-like name.
    """
    check_names_bytes(path, path.stat().st_size)  # before reading it: the names are held in memory
    lines = path.read_text(encoding="utf-8-sig").split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    lines = [line.rstrip("\r") for line in lines]
    if lines and "\t" in lines[0]:
        header = lines[0].split("\t")
        column = next((i for i, c in enumerate(header) if c.strip().lower() in NAME_COLUMNS), 0)
        lines = [line.split("\t")[column] if line.count("\t") >= column else "" for line in lines[1:]]
    return [read_projector_name(line) for line in lines]


def _tsv_lines(handle, path: Path, done: int) -> list[str]:
    """The next lines of a vectors TSV, about :data:`TSV_CHUNK_CHARS` of text; a line too long is refused."""
    lines: list[str] = []
    chars, longest = 0, MAX_DIM * TSV_VALUE_CHARS
    while chars < TSV_CHUNK_CHARS and len(lines) < CHUNK_ROWS // 4:
        line = handle.readline(longest + 1)
        if not line:
            break
        if len(line) > longest:
            raise ModelError(f"{path.name}: line {done + len(lines) + 1:,} is over {longest:,} characters: more "
                             f"than the {MAX_DIM:,} values a vector may have")
        chars += len(line)
        if line.strip():
            lines.append(line)
    return lines


def _tsv_chunks(path: Path) -> Iterator[Chunk]:
    names = _metadata_names(metadata_path(path))
    done, width = 0, None
    with open(path, encoding="utf-8") as handle:
        while lines := _tsv_lines(handle, path, done):
            try:
                block = np.array([line.rstrip("\r\n").split("\t") for line in lines], dtype=np.float32)
            except ValueError:
                widths = sorted({line.count("\t") + 1 for line in lines})
                if len(widths) > 1:
                    raise ModelError(f"{path.name}: rows of different dimensions ({widths[0]} and "
                                     f"{widths[-1]} values) near row {done + 1:,}") from None
                raise ModelError(f"{path.name}: a value near row {done + 1:,} is not a number") from None
            if width is not None and block.shape[1] != width:
                raise ModelError(f"{path.name}: rows of different dimensions ({width} and {block.shape[1]})")
            width = block.shape[1]
            if done + len(block) > len(names):
                raise ModelError(f"{path.name}: more vector rows than the {len(names):,} names of "
                                 f"{metadata_path(path).name}")
            yield names[done:done + len(block)], block
            done += len(block)
    if done != len(names):
        raise ModelError(f"{path.name}: {done:,} vector rows but {len(names):,} names in {metadata_path(path).name}")
