"""Evaluation results as tables: long-form rows, and paper-ready models x metrics tables, best marked, CSV and LaTeX.

:func:`results_table` turns results (:class:`~bioviz.evaluation.result.EvalResult`) into long-form rows
(one per model, task and metric); the wide tables work on those rows. Every metric here is "higher is better" (mAP, Acc@1, MRR, Spearman,
ROC-AUC). A column's best is marked only when it is a finding: its interval lies above every
other model's, or its paired difference from every other model excludes 0
(:mod:`bioviz.evaluation.paired`); a tie is never marked. Synonym retrieval's test mAP is
the ranking mAP (the same queries and references): it is shown once, under ranking.
"""

from __future__ import annotations

import math
from typing import Callable

import pandas as pd

from bioviz.csv_export import frame_to_csv
from bioviz.evaluation import paired
from bioviz.evaluation.result import EvalResult
from bioviz.evaluation.tasks import TASK_LABELS

_LATEX_SPECIAL = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
                  "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}",
                  # the separator of run names (residual · HPO d1 · 15-shot), typeset in any LaTeX setup
                  "·": r"$\cdot$"}


# Synonym retrieval's test part is the ranking problem itself (bioviz.evaluation.protocols.synonym_problems).
DUPLICATE_OF_RANKING = "test.map"
METRIC_LABELS = {"map": "mAP", "acc1": "Acc@1", "acc5": "Acc@5", "mrr": "MRR", "spearman": "Spearman",
                 "mean_auc": "mean AUC"}


def metric_label(metric: str) -> str:
    """Readable metric name of a result's metric key.

    >>> metric_label("map"), metric_label("zero_shot.acc1"), metric_label("0-1")
    ('mAP', 'zero-shot Acc@1', 'AUC 0 vs 1')
    """
    if "." in metric:
        part, name = metric.split(".", 1)
        return f"{part.replace('_', '-')} {METRIC_LABELS.get(name, name)}"
    if "-" in metric and metric.replace("-", "").isdigit():
        i, j = metric.split("-")
        return f"AUC {i} vs {j}"
    return METRIC_LABELS.get(metric, metric)


def results_table(results: list[EvalResult]) -> list[dict]:
    """Results in long form: one row per (model, task, metric) with its interval and sample size.

    Returns
    -------
    list of dict
        ``model``, ``task``, ``metric`` (readable), ``key`` (the metric's key), ``task_key``
        (the result's task), ``value``, ``ci_low``, ``ci_high``, ``n`` (queries, pairs
        covered, or pairs at the two distances, as fits the metric). Synonym retrieval's
        test mAP is left out where the same model's ranking mAP is there (the same figure).
    """
    rows = []
    ranked = {r.model for r in results if r.task == "ranking"}
    for result in results:
        for key, value in result.metrics.items():
            if result.task == "synonym" and key == DUPLICATE_OF_RANKING and result.model in ranked:
                continue
            interval = result.ci.get(key)
            low, high = interval[:2] if isinstance(interval, (list, tuple)) and len(interval) >= 2 else (None, None)
            rows.append({
                "model": result.model,
                "task": TASK_LABELS.get(result.task, result.task),
                "metric": metric_label(key),
                "key": key,
                "task_key": result.task,
                "value": value,
                "ci_low": low,
                "ci_high": high,
                "n": _sample_size(key, result.sizes),
            })
    return rows


def _sample_size(key: str, sizes: dict):
    if "covered" in sizes:
        return sizes["covered"]
    if "." in key:
        return sizes.get(f"{key.split('.', 1)[0]}.queries")
    if "-" in key and key.replace("-", "").isdigit():
        i, j = key.split("-")
        return _count(sizes.get(f"pairs.d{i}")) + _count(sizes.get(f"pairs.d{j}"))
    if key == "mean_auc":
        return sum(_count(v) for k, v in sizes.items() if k.startswith("pairs."))
    return sizes.get("queries")


