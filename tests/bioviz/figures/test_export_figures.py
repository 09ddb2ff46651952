"""Figures that survive export (issue 27, item 3): the cases a real-browser walk found broken."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from bioviz.figures import similarity_figures
from bioviz.figures.text import plain
from tests.bioviz.figures.figure_samples import ICD10_CHAPTERS, similarity_comparison


def similar_tails():
    """Two terms that differ only after 60 characters, and a diagonal a hair below 1."""
    comparison = similarity_comparison(8)
    terms = list(comparison.terms)
    head = "Other specified disorders of white blood cells with abnormal laboratory findings"
    terms[3], terms[4] = f"{head}, type A", f"{head}, type B"
    b = comparison.b.copy()
    b[np.diag_indices(len(b))] = 1.0 - 1e-9
    return replace(comparison, terms=tuple(terms), b=b,
                   model_b="residual · ICD-10 d1 · 15-shot · a long run name that runs on")


def test_similarity_prints_no_negative_zero_and_tells_truncated_rows_apart():
    figs = similarity_figures(similar_tails(), "typed", colour_order=["III", "IV", "XVIII"],
                              group_labels=dict(ICD10_CHAPTERS))
    for fig in figs.values():
        for trace in fig.data:
            if trace.type == "heatmap" and trace.text is not None:
                cells = np.asarray(trace.text).ravel().tolist()
                assert not [c for c in cells if c.lstrip("+").startswith("-0.00")]
        rows = [plain(t) for t in fig.layout.yaxis.ticktext if t]
        assert len(rows) == len(set(rows)), rows
        columns = [plain(t) for t in fig.layout.xaxis.ticktext if t]
        assert len(columns) == len(set(columns)), columns
    # the difference's diagonal (1 - 1e-9 minus 1) reads 0.00, not -0.00
    diff = next(t for t in figs["difference"].data if t.type == "heatmap")
    assert np.asarray(diff.text)[0, 0] == "0.00"


def test_similarity_panel_titles_keep_the_whole_model_name():
    fig = similarity_figures(similar_tails(), "typed")["pair"]
    titles = " ".join(plain(a.text).replace("\n", " ") for a in fig.layout.annotations[:2])
    assert "a long run name that runs on" in titles and "…" not in titles
