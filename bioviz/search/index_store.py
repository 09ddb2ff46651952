"""Built approximate search indexes on disk, keyed by the vectors they index and their settings.

An approximate index over a million names takes minutes to build on a small CPU (see
docs/scale.md, "Search and memory at 1M"), and the app builds one per model and level.
So a built index is written to ``BIOVIZ_HOME/indexes/<kind>-<vectors>-<settings>.faiss`` in
faiss' own binary format (``faiss.write_index``/``read_index``: no pickle) and read back
the next time the same vectors are indexed with the same settings.

``<vectors>`` is the SHA-1 of the float32 vectors' bytes (with their shape): any change in a
vector makes another file, so a stored index never answers for other vectors. Like every
cache under BIOVIZ_HOME (:mod:`bioviz.cache_files`), a file is written atomically (a reader
never sees half of one), a write the disk refuses is skipped with a warning, and a file that
cannot be read or does not fit (another dimension, row count or index type) is set aside as
``<name>.corrupt-<time>`` and the index rebuilt.
"""

from __future__ import annotations

import hashlib
import json
import logging
from pathlib import Path

import numpy as np

from bioviz.cache_files import describe, read_cache
from bioviz.paths import atomic_path, home

logger = logging.getLogger(__name__)

FOLDER = "indexes"
SUFFIX = ".faiss"


def vectors_fingerprint(vectors: np.ndarray) -> str:
    """SHA-1 of a float32 array's shape and bytes (about 1.4 s for 1M x 384 on this project's CPU)."""
    array = np.ascontiguousarray(vectors, dtype=np.float32)
    digest = hashlib.sha1(f"{array.shape}".encode())
    digest.update(memoryview(array).cast("B"))
    return digest.hexdigest()


def index_path(kind: str, fingerprint: str, settings: dict) -> Path:
    """Where the index of ``kind`` over the vectors ``fingerprint`` with ``settings`` is stored."""
    key = hashlib.sha1(json.dumps(settings, sort_keys=True).encode()).hexdigest()[:12]
    return home() / FOLDER / f"{kind}-{fingerprint[:24]}-{key}{SUFFIX}"


def load_index(path: Path, expected_type: type, ntotal: int, dim: int):
    """The stored faiss index at ``path``, or None when absent or unfit (then it is set aside).

    Parameters
    ----------
    path : pathlib.Path
    expected_type : type
        The faiss index class it must be (e.g. ``faiss.IndexIVFScalarQuantizer``).
    ntotal, dim : int
        Rows and dimensions it must hold.
    """
    import faiss  # imported here: slow to import, and only indexes need it

    def read(file: Path):
        if not file.is_file():
            raise FileNotFoundError(file)
        try:
            index = faiss.read_index(str(file))
        except RuntimeError as error:  # faiss reports a damaged file as a RuntimeError
            raise ValueError(f"faiss cannot read it: {describe(error)}") from error
        if not isinstance(index, expected_type) or index.ntotal != ntotal or index.d != dim \
                or index.metric_type != faiss.METRIC_INNER_PRODUCT:
            raise ValueError(f"a {type(index).__name__} of {index.ntotal} x {index.d}, "
                             f"not a {expected_type.__name__} of {ntotal} x {dim}")
        return index

    return read_cache(path, read)


def save_index(path: Path, index) -> bool:
    """Write ``index`` to ``path`` atomically; a write the disk refuses is logged and skipped.

    Returns
    -------
    bool
        True when written.
    """
    import faiss  # imported here, as in load_index

    try:
        with atomic_path(path, suffix=SUFFIX) as tmp:
            faiss.write_index(index, str(tmp))
    except (OSError, RuntimeError) as error:  # faiss reports a failed write as a RuntimeError
        logger.warning("not storing the search index %s: %s", path.name, describe(error))
        return False
    return True
