"""``python -m bioviz eval``'s comparison options: differences from a baseline, seed groups, LaTeX.

    python -m bioviz eval --model minilm --model RUN ... --baseline minilm --json
    python -m bioviz eval --model RUN_S0 --model RUN_S1 ... --latex table.tex

``--baseline MODEL`` adds ``differences``: every other model's figure minus the baseline's
per task (``delta``) with its paired 95% bootstrap interval (``delta_ci``, null for a
result computed before per-item values were kept). Runs that differ only by their training
seed are summarised as ``seed_groups`` (mean and standard deviation). ``--latex FILE``
writes the results as booktabs tables of at most eight numeric columns, one per family.
"""

from __future__ import annotations

from pathlib import Path

from bioviz.errors import BiovizError, EvaluationError
from bioviz.evaluation import aggregate, latex, paired
from bioviz.evaluation import tables as result_tables
from bioviz.evaluation.result import EvalResult
from bioviz.evaluation.tasks import EvalSettings
from bioviz.models.model_spec import ModelSpec


def add_compare_options(parser) -> None:
    """Add ``--baseline`` and ``--latex`` to the ``eval`` parser."""
    group = parser.add_argument_group("comparison")
    group.add_argument("--baseline", metavar="MODEL", default=None,
                       help="one of the --model values (or its label): every other model's difference from it per "
                            "task, with a paired bootstrap interval (same queries or pairs resampled for both)")
    group.add_argument("--latex", metavar="FILE", default=None,
                       help="write booktabs tables (one per task family, at most 8 numeric columns) to FILE")


def baseline_among(text: str, models: list[ModelSpec]) -> ModelSpec:
    """The ``--model`` that ``--baseline`` names: by its MODEL text, its label, or the same directory.

    Raises
    ------
    EvaluationError
        A baseline that is not among the models (before anything is evaluated).
    """
    wanted = text.strip()
    for model in models:
        if wanted in (model.spec, model.label):
            return model
    try:
        parsed = ModelSpec.parse(wanted)
    except BiovizError:
        parsed = None
    for model in models:
        if parsed is not None and parsed.path is not None and parsed.path == model.path:
            return model
    labels = ", ".join(dict.fromkeys(model.label for model in models))
    raise EvaluationError(f"baseline {text!r} is not among the evaluated models ({labels})")


def comparisons(results: list[EvalResult], args, settings: EvalSettings, *, baseline: ModelSpec | None = None
                ) -> dict:
    """The comparison parts of the output: ``differences`` (from ``baseline``), ``seed_groups``, ``latex``.

    Raises
    ------
    EvaluationError
        A LaTeX file that cannot be written.
    """
    out: dict = {}
    boot = {"n_boot": settings.n_boot, "seed": settings.sample_seed}
    if baseline is not None:
        found = paired.differences(results, baseline, **boot)
        out["differences"] = [_difference(d, args.json) for d in found]
    groups = aggregate.seed_groups(results)
    if groups:
        out["seed_groups"] = aggregate.summaries_json(aggregate.aggregate(result_tables.results_table(results),
                                                                          groups), groups)
    if args.latex:
        out["latex"] = write_latex(results, args.latex, settings)
    return out


def _difference(d: paired.Difference, as_json: bool) -> dict:
    if as_json:
        return {"model": d.model, "baseline": d.baseline, "task": d.task, "metric": d.metric, "delta": d.delta,
                "delta_ci": None if d.ci is None else list(d.ci), "n": d.n}
    ci = "- (no per-item values)" if d.ci is None else f"[{d.ci[0]:+.3f}, {d.ci[1]:+.3f}]"
    return {"model": d.model, "baseline": d.baseline, "task": d.task, "metric": result_tables.metric_label(d.metric),
            "delta": "-" if d.delta is None else f"{d.delta:+.3f}", "paired 95% CI": ci}


def write_latex(results: list[EvalResult], path: str, settings: EvalSettings) -> str:
    """Write the results' LaTeX tables to ``path`` (best in bold only where it is a finding)."""
    values, lows, highs = result_tables.wide_tables(result_tables.results_table(results))
    beats = result_tables.paired_beats(results, n_boot=settings.n_boot, seed=settings.sample_seed)
    best = result_tables.best_mask(values, lows, highs, beats=beats)
    models = ", ".join(values.index)
    text = latex.latex_tables(values, lows, highs, best, caption=f"{models}; 95% bootstrap intervals "
                              f"({settings.n_boot} resamples)")
    try:
        Path(path).write_text(text, encoding="utf-8")
    except OSError as error:
        raise EvaluationError(f"cannot write {path}: {error.strerror or error}") from None
    return str(path)