def _count(value) -> int:
    """A stored sample size, 0 when absent (or not a count)."""
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def wide_tables(rows: list[dict]) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """Values, interval lows and highs as models x (task, metric) frames.

    Models keep the order in which they first appear in ``rows``; so do the columns.
    """
    if not rows:
        empty = pd.DataFrame()
        return empty, empty, empty
    frame = pd.DataFrame(rows)
    models = list(dict.fromkeys(frame["model"]))
    columns = list(dict.fromkeys(zip(frame["task"], frame["metric"])))

    def pivot(field: str) -> pd.DataFrame:
        table = frame.pivot_table(index="model", columns=["task", "metric"], values=field, aggfunc="first",
                                  dropna=False)
        table = table.reindex(index=models, columns=pd.MultiIndex.from_tuples(columns, names=["task", "metric"]))
        return table.astype(float)

    return pivot("value"), pivot("ci_low"), pivot("ci_high")


def best_mask(values: pd.DataFrame, lows: pd.DataFrame | None = None, highs: pd.DataFrame | None = None, *,
              digits: int | None = 3, beats: Callable[[str, tuple], bool] | None = None) -> pd.DataFrame:
    """True where a value is a column's best *and* that is a finding; NaN is never best.

    Values are compared as shown (rounded to ``digits``). Only a column's single top
    value can be marked (two models printed with the same figure: no mark), and only when
    its interval's low end is above every other model's high end, or when
    ``beats(model, column)`` (a paired test, :func:`paired_beats`) says so. Without
    intervals and a paired test nothing is marked.
    """
    mask = pd.DataFrame(False, index=values.index, columns=values.columns)
    if values.empty:
        return mask
    shown = values.round(digits) if digits is not None else values
    for column in values.columns:
        scored = shown[column].dropna()
        if scored.empty or (scored == scored.max()).sum() > 1:
            continue
        top = scored.idxmax()
        if _separated(top, column, values.index, lows, highs) or (beats is not None and beats(top, column)):
            mask.at[top, column] = True
    return mask


def _separated(top: str, column, models, lows: pd.DataFrame | None, highs: pd.DataFrame | None) -> bool:
    """True when ``top``'s interval lies above every other model's (all intervals known)."""
    if lows is None or highs is None or len(models) < 2:
        return False
    low = lows.at[top, column]
    others = [highs.at[m, column] for m in models if m != top]
    return not math.isnan(low) and not any(math.isnan(h) for h in others) and low > max(others)


def paired_beats(results: list[EvalResult], *, n_boot: int = 1000, seed: int = 0) -> Callable[[str, tuple], bool]:
    """``beats(model, (task, metric))`` for :func:`best_mask`: the paired difference from every
    other model on that column excludes 0 (:func:`bioviz.evaluation.paired.beats_all`)."""
    keys = {(r["task"], r["metric"]): (r["task_key"], r["key"]) for r in results_table(results)}

    def beats(model: str, column: tuple) -> bool:
        if tuple(column) not in keys:
            return False
        task, key = keys[tuple(column)]
        return paired.beats_all(results, model, task, key, n_boot=n_boot, seed=seed)

    return beats


def _number(value: float, digits: int) -> str:
    return "–" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.{digits}f}"


def display_table(values: pd.DataFrame, lows: pd.DataFrame, highs: pd.DataFrame, *, digits: int = 3,
                  show_ci: bool = True, best: pd.DataFrame | None = None) -> pd.DataFrame:
    """Strings ``0.361 [0.269, 0.456]`` per cell, a column's best prefixed with ``★``.

    ``best`` defaults to :func:`best_mask` by intervals alone. Column labels are flattened
    to ``task · metric`` for on-screen tables.
    """
    best = best_mask(values, lows, highs, digits=digits) if best is None else best
    out = pd.DataFrame(index=values.index)
    for column in values.columns:
        cells = []
        for model in values.index:
            text = _number(values.at[model, column], digits)
            if show_ci and not math.isnan(lows.at[model, column]):
                text += f" [{_number(lows.at[model, column], digits)}, {_number(highs.at[model, column], digits)}]"
            cells.append(("★ " if best.at[model, column] else "") + text)
        out[" · ".join(column)] = cells
    out.index.name = "model"
    return out


def to_csv(rows: list[dict]) -> str:
    """Long-form CSV: model, task, metric, value, ci_low, ci_high, n (formula-like text neutralised)."""
    frame = pd.DataFrame(rows, columns=["model", "task", "metric", "value", "ci_low", "ci_high", "n"])
    return frame_to_csv(frame, float_format="%.6g")


