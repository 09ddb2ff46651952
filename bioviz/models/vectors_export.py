"""Writing vectors the other way: a level's names and vectors as a file any bioviz (or the Projector) reads back.

:func:`write_vectors` writes Parquet (``name`` and ``vector`` columns, float32), ``.npz``
(``names`` strings and a ``vectors`` matrix, no pickle) or the TensorFlow Projector's pair
(``x_vectors.tsv`` and ``x_metadata.tsv``), chosen by the suffix, with a model card beside it
(``<stem>.json``: name, dimension, source), so a colleague compares without re-encoding.
A name a spreadsheet would run as a formula (``=HYPERLINK(...)``) gets a leading single quote in
``x_metadata.tsv``, by the CSV exports' rule (:func:`bioviz.models.vectors_formats.projector_name`),
and bioviz drops it when it reads the pair back, so every name comes back as it was.
:func:`pair_as_npz` turns an uploaded Projector pair into one ``.npz`` (an upload is one file).
"""

from __future__ import annotations

import io
import json
import tempfile
from pathlib import Path

import networkx as nx
import numpy as np

from bioviz.errors import ModelError
from bioviz.models.vectors_file import VectorsCard, card_path
from bioviz.models.vectors_formats import SUFFIXES, max_bytes, metadata_path, projector_name, read_chunks
from bioviz.ontology.levels import LevelView
from bioviz.ontology.model import Ontology
from bioviz.paths import atomic_path, write_text_atomic

TSV_DIGITS = 7  # significant digits of a float32 written as text (round-trips to within 1 ulp)


def _check(names, vectors: np.ndarray) -> np.ndarray:
    vectors = np.asarray(vectors, dtype=np.float32)
    if vectors.ndim != 2 or len(vectors) != len(names):
        raise ModelError(f"{len(names):,} names but vectors of shape {vectors.shape}")
    if any("\n" in n or "\t" in n for n in names):
        raise ModelError("a name holds a tab or a line break: it cannot be written one a line")
    return vectors


def export_names(view: LevelView, ontology: Ontology) -> list[str]:
    """What a level's export holds: its names, then every other name under its root (class names, ancestors).

    The evaluations of a level rank class names (hypernyms) and pair names anywhere under the
    root (hierarchy, leaf to parent): with them all, ``--model`` the export gives the numbers
    of the model it was made with.
    """
    under = {view.root} | nx.descendants(ontology.graph, view.root) if view.root in ontology.graph \
        else set(ontology.concepts)
    more = (n for c in sorted(under) if c in ontology.concepts for n in ontology.concepts[c].names)
    hypernyms = (n for names in view.hypernym_names.values() for n in names)
    return list(dict.fromkeys([*view.names, *hypernyms, *more]))


def write_vectors(names, vectors: np.ndarray, path: Path | str, card: VectorsCard | None = None) -> list[Path]:
    """Write ``names`` and their ``vectors`` to ``path`` in the format its suffix names, and the card beside it.

    Parameters
    ----------
    names : sequence of str
    vectors : numpy.ndarray
        ``(len(names), dim)``.
    path : str or Path
        ``.parquet``, ``.npz`` or ``.tsv`` (the Projector's vectors TSV; its metadata TSV is
        written beside it, :func:`bioviz.models.vectors_formats.metadata_path`).
    card : VectorsCard, optional
        Written as ``<stem>.json``.

    Returns
    -------
    list of Path
        The files written.

    Raises
    ------
    ModelError
        Another suffix, or names and vectors that do not fit together.
    """
    path = Path(path)
    names = [str(n) for n in names]
    vectors = _check(names, vectors)
    suffix = path.suffix.lower()
    if suffix not in SUFFIXES:
        raise ModelError(f"{path.name}: write vectors as {', '.join(SUFFIXES)}")
    written = [path]
    if suffix == ".parquet":
        _write_parquet(names, vectors, path)
    elif suffix == ".npz":
        with atomic_path(path, suffix=".npz") as tmp, open(tmp, "wb") as handle:
            np.savez(handle, names=np.array(names, dtype=str), vectors=vectors)
    else:
        _write_tsv(vectors, path)
        write_text_atomic(metadata_path(path), "".join(f"{projector_name(n)}\n" for n in names))
        written.append(metadata_path(path))
    if card is not None:
        write_text_atomic(card_path(path), json.dumps({"name": card.name, "dimension": int(vectors.shape[1]),
                                                       "source": card.source}, indent=1) + "\n")
        written.append(card_path(path))
    return written


def _write_parquet(names: list[str], vectors: np.ndarray, path: Path) -> None:
    import pyarrow as pa  # imported here: only Parquet output needs it
    import pyarrow.parquet as pq

    flat = pa.array(np.ascontiguousarray(vectors).reshape(-1), type=pa.float32())
    column = pa.FixedSizeListArray.from_arrays(flat, int(vectors.shape[1]))
    with atomic_path(path, suffix=".parquet") as tmp:
        pq.write_table(pa.table({"name": pa.array(names, type=pa.string()), "vector": column}), tmp)


def _write_tsv(vectors: np.ndarray, path: Path) -> None:
    with atomic_path(path, suffix=".tsv") as tmp, open(tmp, "w", encoding="utf-8") as out:
        for start in range(0, len(vectors), 10_000):
            buffer = io.StringIO()
            np.savetxt(buffer, vectors[start:start + 10_000], fmt=f"%.{TSV_DIGITS}g", delimiter="\t")
            out.write(buffer.getvalue())


def pair_as_npz(vectors_tsv: bytes, metadata_tsv: bytes) -> bytes:
    """One ``.npz`` (names, vectors) from the bytes of a Projector pair, checked as a vectors file is.

    Raises
    ------
    ModelError
        A pair that cannot be read (rows of different dimensions, names and rows that differ in count),
        or whose vectors or names are over the budget of a vectors file
        (:mod:`bioviz.models.vectors_formats`).
    """
    with tempfile.TemporaryDirectory(prefix="bioviz-pair-") as folder:
        vectors_path = Path(folder) / "upload_vectors.tsv"
        vectors_path.write_bytes(vectors_tsv)
        metadata_path(vectors_path).write_bytes(metadata_tsv)
        names: list[str] = []
        parts = []
        for chunk_names, rows in read_chunks(vectors_path):
            names.extend(chunk_names)
            parts.append(rows)
    if not parts:
        raise ModelError("the Projector pair holds no vectors")
    # numpy stores strings at the longest one's width: that, not the names' own size, is what the .npz holds
    width = len(names) * max(len(n) for n in names) * 4
    if width > max_bytes():
        raise ModelError(f"the Projector pair's {len(names):,} names take {width / 2**20:,.0f} MB as an .npz "
                         f"array, over the {max_bytes() / 2**20:,.0f} MB limit (BIOVIZ_MAX_VECTORS_MB)")
    buffer = io.BytesIO()
    np.savez(buffer, names=np.array(names, dtype=str), vectors=np.concatenate(parts))
    return buffer.getvalue()
