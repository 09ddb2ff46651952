"""A prepared pair set on disk: build the pairs where the sources are, train where the GPU is.

Building the pairs needs the ontologies (the bundled packages, an OBO file, a licensed UMLS
release) and, for the leakage rule, the levels to evaluate on; training needs only the pairs
and a base model. ``python -m trainer pretrain ... --save-pairs FILE`` writes the first
half's result, ``--pairs FILE`` trains on it on another machine (a GPU node with no UMLS
licence, a cluster worker). The file is gzip-compressed JSON, parsed and checked field by
field (never unpickled): a damaged or foreign file is refused with one line. So is a hostile
one: the file is inflated in chunks under :data:`MAX_DECOMPRESSED_BYTES` (a small gzip can
inflate to gigabytes), nesting deeper than :data:`MAX_DEPTH` is refused before it reaches
anything that recurses, and every text is at most :data:`MAX_TEXT_CHARS` characters.
"""

from __future__ import annotations

import gzip
import json
import zlib
from pathlib import Path

from bioviz.errors import BiovizError
from bioviz.output_paths import reporting_as
from bioviz.paths import write_bytes_atomic
from trainer.pretrain.dataset import PairSet
from trainer.pretrain.pairs import OBJECTIVES, Pair

FORMAT = "bioviz-pretrain-pairs"
VERSION = 1
_TEXT_FIELDS = ("anchor", "positive", "objective", "source", "kind")
# The full recipe of the three bundled ontologies (323,122 pairs) is 98 MiB of JSON: five
# times that fits a larger source (parsed, it takes about three times its size in memory).
MAX_DECOMPRESSED_BYTES = 512 * 2**20
# The format nests five deep (document, settings, exclude_levels, one level, its split).
MAX_DEPTH = 16
# The longest text of the full recipe is a definition of 2,036 characters.
MAX_TEXT_CHARS = 10_000
_CHUNK = 2**20


def _row(pair: Pair) -> list:
    # Rows are lists, not dicts: a third of the size for 300k pairs.
    return [pair.anchor, pair.positive, pair.objective, pair.source, pair.kind, list(pair.concepts),
            list(pair.names), pair.negative, pair.negative_concept]


def _pair(row, where: str) -> Pair:
    if not isinstance(row, list) or len(row) != 9:
        raise BiovizError(f"{where}: not a pair row")
    anchor, positive, objective, source, kind, concepts, names, negative, negative_concept = row
    texts_ok = all(isinstance(v, str) for v in (anchor, positive, objective, source, kind))
    lists_ok = all(isinstance(v, list) and all(isinstance(x, str) for x in v) for v in (concepts, names))
    optional_ok = all(v is None or isinstance(v, str) for v in (negative, negative_concept))
    if not (texts_ok and lists_ok and optional_ok) or objective not in OBJECTIVES:
        raise BiovizError(f"{where}: not a pair row")
    # A text no tokenizer would keep whole, and that costs its size again in every dataset copy.
    texts = (anchor, positive, objective, source, kind, *concepts, *names, negative or "", negative_concept or "")
    if max(map(len, texts)) > MAX_TEXT_CHARS:
        raise BiovizError(f"{where}: a text longer than {MAX_TEXT_CHARS:,} characters")
    return Pair(anchor, positive, objective, source, kind, tuple(concepts), tuple(names), negative,
                negative_concept)


def save_pairset(pairs: PairSet, path: str | Path, settings: dict) -> Path:
    """Write ``pairs`` (and the settings that made them) to ``path``, atomically.

    Parameters
    ----------
    pairs : PairSet
    path : str or Path
        The file to write (conventionally ``*.pairs.json.gz``).
    settings : dict
        What the pairs were built from (sources, objectives, exclusions, seed ...), kept in
        the file and in every run trained on it.
    """
    document = {"format": FORMAT, "version": VERSION, "settings": settings,
                "available": pairs.available, "excluded": pairs.excluded,
                "overlap_dropped": pairs.overlap_dropped,
                "train": [_row(p) for p in pairs.train], "validation": [_row(p) for p in pairs.validation]}
    data = gzip.compress(json.dumps(document, ensure_ascii=False).encode("utf-8"), compresslevel=6, mtime=0)
    path = Path(path)
    with reporting_as(path, "--save-pairs"):  # the user's path, not the temporary file's
        write_bytes_atomic(path, data)
    return path


