"""``--partial`` of ``neighbours`` and ``code``: a marked first answer while the level encodes, the final one after.

Off by default: a script reads one result. With it, a level whose vectors are not stored yet is
encoded in a background thread (:func:`bioviz.models.encoding_session.encode_in_background`);
meanwhile the command prints, as soon as the model has encoded the query, an answer from the
names' spelling and the names encoded so far (:mod:`bioviz.search.progressive`), marked
``partial: N of M names encoded, refining`` (a JSON object with ``"partial": true`` under
``--json``, one per line), then waits for the encoding under its usual bar and prints the final
answer. Its lexical ranking is the name search (built in about a second), not char-tfidf, whose
rows take tens of seconds on a large level: the first answer is what should come fast.
"""

from __future__ import annotations

import math
import sys

from bioviz.cli.progress import progress_bar
from bioviz.models.encoding_session import EncodingSession, encode_in_background

POLL_S = 1.0


def add_partial_option(parser) -> None:
    """``--partial``: print a marked partial answer while the level encodes (shared by ``neighbours`` and ``code``)."""
    parser.add_argument("--partial", action="store_true",
                        help="while the level's names are encoded for the first time, print a partial answer at "
                             "once (marked 'partial: N of M names encoded, refining'), then the final one")


def print_now(result: dict, as_json: bool) -> None:
    """Print a partial result at once (before the final one, which :func:`bioviz.cli.main` prints)."""
    from bioviz.cli import print_result  # the package imports its commands: imported when first printed

    print_result(result, as_json)
    sys.stdout.flush()


def plain(row: dict) -> dict:
    """A partial answer's row for printing: without its level row, a score of a name not encoded as None (not NaN)."""
    return {key: None if isinstance(value, float) and math.isnan(value) else value
            for key, value in row.items() if key != "row"}


def encoding_started(model, view, *, owner: str = "a command"):
    """The background encoding of ``view``'s names under ``model``; None when they are stored already."""
    session = EncodingSession.of(model, view.names, owner=owner)
    return None if session.ready() else encode_in_background(session)


def wait_for(job, quiet: bool) -> None:
    """Wait for a background encoding under a bar that follows its progress; its error is raised here."""
    with progress_bar(f"encoding {len(job.session.texts):,} names ({job.session.label})", disable=quiet) as bar:
        while not job.wait(POLL_S):
            progress = job.session.progress()
            if progress is not None:
                bar(progress.done, progress.total)
    if job.error is not None:
        raise job.error
