"""Toolbar export settings per image format, and safe file names for downloads."""

from __future__ import annotations

import re

from bioviz.figures.theme import export_config

FORMATS = ("png", "svg")


def export_config_as(filename: str, fmt: str = "png") -> dict:
    """``config`` for ``st.plotly_chart`` whose camera button saves ``fmt`` (2x PNG or SVG).

    Plotly's toolbar saves one format; pages offer a PNG/SVG switch and pass its value here.
    WebGL traces (large scatter plots) are embedded as an image inside the SVG.
    """
    if fmt not in FORMATS:
        raise ValueError(f"unknown image format {fmt!r}: use one of {', '.join(FORMATS)}")
    options = export_config(filename)
    options["toImageButtonOptions"] = {**options["toImageButtonOptions"], "format": fmt}
    return options


def slug(*parts: object) -> str:
    """A file-name-safe join of ``parts``, empty parts left out.

    >>> slug("minilm", "vs", "char-tfidf", None, "icd10 d1")
    'minilm-vs-char-tfidf-icd10-d1'
    """
    text = "-".join(str(p) for p in parts if p not in (None, ""))
    text = re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-")
    return text[:120] or "figure"
