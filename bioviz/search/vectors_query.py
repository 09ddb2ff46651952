"""A query under a vectors file: its own vector when the file holds it, else the nearest file name's, said so.

A vectors file cannot encode a text it lacks (:mod:`bioviz.models.vectors_encoder`). A query
it holds (exactly or normalised) gets its row; one it lacks is answered from the file name the
lexical ranking puts first (:class:`~bioviz.search.name_search.NameSearch`: exact, prefix, all
words, substring, some words), and the answer says which name stood in
(:attr:`QueryVector.note`); a query that shares nothing with any file name is refused in one line.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

import numpy as np

from bioviz.errors import ModelError, shown
from bioviz.models.model_spec import ModelSpec
from bioviz.models.registry import embed, load_encoder
from bioviz.models.vectors_coverage import vectors_models
from bioviz.search.name_search import NameSearch

_SEARCHES: dict[str, NameSearch] = {}  # per vectors file content: built once per process (a second per 100k names)
_LOCK = threading.Lock()


@dataclass(frozen=True)
class QueryVector:
    """The vector that answers a query, and whose it is.

    Attributes
    ----------
    vector : numpy.ndarray
        Unit float32.
    text : str
        The text whose vector it is: the query, or the file name that stood in for it.
    note : str
        Empty when the query's own vector; else a line saying which file name stood in.
    """

    vector: np.ndarray
    text: str
    note: str = ""


def _file_search(encoder) -> NameSearch:
    with _LOCK:
        key = encoder.fingerprint
        if key not in _SEARCHES:
            _SEARCHES[key] = NameSearch(list(encoder.file.names))
        return _SEARCHES[key]


def query_answer(text: str, model: ModelSpec) -> QueryVector:
    """The vector of ``text`` under ``model``; under a vectors file (or a run on one) that lacks it, the nearest
    file name's.

    Raises
    ------
    ModelError
        A vectors file none of whose names the lexical ranking finds for ``text``.
    """
    files = vectors_models([model])  # the model itself, or the file a run was trained on
    if not files:
        return QueryVector(embed([text], model).vectors[0], text)
    encoder = load_encoder(files[0])
    if int(encoder.file.rows([text])[0]) >= 0:
        return QueryVector(embed([text], model).vectors[0], text)
    found = _file_search(encoder).search(text, limit=1)
    if not found:
        raise ModelError(f"{shown(text)} is not in {encoder.label}, and no name of it shares a word with it: "
                         "a vectors file answers only its own names")
    stand_in = found[0]
    return QueryVector(embed([stand_in], model).vectors[0], stand_in,
                       f"{shown(text)} is not in {encoder.label}: answered from its nearest name {shown(stand_in)} "
                       "(lexical ranking)")


def answer_vectors(texts, model: ModelSpec, *, progress=None, use_cache: bool = True) -> np.ndarray:
    """Unit vectors of ``texts`` (a term list, expanded forms); under a vectors file as :func:`query_answer` gives them.

    Raises
    ------
    ModelError
        As :func:`query_answer`, for a text a vectors file has nothing near.
    """
    texts = list(texts)
    if not vectors_models([model]):
        return embed(texts, model, progress=progress, use_cache=use_cache).vectors
    dim = load_encoder(model).dim
    out = np.stack([query_answer(t, model).vector for t in texts]) if texts else np.zeros((0, dim), np.float32)
    if progress is not None:
        progress(len(texts), len(texts))
    return out
