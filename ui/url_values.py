"""Reading one value from a link: cast, bounded, checked against its choices, never trusted.

A link can carry anything: ``?nn=100000``, ``?md=nan``, ``?limit=-3``, ten thousand
characters, markdown. A value a widget cannot take would crash the page (Streamlit raises
when a slider's value is above its maximum), so every URL value goes through
:func:`read_url_value`: it returns a value the page's widget accepts, and a one-line note
when the link's value was changed or ignored (the page shows it as a warning).
"""

from __future__ import annotations

import math
from typing import Any, Callable

TRUE_WORDS = ("1", "true", "yes", "on")
MAX_URL_TEXT = 4_000  # characters kept of a text value (a term list, a query, a path)
_SHOWN = 40  # characters of a bad value quoted back in a note


def _shown(raw: str) -> str:
    return repr(raw if len(raw) <= _SHOWN else raw[:_SHOWN] + "…")


def _number(raw: str, default):
    """``raw`` as the type of ``default`` (an int or a float); ValueError if it is not a finite one."""
    text = raw.strip()
    if isinstance(default, int):
        try:
            return int(text)
        except ValueError:
            value = float(text)  # "15.0" is a whole number too; "1e400" is inf and refused below
            if not (math.isfinite(value) and value.is_integer()):
                raise ValueError(text) from None
            return int(value)
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(text)
    return value


def read_url_value(name: str, raw: str, default, *, cast: Callable[[str], Any] | None = None,
                   choices=None, bounds: tuple | None = None, max_chars: int = MAX_URL_TEXT):
    """The value a page should use for URL parameter ``name``, and why it differs from the link's, if it does.

    Parameters
    ----------
    name : str
        The URL parameter (only for the note).
    raw : str
        Its value in the link.
    default :
        The page's default; its type says how to read ``raw`` (bool: ``1``/``true``/``yes``/
        ``on``; int; float; str).
    cast : callable, optional
        Reads ``raw`` instead (TypeError or ValueError: the default is used).
    choices : collection, optional
        The allowed values; another value gives the default.
    bounds : (min, max), optional
        Numbers outside are clamped to the nearer bound; ``None`` leaves a side open.
    max_chars : int
        Longer text is cut to this many characters.

    Returns
    -------
    (value, note)
        ``note`` is None when the link's value is used as is, else one line saying what
        was used instead.

    Examples
    --------
    >>> read_url_value("nn", "100000", 15, bounds=(2, 100))
    (100, "the link's nn='100000' is above 100: using 100")
    >>> read_url_value("md", "nan", 0.1, bounds=(0.0, 0.99))[0]
    0.1
    >>> read_url_value("k", "7", 10, bounds=(1, 100))
    (7, None)
    """
    note = None
    raw = str(raw)
    if len(raw) > max_chars:
        raw, note = raw[:max_chars], f"the link's {name} is longer than {max_chars:,} characters: using its beginning"
    try:
        if cast is not None:
            value = cast(raw)
        elif isinstance(default, bool):
            value = raw.strip().lower() in TRUE_WORDS
        elif isinstance(default, (int, float)):
            value = _number(raw, default)
        else:
            value = type(default)(raw) if default is not None else raw
    except (TypeError, ValueError, OverflowError):
        kind = "a whole number" if isinstance(default, int) else "a number" if isinstance(default, float) else "valid"
        return default, f"the link's {name}={_shown(raw)} is not {kind}: using {default!r}"
    if bounds is not None and isinstance(value, (int, float)) and not isinstance(value, bool):
        low, high = bounds
        if low is not None and value < low:
            value, note = low, f"the link's {name}={_shown(raw)} is below {low}: using {low}"
        elif high is not None and value > high:
            value, note = high, f"the link's {name}={_shown(raw)} is above {high}: using {high}"
    if choices is not None and value not in choices:
        return default, f"the link's {name}={_shown(raw)} is not one of the choices: using {default!r}"
    return value, note