def _inflate(path: Path) -> bytearray:
    """The decompressed bytes of ``path``, refused past :data:`MAX_DECOMPRESSED_BYTES`.

    Two passes: the first only counts what the stream inflates to (one chunk in memory at a
    time), so a gzip bomb is refused before anything is kept; the second reads into one buffer
    of exactly that size. Growing a buffer chunk by chunk held up to twice the cap while it was
    copied on each growth, and a process under a 1.5 GB address-space limit (the training stack
    maps much of it) got a MemoryError before the cap was reached.
    """
    size = 0
    with gzip.GzipFile(path, "rb") as stream:
        while chunk := stream.read(_CHUNK):
            size += len(chunk)
            if size > MAX_DECOMPRESSED_BYTES:
                raise BiovizError(f"{path} inflates to more than {MAX_DECOMPRESSED_BYTES // 2**20} MiB: "
                                  "not a pair file this bioviz reads")
    data = bytearray(size)
    view, done = memoryview(data), 0
    with gzip.GzipFile(path, "rb") as stream:
        while done < size and (got := stream.readinto(view[done:done + _CHUNK])):
            done += got
    if done != size:  # the file changed between the passes
        raise BiovizError(f"{path} changed while it was read")
    return data  # not bytes(data): a copy of up to the cap


def _too_deep(value) -> bool:
    """Whether ``value`` nests more than :data:`MAX_DEPTH` lists and dicts (walked without recursion)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, (list, dict)):
            if depth > MAX_DEPTH:
                return True
            stack.extend((child, depth + 1) for child in (item.values() if isinstance(item, dict) else item))
    return False


def load_pairset(path: str | Path) -> tuple[PairSet, dict]:
    """The pair set in ``path`` and the settings it was built with.

    Raises
    ------
    BiovizError
        The file is missing, not a gzip JSON pair file of this format, or holds a bad row.
    """
    path = Path(path)
    try:
        document = json.loads(_inflate(path).decode("utf-8"))
    except BiovizError:  # too large (a ValueError too: kept apart from the ones below)
        raise
    except FileNotFoundError:
        raise BiovizError(f"no pair file at {path}") from None
    except IsADirectoryError:
        raise BiovizError(f"{path} is a folder, not a pair file") from None
    except MemoryError:  # within the cap, but more than this process's memory (an address-space limit)
        raise BiovizError(f"{path} is too large for the memory this process may use: a smaller pair file, "
                          "or more memory") from None
    except RecursionError:  # deeper than the JSON parser goes (about a thousand levels)
        raise BiovizError(f"{path} is nested more than {MAX_DEPTH} levels deep: not a pair file") from None
    except (OSError, EOFError, zlib.error, UnicodeDecodeError, ValueError):
        raise BiovizError(f"{path} is not a pair file (expected gzip JSON written by --save-pairs)") from None
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        raise BiovizError(f"{path} is not a pair file (expected gzip JSON written by --save-pairs)")
    # Shallower than the parser's limit, still deep enough to break the json.dumps of
    # pretrain.json after training. The rows are not walked: _pair takes only their one shape.
    if _too_deep({key: value for key, value in document.items() if key not in ("train", "validation")}):
        raise BiovizError(f"{path} is nested more than {MAX_DEPTH} levels deep: not a pair file")
    if document.get("version") != VERSION:
        raise BiovizError(f"{path} is a pair file of version {document.get('version')!r}; "
                          f"this bioviz reads version {VERSION}")
    try:
        if not (isinstance(document["train"], list) and isinstance(document["validation"], list)):
            raise TypeError
        train = [_pair(row, f"{path}: training pair {i + 1}") for i, row in enumerate(document["train"])]
        validation = [_pair(row, f"{path}: validation pair {i + 1}")
                      for i, row in enumerate(document["validation"])]
        records = {key: document.get(key) or {} for key in ("available", "excluded", "settings")}
        if not all(isinstance(value, dict) for value in records.values()):
            raise TypeError
        pairs = PairSet(train, validation, records["available"], records["excluded"],
                        int(document.get("overlap_dropped") or 0))
    except BiovizError:
        raise  # a bad row, named
    except (KeyError, TypeError, ValueError):
        raise BiovizError(f"{path} is not a complete pair file") from None
    return pairs, records["settings"]


def subset(pairs: PairSet, objectives=None, sources=None) -> PairSet:
    """The pairs of some objectives and sources only, training and validation alike.

    A validation slice drawn over every objective stays apart from every training pair, so
    the slice of a subset is a valid validation set for that subset.

    Raises
    ------
    BiovizError
        An objective or source the file does not hold, or fewer than two training pairs left.
    """
    held_objectives = {p.objective for p in pairs.train}
    held_sources = {p.source for p in pairs.train}
    for wanted, held, what in ((objectives, held_objectives, "objective"), (sources, held_sources, "source")):
        missing = sorted(set(wanted or ()) - held)
        if missing:
            raise BiovizError(f"the pair file holds no {what} {', '.join(missing)} "
                              f"(it holds {', '.join(sorted(held))})")

    def keep(p: Pair) -> bool:
        return (not objectives or p.objective in objectives) and (not sources or p.source in sources)

    train = [p for p in pairs.train if keep(p)]
    if len(train) < 2:
        raise BiovizError(f"only {len(train)} training pairs in that part of the pair file: nothing to pretrain on")
    available = {s: {o: n for o, n in per.items() if not objectives or o in objectives}
                 for s, per in pairs.available.items() if not sources or s in sources}
    return PairSet(train, [p for p in pairs.validation if keep(p)], available, pairs.excluded, pairs.overlap_dropped)
