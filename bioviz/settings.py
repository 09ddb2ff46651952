"""Numeric server settings read from the environment (budgets, quotas), checked in one place."""

from __future__ import annotations

import math
import os

from bioviz.errors import SourceError


def env_number(variable: str, default: float, allow_zero: bool = False) -> float:
    """A positive number from the environment variable ``variable`` (``default`` when unset or blank).

    Raises
    ------
    SourceError
        The value is not a finite number, is negative, or is zero where zero is not allowed
        (one line naming the variable; the server refuses to guess what was meant).

    Examples
    --------
    >>> env_number("BIOVIZ_SURELY_UNSET_SETTING", 60.0)
    60.0
    """
    raw = os.environ.get(variable, "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < 0 or (value == 0 and not allow_zero):
        raise SourceError(f"{variable} must be a positive number (got {raw[:20]!r})")
    return value
