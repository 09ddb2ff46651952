"""Which split an evaluation uses, and which names the compared runs have already seen.

Given settings win; otherwise trained runs bring the split they were trained with (from
their ``run.json``), else the one default split. Names a run trained or validated on (its
``split.json``) are left out of every model's held-out queries.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from bioviz.errors import EvaluationError
from bioviz.models.model_spec import ModelSpec
from bioviz.models.runs import is_run_dir, read_run, read_split_names
from bioviz.ontology import DEFAULT_SPLIT, SplitSpec


def split_spec_for_run(run_dir: str | Path) -> SplitSpec | None:
    """The split a trained run was trained with, from its ``run.json`` config (None if unknown).

    Raises
    ------
    ModelError
        For a damaged run: an unreadable ``run.json``, or split settings that are not numbers.
    """
    if not is_run_dir(run_dir):
        return None
    return read_run(run_dir).split_spec()


def choose_split(models: Sequence[ModelSpec], *, shots=None, seed=None, test_per_class=None,
                 zero_shot_classes=None) -> tuple[SplitSpec, list[str]]:
    """The split to evaluate on: given settings, else the runs' own split, else the defaults.

    Parameters
    ----------
    models : sequence of ModelSpec
        Trained runs among them bring the split they were trained with.
    shots, seed, test_per_class, zero_shot_classes : optional
        Explicit settings (any given one overrides the runs' split).

    Returns
    -------
    (SplitSpec, warnings)
        ``warnings`` names runs evaluated on a split other than their own whose training
        names are unknown (no ``split.json``), so they may be among the test names.

    Raises
    ------
    EvaluationError
        If runs trained on different splits are compared and no setting is given.
    """
    explicit = {k: v for k, v in {"shots": shots, "seed": seed, "test_per_class": test_per_class,
                                  "zero_shot_classes": zero_shot_classes}.items() if v is not None}
    run_specs = {m: s for m in _runs(models) if (s := split_spec_for_run(m.path)) is not None}
    if explicit:
        spec = replace(DEFAULT_SPLIT, **explicit)
        # Runs with a split.json have their training names left out of the queries
        # (evaluate's exclude_names); only runs without one are at risk.
        warnings = [f"{model.spec} was trained on another split ({own}) and has no split.json: its training names "
                    "may be among the test names" for model, own in run_specs.items()
                    if own != spec and not run_seen_names(model.path)]
        return spec, warnings
    distinct = set(run_specs.values())
    if len(distinct) > 1:
        raise EvaluationError("the runs were trained on different splits; choose one with --shots/--seed/"
                              "--test-per-class/--zero-shot")
    return (distinct.pop() if distinct else DEFAULT_SPLIT), []


def run_seen_names(run_dir: str | Path) -> list[str]:
    """Training and validation names of a trained run (its ``split.json``); empty if unknown."""
    names = read_split_names(run_dir) or {}
    return [n for part in ("train", "validation") for n in names.get(part, [])]


def seen_by_runs(models: Sequence[ModelSpec]) -> list[str]:
    """Every name that a run among ``models`` trained or validated on (sorted, distinct)."""
    return sorted({n for m in _runs(models) for n in run_seen_names(m.path)})


def _runs(models: Sequence[ModelSpec]) -> list[ModelSpec]:
    """The trained runs among ``models`` (a run parsed earlier and deleted since is left out)."""
    return [m for m in models if m.kind == "run" and is_run_dir(m.path)]
