"""LaTeX of evaluation results that fits a page: one table per task family, a few columns each.

All tasks and benchmarks side by side make some twenty numeric columns, wider than any
page. :func:`latex_tables` splits the models x metrics table by family (ontology ranking
tasks, hierarchy AUC, relatedness benchmarks), packs whole tasks into tables of at most
``max_columns`` numeric columns, and splits a task only when it alone is wider. Each
table is :func:`bioviz.evaluation.tables.to_latex` (booktabs, best in bold, intervals
stacked under the values so a column stays narrow).
"""

from __future__ import annotations

import pandas as pd

from bioviz.evaluation.tasks import TASK_LABELS
from bioviz.evaluation.tables import best_mask, to_latex

MAX_COLUMNS = 8  # numeric columns that fit a page's text width with stacked intervals
FAMILIES = {"ranking": "ontology tasks", "hypernym": "ontology tasks", "synonym": "synonym retrieval",
            "leaf2parent": "ontology tasks", "hierarchy-auc": "hierarchy distances"}
BENCHMARKS = "relatedness benchmarks"


def family(task_label: str) -> str:
    """The family (and so the table) of a task's readable label.

    >>> family("Hypernym detection"), family("MayoSRS")
    ('ontology tasks', 'relatedness benchmarks')
    """
    by_label = {label: key for key, label in TASK_LABELS.items()}
    key = by_label.get(task_label)
    if key is None:
        return BENCHMARKS
    return FAMILIES.get(key, "ontology tasks")  # a task added later joins the ontology table


def column_groups(columns, max_columns: int = MAX_COLUMNS) -> list[tuple[str, list[tuple]]]:
    """Columns ``(task, metric)`` packed into tables: ``(family, columns)`` per table.

    Whole tasks are packed in order while they fit ``max_columns``; a task wider than that is
    split into parts of ``max_columns``.

    >>> column_groups([("MayoSRS", "Spearman"), ("UMNSRS-sim", "Spearman")], max_columns=1)
    [('relatedness benchmarks', [('MayoSRS', 'Spearman')]), ('relatedness benchmarks', [('UMNSRS-sim', 'Spearman')])]
    """
    by_task: dict[str, list[tuple]] = {}
    for column in columns:
        by_task.setdefault(column[0], []).append(tuple(column))
    by_family: dict[str, list[list[tuple]]] = {}
    for task, task_columns in by_task.items():
        pieces = [task_columns[i:i + max_columns] for i in range(0, len(task_columns), max_columns)]
        by_family.setdefault(family(task), []).extend(pieces)
    tables = []
    for name, pieces in by_family.items():
        current: list[tuple] = []
        for piece in pieces:
            if current and len(current) + len(piece) > max_columns:
                tables.append((name, current))
                current = []
            current = current + piece
        if current:
            tables.append((name, current))
    return tables


def latex_tables(values: pd.DataFrame, lows: pd.DataFrame | None = None, highs: pd.DataFrame | None = None,
                 best: pd.DataFrame | None = None, *, caption: str = "", label: str = "tab:evaluation",
                 digits: int = 3, max_columns: int = MAX_COLUMNS) -> str:
    """Booktabs tables of the wide results, one per task family, at most ``max_columns`` numbers wide.

    Parameters
    ----------
    values, lows, highs : pandas.DataFrame
        From :func:`bioviz.evaluation.tables.wide_tables` (intervals optional).
    best : pandas.DataFrame, optional
        Cells set in bold (:func:`bioviz.evaluation.tables.best_mask`; by intervals by default).
    caption, label : str
        Each table's caption gets its family (and part) appended; labels get ``-1``, ``-2``...
    digits : int
        Decimals.
    max_columns : int
        Numeric columns per table.

    Returns
    -------
    str
        The tables one after another (``\\usepackage{booktabs}``).
    """
    if values.empty:
        return ""
    best = best_mask(values, lows, highs, digits=digits) if best is None else best
    groups = column_groups(values.columns, max_columns)
    parts_of: dict[str, int] = {}
    for name, _ in groups:
        parts_of[name] = parts_of.get(name, 0) + 1
    seen: dict[str, int] = {}
    out = []
    for number, (name, columns) in enumerate(groups, start=1):
        seen[name] = seen.get(name, 0) + 1
        part = f", part {seen[name]} of {parts_of[name]}" if parts_of[name] > 1 else ""
        index = pd.MultiIndex.from_tuples(columns, names=values.columns.names)
        pick = (lambda frame: None if frame is None else frame.reindex(columns=index))  # noqa: E731
        text = f"{caption} ({name}{part})" if caption else f"{name[0].upper()}{name[1:]}{part}"
        out.append(to_latex(pick(values), pick(lows), pick(highs), caption=text,
                            label=f"{label}-{number}" if len(groups) > 1 else label, digits=digits,
                            best=pick(best)))
    return "\n".join(out)


def numeric_columns(tex: str) -> list[int]:
    """Numeric columns of each tabular in ``tex`` (from its ``l c c ...`` spec), for checks.

    >>> numeric_columns("\\\\begin{tabular}{lccc}")
    [3]
    """
    counts = []
    marker = "\\begin{tabular}{l"
    for chunk in tex.split(marker)[1:]:
        counts.append(chunk.split("}", 1)[0].count("c"))
    return counts