def latex_escape(text: str) -> str:
    r"""Escape LaTeX's special characters in a label.

    >>> latex_escape("residual · HPO d1 · 15-shot (ecd5) & 100%")
    'residual $\\cdot$ HPO d1 $\\cdot$ 15-shot (ecd5) \\& 100\\%'
    """
    return "".join(_LATEX_SPECIAL.get(ch, ch) for ch in str(text))


def to_latex(values: pd.DataFrame, lows: pd.DataFrame | None = None, highs: pd.DataFrame | None = None, *,
             caption: str = "", label: str = "tab:evaluation", digits: int = 3,
             best: pd.DataFrame | None = None) -> str:
    """A booktabs table: one row per model, task headers spanning their metrics, best in bold.

    Parameters
    ----------
    values, lows, highs : pandas.DataFrame
        From :func:`wide_tables`; intervals are printed small under the value
        (``{\\scriptsize[low, high]}``) when given.
    caption, label : str
        LaTeX caption and label.
    digits : int
        Decimals.
    best : pandas.DataFrame, optional
        Cells set in bold (:func:`best_mask`, by intervals alone by default).

    Returns
    -------
    str
        A ``table`` environment that needs ``\\usepackage{booktabs}``; at most a page wide
        with a few columns: :func:`bioviz.evaluation.latex.latex_tables` splits wide ones.
    """
    best = best_mask(values, lows, highs, digits=digits) if best is None else best
    columns = list(values.columns)
    tasks = list(dict.fromkeys(task for task, _ in columns))
    lines = [r"\begin{table}[t]", r"\centering", r"\small",
             r"\begin{tabular}{l" + "c" * len(columns) + "}", r"\toprule"]
    header, rules, position = ["Model"], [], 2
    for task in tasks:
        span = sum(1 for t, _ in columns if t == task)
        header.append(rf"\multicolumn{{{span}}}{{c}}{{{latex_escape(task)}}}" if span > 1 else latex_escape(task))
        rules.append(rf"\cmidrule(lr){{{position}-{position + span - 1}}}")
        position += span
    lines.append(" & ".join(header) + r" \\")
    lines.append(" ".join(rules))
    lines.append(" & ".join([""] + [latex_escape(metric) for _, metric in columns]) + r" \\")
    lines.append(r"\midrule")
    for model in values.index:
        cells = [latex_escape(model)]
        for column in columns:
            text = _number(values.at[model, column], digits)
            if best.at[model, column]:
                text = rf"\textbf{{{text}}}"
            if lows is not None and highs is not None and not math.isnan(lows.at[model, column]):
                # The interval stacked under the value (a one-column inner tabular): a column
                # stays as narrow as the interval, so a table of several fits a page.
                interval = (rf"{{\scriptsize[{_number(lows.at[model, column], digits)}, "
                            rf"{_number(highs.at[model, column], digits)}]}}")
                text = rf"\begin{{tabular}}[t]{{@{{}}c@{{}}}}{text}\\ {interval}\end{{tabular}}"
            cells.append(text)
        lines.append(" & ".join(cells) + r" \\")
    lines += [r"\bottomrule", r"\end{tabular}"]
    if caption:
        lines.append(rf"\caption{{{latex_escape(caption)}}}")
    lines += [rf"\label{{{label}}}", r"\end{table}"]
    return "\n".join(lines) + "\n"


def difference_table(differences: list, digits: int = 3) -> pd.DataFrame:
    """Models x ``task · metric`` strings ``+0.012 [-0.004, +0.027]`` of paired differences.

    Parameters
    ----------
    differences : list of :class:`bioviz.evaluation.paired.Difference`
    digits : int

    Returns
    -------
    pandas.DataFrame
        A cell without an interval shows the difference alone (a result without per-item
        values); ``–`` where a figure is missing.
    """
    cells: dict[str, dict[str, str]] = {}
    for d in differences:
        column = f"{TASK_LABELS.get(d.task, d.task)} · {metric_label(d.metric)}"
        if d.delta is None or math.isnan(d.delta):
            text = "–"
        else:
            text = f"{d.delta:+.{digits}f}"
            if d.ci is not None:
                text += f" [{d.ci[0]:+.{digits}f}, {d.ci[1]:+.{digits}f}]"
        cells.setdefault(d.model, {})[column] = text
    table = pd.DataFrame.from_dict(cells, orient="index")
    table.index.name = "model"
    return table
