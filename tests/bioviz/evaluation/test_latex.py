"""LaTeX that fits a page (bioviz.evaluation.latex): one table per family, a bounded column count."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from bioviz.evaluation import latex
from bioviz.evaluation import tables as result_tables
from bioviz.evaluation.run import TASK_LABELS


def wide_rows():
    """19 numeric columns, as the full evaluation of two models gives."""
    columns = [(TASK_LABELS["ranking"], "mAP"), (TASK_LABELS["hypernym"], "MRR"), (TASK_LABELS["hypernym"], "Acc@1")]
    columns += [(TASK_LABELS["synonym"], f"{part} {m}") for part in ("train", "test", "zero-shot")
                for m in ("mAP", "Acc@1", "MRR")]
    columns += [(TASK_LABELS["leaf2parent"], "MRR"), (TASK_LABELS["leaf2parent"], "Acc@1")]
    columns += [(TASK_LABELS["hierarchy-auc"], m) for m in ("mean AUC", "AUC 1 vs 2", "AUC 1 vs 3", "AUC 2 vs 3")]
    columns += [(b, "Spearman") for b in ("MayoSRS", "UMNSRS-sim", "UMNSRS-rel")]
    assert len(columns) == 21
    return [{"model": model, "task": task, "metric": metric, "value": v, "ci_low": v - 0.05, "ci_high": v + 0.05,
             "n": 9}
            for model, v in (("minilm", 0.5), ("run & co", 0.7)) for task, metric in columns]


def test_tables_split_by_family_with_at_most_eight_numeric_columns():
    values, lows, highs = result_tables.wide_tables(wide_rows())
    tex = latex.latex_tables(values, lows, highs, caption="Two models on ICD-10", label="tab:ev")
    counts = latex.numeric_columns(tex)
    assert counts and max(counts) <= latex.MAX_COLUMNS and sum(counts) == 21
    assert tex.count(r"\begin{table}") == len(counts) >= 4
    families = [g[0] for g in latex.column_groups(values.columns)]
    assert families[0] == "ontology tasks" and families[-1] == "relatedness benchmarks"
    assert "hierarchy distances" in families and "synonym retrieval" in families
    assert r"\label{tab:ev-1}" in tex and "(relatedness benchmarks)" in tex
    assert r"run \& co" in tex and r"\textbf{0.700}" in tex  # separated intervals: bold


def test_a_task_wider_than_the_bound_is_split_into_parts():
    values, lows, highs = result_tables.wide_tables(wide_rows())
    tex = latex.latex_tables(values, lows, highs, max_columns=4)
    assert max(latex.numeric_columns(tex)) <= 4 and "Synonym retrieval, part 1 of 3" in tex


@pytest.mark.skipif(shutil.which("pdflatex") is None, reason="pdflatex is not installed here")
def test_the_tables_compile(tmp_path):
    values, lows, highs = result_tables.wide_tables(wide_rows())
    body = latex.latex_tables(values, lows, highs, caption="Two models")
    (tmp_path / "t.tex").write_text("\\documentclass{article}\\usepackage{booktabs}\\begin{document}\n"
                                    + body + "\\end{document}\n")
    done = subprocess.run(["pdflatex", "-interaction=nonstopmode", "t.tex"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0 and "Overfull \\hbox" not in done.stdout, done.stdout[-2000:]
