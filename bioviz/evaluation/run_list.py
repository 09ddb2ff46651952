"""The Train page's run list: one line per trained run, and the evaluations stored with a run.

It lives next to evaluation (not in :mod:`bioviz.models.runs`) because its lines count and
tabulate stored results: reading runs must not depend on evaluation, which loads models.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from bioviz.evaluation.result import EvalResult
from bioviz.evaluation.store import is_result, read_run_evaluations
from bioviz.evaluation.tables import results_table
from bioviz.models.runs import RunRecord, shots_text


def _stored_level_text(view: dict) -> str:
    """The level of a stored result's view key (:func:`bioviz.evaluation.store.view_key`).

    Not :attr:`LevelSpec.label`: the key's ``source`` is the ontology's label with its version
    (``mini mini/2026-01-01``), which that label would shorten as if it were a file path.
    """
    under = f" under {view['root']}" if view.get("root") else ""
    cut = "synonym sets" if view.get("mode") == "synonyms" else f"d{view.get('depth')}"
    return f"{view.get('source') or '?'}{under} {cut}"


def _created(run: RunRecord) -> str:
    """``YYYY-MM-DD HH:MM`` (UTC) from ``run.json``, else from its modification time; ``?`` if neither."""
    try:
        return dt.datetime.fromisoformat(run.created).astimezone(dt.timezone.utc).strftime("%Y-%m-%d %H:%M")
    except (TypeError, ValueError, OverflowError):  # absent, not a time, or out of range in UTC
        pass
    if run.modified is None:
        return "?"
    return dt.datetime.fromtimestamp(run.modified, dt.timezone.utc).strftime("%Y-%m-%d %H:%M")


def _cell(value):
    """A value a table cell can show: text, numbers, booleans and None as they are, anything else as text."""
    return value if value is None or isinstance(value, (str, int, float, bool)) else str(value)


def _number(value):
    """``value`` when it is a number (not a boolean), else None."""
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _test_map(metrics: dict, which: str):
    """The trainer's own test class-retrieval mAP (``metrics[which]["test"]["mAP"]``), or None."""
    part = metrics.get(which)
    test = part.get("test") if isinstance(part, dict) else None
    return _number(test.get("mAP")) if isinstance(test, dict) else None


def run_row(run: RunRecord) -> dict:
    """One line of the run list: its name, what was trained on what, when, and what is stored with it.

    ``name`` is the run's readable name (the user's, else the default, :attr:`RunRecord.name`),
    ``run`` its id. A damaged run (:attr:`RunRecord.damaged`) gets a line too, with the reason
    under ``damaged`` (None for a sound run) and nothing it cannot know.
    """
    settings = run.settings
    pretraining = settings.pretraining
    if pretraining is not None:  # a pretrained base model: no level, no shots, its sources instead
        trained_on = "pretraining on " + (", ".join(Path(s).name for s in pretraining.sources) or "?")
        shots = None
    else:
        trained_on = settings.level.label if settings.level is not None else "?"
        shots = ("all" if settings.shots is None else settings.shots) if settings.shots_known else "?"
    source = settings.input
    mix = run.metrics.get("base_mix")
    return {
        "name": None if run.damaged else run.name,
        "run": run.run_id,
        "encoder": None if run.damaged else settings.encoder or "?",
        "trained on": None if run.damaged else trained_on,
        "shots": None if run.damaged else shots,
        "base": None if run.damaged else Path(settings.init).name + " (init)" if settings.init
        else (source.label if source is not None else None) or settings.base or "?",
        "created (UTC)": _created(run),
        "test mAP base": _test_map(run.metrics, "baseline"),
        "test mAP trained": _test_map(run.metrics, "trained"),
        # How much of its input a head run keeps (trainer.base_mix); empty for fine-tuned runs.
        "base weight": _number(mix.get("weight")) if isinstance(mix, dict) else None,
        "stored evaluations": len(read_run_evaluations(run.path)),
        "damaged": run.damaged,
        "path": str(run.path),
    }


def evaluated_on(result: dict) -> str:
    """Where a stored result was computed: the level and split, the ontology, or the benchmark."""
    data = _mapping(result.get("data"))
    if "benchmark" in data:
        return "relatedness benchmark"
    view, split = _mapping(data.get("view")), _mapping(data.get("split"))
    if view:
        where = _stored_level_text(view)
        if split:
            where += f" · {shots_text(split.get('shots'))}, seed {split.get('seed')}"
            if split.get("zero_shot_classes"):
                where += f", {split['zero_shot_classes']} zero-shot classes"
        return where
    if "ontology" in data:
        return f"{data['ontology']} under {data.get('root')}"
    return "?"


def stored_results_rows(run_dir: str | Path) -> list[dict]:
    """The evaluations stored with a run (``<run>/.eval.json``), one row per figure.

    Returns
    -------
    list of dict
        ``evaluated on``, ``task``, ``metric``, ``value``, ``ci_low``, ``ci_high``, ``n``,
        ordered by where they were computed, then task.
    """
    rows = []
    for result in filter(is_result, read_run_evaluations(run_dir)):  # results of another form are skipped
        where = evaluated_on(result)
        for row in results_table([EvalResult.from_dict(result)]):
            rows.append({"evaluated on": where, **{k: v for k, v in row.items() if k not in ("model", "key")}})
    return sorted(rows, key=lambda r: (r["evaluated on"], r["task"]))


def _mapping(value) -> dict:
    """``value`` when it is a dict, else empty (a stored field of another form)."""
    return value if isinstance(value, dict) else {}
