"""Runs that differ only by their training seed, aggregated: mean and standard deviation.

A paper's table reports a configuration over several seeds. Two trained runs belong to one
*seed group* when their ``run.json`` configs are equal apart from the training ``seed`` (and
what follows from it: the drawn ``split`` record and the ``device`` it ran on). The split
seed is part of the configuration: runs with different explicit ``split_seed`` values are
different configurations. With ``split_seed`` unset the split follows the seed, which is
what "differs only by seed" means for such runs; evaluated together they share one split
anyway (:func:`bioviz.evaluation.splits.choose_split`).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from bioviz.errors import BiovizError
from bioviz.evaluation.result import EvalResult
from bioviz.models.runs import is_run_dir, read_run

# Config fields that may differ within a seed group (see the module's docstring).
SEED_FIELDS = ("seed", "split", "device")


@dataclass(frozen=True)
class SeedGroup:
    """Runs of one configuration trained with different seeds.

    Attributes
    ----------
    label : str
        The configuration's readable name (:func:`bioviz.models.runs.default_run_name`).
    models : tuple of str
        The runs' labels as the results name them, in seed order.
    seeds : tuple of int
        Their training seeds, same order.
    """

    label: str
    models: tuple[str, ...]
    seeds: tuple[int, ...]


@dataclass(frozen=True)
class SeedSummary:
    """One figure of a seed group: mean and sample standard deviation over its seeds."""

    group: str
    task: str
    metric: str
    mean: float
    std: float
    seeds: tuple[int, ...]

    def text(self, digits: int = 3) -> str:
        """``0.512 ± 0.013 (seeds 0, 1, 2)``."""
        seeds = ", ".join(str(s) for s in self.seeds)
        return f"{self.mean:.{digits}f} ± {self.std:.{digits}f} (seeds {seeds})"


def _config_key(config: dict) -> str:
    return json.dumps({k: v for k, v in config.items() if k not in SEED_FIELDS}, sort_keys=True, default=str)


def seed_groups(results: list[EvalResult]) -> list[SeedGroup]:
    """The seed groups among the trained runs of ``results`` (two or more seeds each).

    Parameters
    ----------
    results : list of EvalResult
        A run is found by its ``model_spec``.

    Returns
    -------
    list of SeedGroup
        In the order the groups' first runs appear; runs that cannot be read are left out.
    """
    labels = dict.fromkeys((r.model_spec, r.model) for r in results)
    members: dict[str, list[tuple[int, str]]] = {}
    names: dict[str, str] = {}
    for spec, label in labels:
        if not isinstance(spec, str) or not is_run_dir(spec):
            continue
        try:
            run = read_run(spec)
        except BiovizError:  # a damaged run.json: listed as damaged elsewhere, not grouped here
            continue
        seed = run.settings.seed
        if seed is None:
            continue
        key = _config_key(run.config)
        members.setdefault(key, []).append((seed, label))
        names.setdefault(key, run.default_name)
    groups = []
    for key, runs in members.items():
        runs = sorted(dict.fromkeys(runs))
        if len({seed for seed, _ in runs}) >= 2:
            # Two configurations can share a readable name (it leaves out the learning rate, say).
            label = names[key] if names[key] not in {g.label for g in groups} else f"{names[key]} ({len(groups) + 1})"
            groups.append(SeedGroup(label, tuple(model for _, model in runs), tuple(seed for seed, _ in runs)))
    return groups


def aggregate(rows: list[dict], groups: list[SeedGroup]) -> list[SeedSummary]:
    """Mean and standard deviation (``ddof=1``) of every figure over each group's seeds.

    Parameters
    ----------
    rows : list of dict
        Long-form rows (:func:`bioviz.evaluation.tables.results_table`).
    groups : list of SeedGroup

    Returns
    -------
    list of SeedSummary
        Per group and (task, metric) with at least two seeds scored; the seeds listed are
        those with a figure.
    """
    out = []
    for group in groups:
        seed_of = dict(zip(group.models, group.seeds))
        values: dict[tuple[str, str], list[tuple[int, float]]] = {}
        for row in rows:
            value = row.get("value")
            if row["model"] not in seed_of or value is None or math.isnan(value):
                continue
            values.setdefault((row["task"], row["metric"]), []).append((seed_of[row["model"]], float(value)))
        for (task, metric), scored in values.items():
            if len(scored) < 2:
                continue
            scored.sort()
            numbers = np.array([v for _, v in scored])
            out.append(SeedSummary(group.label, task, metric, float(numbers.mean()), float(numbers.std(ddof=1)),
                                   tuple(s for s, _ in scored)))
    return out


def summary_table(summaries: list[SeedSummary], digits: int = 3) -> pd.DataFrame:
    """Groups x ``task · metric`` strings ``mean ± sd``, the seeds in a column of their own."""
    if not summaries:
        return pd.DataFrame()
    cells: dict[str, dict[str, str]] = {}
    seeds: dict[str, str] = {}
    for s in summaries:
        cells.setdefault(s.group, {})[f"{s.task} · {s.metric}"] = f"{s.mean:.{digits}f} ± {s.std:.{digits}f}"
        seeds[s.group] = ", ".join(str(seed) for seed in s.seeds) if s.group not in seeds else seeds[s.group]
    table = pd.DataFrame.from_dict(cells, orient="index")
    table.insert(0, "seeds", [seeds[g] for g in table.index])
    table.index.name = "configuration"
    return table


def summaries_json(summaries: list[SeedSummary], groups: list[SeedGroup]) -> list[dict]:
    """The command line's ``seed_groups``: each group's runs, seeds and figures (mean, std)."""
    return [{"label": g.label, "models": list(g.models), "seeds": list(g.seeds),
             "figures": [{"task": s.task, "metric": s.metric, "mean": s.mean, "std": s.std, "seeds": list(s.seeds)}
                         for s in summaries if s.group == g.label]}
            for g in groups]
