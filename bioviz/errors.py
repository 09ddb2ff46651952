"""Errors that carry a one-line, user-facing reason.

Every problem caused by input (a malformed file, an unknown id, a level deeper than the
tree, an unreachable model) is raised as a :class:`BiovizError`. The command line prints
its message and exits with code 2; the app shows it with ``st.error``. Anything else is a
bug and keeps its traceback.
"""


class BiovizError(ValueError):
    """Base class: bad input with a one-line explanation for the user."""


class SourceError(BiovizError):
    """An ontology source cannot be read (missing, malformed, unsupported)."""


class UnknownConceptError(BiovizError):
    """A concept id that the ontology does not contain."""


class LevelError(BiovizError):
    """A level view that cannot be built (depth too deep, no names, bad root)."""


class ModelError(BiovizError):
    """A model that cannot be found, loaded or used."""


class SplitError(BiovizError):
    """A split that cannot be drawn with the requested settings."""


class EvaluationError(BiovizError):
    """An evaluation that cannot run with the given settings."""


SHOWN_CHARS = 40  # of a user's text quoted in a message: enough to recognise it
SHOWN_TOTAL = 240  # of a list of such texts: an error stays one readable line


def shown(text, limit: int = SHOWN_CHARS) -> str:
    """``text`` quoted for a one-line message, cut to ``limit`` characters with an ellipsis.

    A header cell, a column name or a term comes from the user's file and can be megabytes
    long: quoted whole, it made a message of megabytes.

    Examples
    --------
    >>> shown("diagnosis"), shown("x" * 100, limit=5)
    ("'diagnosis'", "'xxxxx…'")
    """
    text = str(text)
    return repr(text) if len(text) <= limit else repr(text[:limit])[:-1] + "…" + repr(text[:limit])[-1]


def shown_list(texts, limit: int = SHOWN_CHARS, total: int = SHOWN_TOTAL) -> str:
    """Texts quoted by :func:`shown`, comma-separated, at most about ``total`` characters, then how many more.

    Examples
    --------
    >>> shown_list(["id", "term"]), shown_list(["a" * 50] * 10, limit=10, total=40)
    ("'id', 'term'", "'aaaaaaaaaa…', 'aaaaaaaaaa…', … 8 more")
    """
    texts = list(texts)
    parts: list[str] = []
    length = 0
    for text in texts:
        part = shown(text, limit)
        if parts and length + len(part) + 2 > total:
            break
        parts.append(part)
        length += len(part) + 2
    rest = len(texts) - len(parts)
    return ", ".join(parts) + (f", … {rest:,} more" if rest else "")
