"""A tqdm bar on stderr that the library's ``progress(done, total)`` callbacks drive."""

from __future__ import annotations

import contextlib
import sys

from tqdm import tqdm


@contextlib.contextmanager
def progress_bar(description: str, unit: str = "name", disable: bool = False):
    """Yield a ``progress(done, total)`` callback drawing a tqdm bar (with ETA) on stderr.

    The bar starts at the first count reported (names found cached are done at once, and would
    otherwise make the first rate, and its time left, absurdly fast); tqdm's smoothed rate then
    follows the recent updates, which come every couple of seconds
    (:func:`bioviz.models.shared_encoding.encode_shared`).
    """
    bar = None

    def update(done: int, total: int) -> None:
        nonlocal bar
        if bar is None:
            bar = tqdm(total=total, desc=description, unit=unit, file=sys.stderr, disable=disable,
                       dynamic_ncols=True, initial=done)
        bar.total = total
        bar.update(done - bar.n)

    try:
        yield update
    finally:
        if bar is not None:
            bar.close()
