"""Evaluation results as tables: long-form rows, and paper-ready models x metrics tables, best marked, CSV and LaTeX.

:func:`results_table` turns result dicts (:mod:`bioviz.evaluation.run`) into long-form rows
(one per model, task and metric); the wide tables work on those rows. Every metric here is "higher is better" (mAP, Acc@1, MRR, Spearman,
ROC-AUC), so the best of a column is its maximum; ties are all marked.
"""

from __future__ import annotations

import io
import math

import pandas as pd

from bioviz.evaluation.run import TASK_LABELS

_LATEX_SPECIAL = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
                  "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}",
                  # the separator of run names (residual · HPO d1 · 15-shot), typeset in any LaTeX setup
                  "·": r"$\cdot$"}


METRIC_LABELS = {"map": "mAP", "acc1": "Acc@1", "acc5": "Acc@5", "mrr": "MRR", "spearman": "Spearman", "mean_auc": "mean AUC"}


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


def results_table(results: list[dict]) -> list[dict]:
    """Results in long form: one row per (model, task, metric) with its interval and sample size.

    Returns
    -------
    list of dict
        ``model``, ``task``, ``metric`` (readable), ``key`` (the metric's key), ``value``,
        ``ci_low``, ``ci_high``, ``n`` (queries, pairs covered, or pairs at the two
        distances, as fits the metric).
    """
    rows = []
    for result in results:
        sizes = result.get("sizes", {})
        for key, value in result.get("metrics", {}).items():
            interval = result.get("ci", {}).get(key)
            low, high = interval[:2] if isinstance(interval, (list, tuple)) and len(interval) >= 2 else (None, None)
            rows.append({
                "model": result["model"],
                "task": TASK_LABELS.get(result["task"], result["task"]),
                "metric": metric_label(key),
                "key": key,
                "value": value,
                "ci_low": low,
                "ci_high": high,
                "n": _sample_size(key, sizes),
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


def best_mask(values: pd.DataFrame, digits: int | None = 3) -> pd.DataFrame:
    """True where a value is the best (maximum) of its column; NaN is never best.

    Values are compared as shown (rounded to ``digits``), so two models printed with the
    same figure are both marked, as papers do with bold.
    """
    if values.empty:
        return values.astype(bool)
    shown = values.round(digits) if digits is not None else values
    return shown.eq(shown.max(axis=0)) & shown.notna()


def _number(value: float, digits: int) -> str:
    return "–" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.{digits}f}"


def display_table(values: pd.DataFrame, lows: pd.DataFrame, highs: pd.DataFrame, digits: int = 3,
                  show_ci: bool = True) -> pd.DataFrame:
    """Strings ``0.361 [0.269, 0.456]`` per cell, best of each column prefixed with ``★``.

    Column labels are flattened to ``task · metric`` for on-screen tables.
    """
    best = best_mask(values, digits)
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
    """Long-form CSV: model, task, metric, value, ci_low, ci_high, n."""
    frame = pd.DataFrame(rows, columns=["model", "task", "metric", "value", "ci_low", "ci_high", "n"])
    buffer = io.StringIO()
    frame.to_csv(buffer, index=False, float_format="%.6g")
    return buffer.getvalue()


def latex_escape(text: str) -> str:
    r"""Escape LaTeX's special characters in a label.

    >>> latex_escape("residual · HPO d1 · 15-shot (ecd5) & 100%")
    'residual $\\cdot$ HPO d1 $\\cdot$ 15-shot (ecd5) \\& 100\\%'
    """
    return "".join(_LATEX_SPECIAL.get(ch, ch) for ch in str(text))


def to_latex(values: pd.DataFrame, lows: pd.DataFrame | None = None, highs: pd.DataFrame | None = None,
             caption: str = "", label: str = "tab:evaluation", digits: int = 3) -> str:
    """A booktabs table: one row per model, task headers spanning their metrics, best in bold.

    Parameters
    ----------
    values, lows, highs : pandas.DataFrame
        From :func:`wide_tables`; intervals are printed as a small second line part
        ``\\scriptsize{[low, high]}`` when given.
    caption, label : str
        LaTeX caption and label.
    digits : int
        Decimals.

    Returns
    -------
    str
        A ``table`` environment that needs ``\\usepackage{booktabs}``.
    """
    best = best_mask(values, digits)
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
                text += (rf" {{\scriptsize[{_number(lows.at[model, column], digits)}, "
                         rf"{_number(highs.at[model, column], digits)}]}}")
            cells.append(text)
        lines.append(" & ".join(cells) + r" \\")
    lines += [r"\bottomrule", r"\end{tabular}"]
    if caption:
        lines.append(rf"\caption{{{latex_escape(caption)}}}")
    lines += [rf"\label{{{label}}}", r"\end{table}"]
    return "\n".join(lines) + "\n"
