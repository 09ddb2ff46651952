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
values, zero rows, a name count that is not the row count.
"""

from __future__ import annotations

import zipfile
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from bioviz.errors import ModelError, shown
from bioviz.settings import env_number

SUFFIXES = (".parquet", ".npz", ".tsv")
MAX_MB_ENV = "BIOVIZ_MAX_VECTORS_MB"
DEFAULT_MAX_MB = 4096
MAX_DIM = 16_384  # wider than any embedding model we know of; a larger "dimension" is a malformed file
CHUNK_ROWS = 65_536  # rows per chunk while converting: bounded memory whatever the file's size
NAME_COLUMNS = ("name", "names", "text", "term")
VECTOR_COLUMNS = ("vector", "vectors", "embedding", "embeddings")
MATRIX_KEYS = ("vectors", "embeddings", "matrix")
Chunk = tuple[list[str], np.ndarray]


def max_bytes() -> int:
    """The largest vectors file (and declared matrix) read: ``BIOVIZ_MAX_VECTORS_MB`` (default 4096)."""
    return int(env_number(MAX_MB_ENV, DEFAULT_MAX_MB) * 2**20)


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
        raise ModelError(f"{path.name} is {size / 2**30:.1f} GB, over the {max_bytes() / 2**30:.1f} GB limit "
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
    try:
        if suffix == ".parquet":
            yield from _parquet_chunks(path)
        elif suffix == ".npz":
            yield from _npz_chunks(path)
        elif suffix == ".tsv":
            yield from _tsv_chunks(path)
        else:
            raise ModelError(f"{path.name}: a vectors file is {', '.join(SUFFIXES)}")
    except ModelError:
        raise
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as error:
        first = (str(error).strip().splitlines() or [type(error).__name__])[0]
        raise ModelError(f"{path.name} cannot be read as a vectors file: {shown(first, 160)}") from None
    except Exception as error:  # noqa: BLE001 - pyarrow raises its own types (ArrowInvalid, ArrowTypeError)
        if type(error).__module__.startswith("pyarrow"):
            first = (str(error).strip().splitlines() or [type(error).__name__])[0]
            raise ModelError(f"{path.name} cannot be read as Parquet: {shown(first, 160)}") from None
        raise


def _pick(columns: list[str], preferred: tuple[str, ...], fits) -> str | None:
    """The first preferred column name that fits, else the first column that fits."""
    lowered = {c.lower(): c for c in columns}
    for name in preferred:
        if name in lowered and fits(lowered[name]):
            return lowered[name]
    return next((c for c in columns if fits(c)), None)


def _parquet_chunks(path: Path) -> Iterator[Chunk]:
    import pyarrow as pa  # imported here: only Parquet vectors files need it (and it takes a second)
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    # Read, not memory-mapped: a batch at a time is all this process holds (a map's touched pages would stay resident)
    table = pq.ParquetFile(path, memory_map=False)
    schema = table.schema_arrow
    names = _pick(schema.names, NAME_COLUMNS, lambda c: pa.types.is_string(schema.field(c).type)
                  or pa.types.is_large_string(schema.field(c).type))
    vectors = _pick(schema.names, VECTOR_COLUMNS, lambda c: pa.types.is_list(schema.field(c).type)
                    or pa.types.is_fixed_size_list(schema.field(c).type)
                    or pa.types.is_large_list(schema.field(c).type))
    if names is None or vectors is None:
        raise ModelError(f"{path.name}: a Parquet vectors file needs a string column of names and a list column "
                         f"of vectors; it has {', '.join(schema.names)[:160]}")
    for batch in table.iter_batches(batch_size=CHUNK_ROWS, columns=[names, vectors]):
        column = batch.column(1)
        if column.null_count:
            raise ModelError(f"{path.name}: {column.null_count:,} rows have no vector (null)")
        lengths = pc.list_value_length(column).to_numpy(zero_copy_only=False)
        width = int(lengths[0]) if len(lengths) else 0
        if len(lengths) and (lengths != width).any():
            row = int(np.flatnonzero(lengths != width)[0])
            raise ModelError(f"{path.name}: vectors of different dimensions ({width} and {int(lengths[row])})")
        values = column.flatten().to_numpy(zero_copy_only=False)
        name_list = batch.column(0).to_pylist()
        if any(name is None for name in name_list):
            raise ModelError(f"{path.name}: a row has no name (null)")
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
        size = int(np.prod(shape)) * dtype.itemsize
        if size > max_bytes():
            raise ModelError(f"{path.name}: names declare {size / 2**30:.1f} GB, over the limit ({MAX_MB_ENV})")
        names = np.frombuffer(handle.read(size), dtype=dtype, count=int(np.prod(shape)))
    return [n.decode("utf-8") if isinstance(n, bytes) else str(n) for n in names.tolist()]


def _npz_chunks(path: Path) -> Iterator[Chunk]:
    with zipfile.ZipFile(path) as archive:
        names = _npz_names(archive, path)
        member = _npz_member(archive, MATRIX_KEYS, path)
        with archive.open(member) as handle:
            shape, dtype, fortran = _npy_header(handle, "the matrix", path)
            if len(shape) != 2 or dtype.kind not in "fiu":
                raise ModelError(f"{path.name}: vectors must be a 2-D float matrix, not {dtype} of shape {shape}")
            declared = shape[0] * shape[1] * dtype.itemsize
            if declared > max_bytes():
                raise ModelError(f"{path.name} declares a {shape[0]:,} x {shape[1]:,} {dtype} matrix "
                                 f"({declared / 2**30:.1f} GB), over the {max_bytes() / 2**30:.1f} GB limit "
                                 f"({MAX_MB_ENV})")
            if fortran and shape[0] > 1 and shape[1] > 1:
                raise ModelError(f"{path.name}: the matrix is stored column-major; save numpy.ascontiguousarray(m)")
            if shape[0] != len(names):
                raise ModelError(f"{path.name}: {len(names):,} names but {shape[0]:,} vector rows")
            for start in range(0, shape[0], CHUNK_ROWS):
                rows = min(CHUNK_ROWS, shape[0] - start)
                data = handle.read(rows * shape[1] * dtype.itemsize)
                if len(data) < rows * shape[1] * dtype.itemsize:
                    raise ModelError(f"{path.name}: the matrix is truncated after row {start:,}")
                block = np.frombuffer(data, dtype=dtype).reshape(rows, shape[1]).astype(np.float32)
                yield names[start:start + rows], block


def _metadata_names(path: Path) -> list[str]:
    """The names of a Projector metadata TSV (a header row only when it has several columns)."""
    lines = path.read_text(encoding="utf-8-sig").split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    lines = [line.rstrip("\r") for line in lines]
    if not lines or "\t" not in lines[0]:
        return lines
    header = lines[0].split("\t")
    column = next((i for i, c in enumerate(header) if c.strip().lower() in NAME_COLUMNS), 0)
    return [line.split("\t")[column] if line.count("\t") >= column else "" for line in lines[1:]]


def _tsv_chunks(path: Path) -> Iterator[Chunk]:
    names = _metadata_names(metadata_path(path))
    done, width = 0, None
    with open(path, encoding="utf-8") as handle:
        while True:
            lines = [line for line in (handle.readline() for _ in range(CHUNK_ROWS // 4)) if line]
            lines = [line for line in lines if line.strip()]
            if not lines:
                break
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
