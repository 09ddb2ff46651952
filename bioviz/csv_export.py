"""Every CSV the project writes: text cells a spreadsheet would run as a formula are neutralised.

A spreadsheet evaluates a cell whose text starts with ``=``, ``+``, ``-`` or ``@`` (and, after
its import trims them, a tab or a carriage return): ``=HYPERLINK(...)`` becomes a link,
``=cmd|' /C calc'!A0`` a command (DDE). The text in our exports is often not ours (an
uploaded table's terms, an ontology's names, a run name anyone can change in the app), so
every export goes through :func:`frame_to_csv`, which applies OWASP's rule: such a text cell
gets a leading single quote, which the spreadsheet shows instead of running the rest.

Only text is touched: numbers stay numbers (``-0.5`` as a float is written as ``-0.5``), and a
text that is exactly a plain number (``-0.5``, ``+3``, ``1e-5``) is left as it is, because a
spreadsheet reads it as that number, never as a formula. The header row is text too, and is
treated the same way.

Rows end in CRLF (RFC 4180's line ending): Python's CSV writer quotes a cell only when it holds
a character of the line ending, so with a bare LF a carriage return inside a cell went out
unquoted, and a spreadsheet started a new row there, whose first cell (``=...``) escaped the
check above.
"""

from __future__ import annotations

import io
import re

import pandas as pd

# OWASP's list (= + - @ tab CR), plus a line feed and the full-width forms some spreadsheets
# fold into the ASCII ones: escaping a harmless cell costs one quote, missing one runs it.
FORMULA_TRIGGERS = frozenset("=+-@\t\r\n\uff1d\uff0b\uff0d\uff20")
QUOTE = "'"
_PLAIN_NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")


def neutralise_cell(value):
    """``value`` with a leading quote if it is text a spreadsheet would evaluate; anything else unchanged.

    Parameters
    ----------
    value : object
        One cell: text, a number, None, ...

    Returns
    -------
    object
        ``"'" + value`` for text starting with a formula character (see :data:`FORMULA_TRIGGERS`),
        else ``value`` itself.

    Examples
    --------
    >>> neutralise_cell('=HYPERLINK("http://x","click")')
    '\\'=HYPERLINK("http://x","click")'
    >>> neutralise_cell("@SUM(A1:A9)"), neutralise_cell("heart attack"), neutralise_cell(-0.5)
    ("'@SUM(A1:A9)", 'heart attack', -0.5)
    >>> neutralise_cell("-0.5"), neutralise_cell("-2+3")
    ('-0.5', "'-2+3")
    """
    if not isinstance(value, str) or not value or value[0] not in FORMULA_TRIGGERS:
        return value
    if _PLAIN_NUMBER.fullmatch(value):  # read as that number by a spreadsheet, not as a formula
        return value
    return QUOTE + value


def neutralise_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """A copy of ``frame`` whose text cells and column names are passed through :func:`neutralise_cell`.

    Numeric columns are kept as they are (same dtype): only columns that can hold text are
    looked at.

    Parameters
    ----------
    frame : pandas.DataFrame

    Returns
    -------
    pandas.DataFrame
    """
    out = frame.copy()
    for position, dtype in enumerate(out.dtypes):
        if pd.api.types.is_object_dtype(dtype) or pd.api.types.is_string_dtype(dtype) \
                or isinstance(dtype, pd.CategoricalDtype):
            column = out.iloc[:, position]
            if isinstance(dtype, pd.CategoricalDtype):
                column = column.astype(object)
            out.isetitem(position, column.map(neutralise_cell))
    out.columns = [neutralise_cell(name) for name in out.columns]
    return out


def frame_to_csv(frame: pd.DataFrame, **options) -> str:
    """``frame`` as CSV text (no index), its formula-like text cells neutralised.

    The one way the project writes a CSV: the CLI's ``--out`` files, the evaluation table and
    every download button of the app.

    Parameters
    ----------
    frame : pandas.DataFrame
    **options
        Passed to :meth:`pandas.DataFrame.to_csv` (``float_format``, ...); ``index`` defaults
        to False.

    Returns
    -------
    str
    """
    options.setdefault("index", False)
    options.setdefault("lineterminator", "\r\n")  # a CR inside a cell is then quoted (module docstring)
    buffer = io.StringIO()
    neutralise_frame(frame).to_csv(buffer, **options)
    return buffer.getvalue()
