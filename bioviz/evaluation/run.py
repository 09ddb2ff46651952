"""Evaluate models on the papers' protocols, benchmarks and gold files, with cached results.

:func:`evaluate` takes a level view, its split and one or more models (:class:`ModelSpec`) and returns
one :class:`~bioviz.evaluation.result.EvalResult` per (model, task);
:func:`evaluate_benchmarks` does the same for the relatedness benchmarks and
:func:`evaluate_normalisation` for a gold file of mentions under each ranking;
:func:`cross_level` gives the models x levels table of higher-level-semantics Table 4.

What differs between tasks is the task objects' (:mod:`bioviz.evaluation.tasks`); the one
loop here loads each model, serves a cached result or encodes the names the task needs
(shared by the model's tasks) and scores them, and stores what it computed. A result's
``per_item`` keeps what its figures are means or correlations of, one value per query or
pair in a fixed order: two models' results on the same data are compared item by item
(:mod:`bioviz.evaluation.paired`); a cached result from before these were kept is computed
again. ``model`` is the model's readable label as it is now (a cached result of a run renamed
since gets its new name); ``run_id`` keeps a run's id. Models arrive parsed (the command line and
the pages parse them once); a result keeps its model's MODEL text (``model_spec``), as stored results
and run records write it on disk.

Results are cached on disk and stored with trained runs (:mod:`bioviz.evaluation.store`);
which split to evaluate on is :mod:`bioviz.evaluation.splits`; the tables made of the
results are :mod:`bioviz.evaluation.tables`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable

import numpy as np

from bioviz.errors import BiovizError, EvaluationError
from bioviz.evaluation.benchmarks import expand_benchmarks, load_benchmark
from bioviz.evaluation.normalisation import GoldFile
from bioviz.evaluation.result import EvalResult
from bioviz.evaluation.splits import seen_by_runs
from bioviz.evaluation.store import (cache_key, json_safe, read_cached, read_run_evaluations, store_result,
                                     store_with_run)
from bioviz.evaluation.tasks import (TASK_LABELS, TASKS, BenchmarkTask, EvalSettings, EvalTask, Mentions,
                                     NormalisationTask, SplitData, expand_tasks, split_tasks)
from bioviz.models.cached_encoding import encode_cached
from bioviz.models.model_spec import ModelSpec
from bioviz.models.registry import load_encoder
from bioviz.models.runs import read_run
from bioviz.ontology import DEFAULT_SPLIT, LevelSpec, Split, SplitSpec, level_view
from bioviz.ontology.levels import LevelView
from bioviz.ontology.model import Ontology
from bioviz.search.hybrid import Ranking

logger = logging.getLogger(__name__)

__all__ = ["TASKS", "TASK_LABELS", "EvalResult", "EvalSettings", "SplitSpec", "cross_level", "evaluate",
           "evaluate_benchmarks", "evaluate_normalisation", "expand_tasks"]

Progress = Callable[[str], None]
# steps(done, total, message): ``done`` of ``total`` (model, task) steps, fractional while a
# step encodes names, so a progress bar moves (and an ETA can be read) during a long first encoding.
Steps = Callable[[float, int, str], None]
ENCODING_SHARE = 0.8  # of a step that encodes names: the rest scores them


@dataclass
class _Model:
    model: ModelSpec
    label: str
    run_dir: Path | None
    encoder: object
    run_id: str | None = None

    @property
    def fingerprint(self) -> str:
        """The key results are cached under: the encoder's now, read when a result is looked up or stored.

        Not the one it had when loaded: the default int8 encoder becomes the torch model if its
        export fails on the first names it encodes, and what it computed then is torch's.
        """
        return self.encoder.fingerprint

    def vectors(self, texts: list[str], progress: Callable[[int, int], None] | None = None) -> dict[str, np.ndarray]:
        """``text -> vector`` through the embedding cache (``progress(done, total)`` in names)."""
        unique = list(dict.fromkeys(texts))
        vectors, _ = encode_cached(self.encoder, unique, progress=progress)
        return dict(zip(unique, vectors))

    @property
    def spec(self) -> str:
        """The MODEL text results keep (``EvalResult.model_spec``), as stored results write it."""
        return self.model.spec


def _load_model(model: ModelSpec) -> _Model:
    encoder = load_encoder(model)
    run_dir = model.path if model.kind == "run" else None
    run_id = read_run(run_dir).run_id if run_dir is not None else None
    return _Model(model, encoder.label, run_dir, encoder, run_id)


def _current(cached: dict | None) -> dict | None:
    """A cached result, or None when it predates the per-item values (then it is computed again)."""
    return cached if cached is not None and isinstance(cached.get("per_item"), dict) else None


class _StepCounter:
    """Counts (model, task) steps for a :data:`Steps` callback; a no-op without one."""

    def __init__(self, steps: Steps | None, total: int) -> None:
        self.steps, self.total, self.done = steps, total, 0

    def start(self, message: str) -> None:
        if self.steps is not None:
            self.steps(float(self.done), self.total, message)

    def encoding(self, message: str) -> Callable[[int, int], None] | None:
        """A ``progress(done, total)`` for the names a step encodes, moving within the step."""
        if self.steps is None:
            return None
        return lambda done, total: self.steps(self.done + ENCODING_SHARE * done / max(total, 1), self.total,
                                              f"{message}: encoding {total:,} names")

    def finish(self) -> None:
        self.done += 1
        if self.steps is not None and self.done == self.total:
            self.steps(float(self.total), self.total, "done")


def _within(steps: Steps | None, position: int, count: int, prefix: str) -> Steps | None:
    """A :data:`Steps` callback for part ``position`` of ``count`` equal parts of a larger job."""
    if steps is None:
        return None
    return lambda done, total, message: steps(position + done / max(total, 1), count, prefix + message)


def _models(models: ModelSpec | Sequence[ModelSpec]) -> list[ModelSpec]:
    """The models as a list; MODEL text (tests, benchmarks scripts) parsed here, as ``load_encoder`` does.

    Raises
    ------
    ModelError
        Text that names nothing loadable, in one line.
    """
    listed = [models] if isinstance(models, (str, ModelSpec)) else list(models)
    return [ModelSpec.of(model) for model in listed]


def _run(models: list[ModelSpec], tasks: Sequence[EvalTask], *, use_cache: bool, progress: Progress | None,
         steps: Steps | None) -> list[EvalResult]:
    """The one loop: every task for each model in turn, models in the given order."""
    results = []
    counter = _StepCounter(steps, len(models) * len(tasks))
    for spec in models:
        model = _load_model(spec)
        lookup: dict[str, np.ndarray] = {}  # vectors shared by this model's tasks
        for task in tasks:
            message = f"{model.label}: {task.step_label}"
            counter.start(message)
            key_data = task.data_key()
            cached = _cached(model, task, key_data) if use_cache and task.cacheable else None
            if cached is not None:
                results.append(cached)
            else:
                if progress is not None:
                    progress(message)
                results.append(_computed(model, task, key_data, lookup, counter.encoding(message),
                                         store=use_cache and task.cacheable))
            counter.finish()
    return results


def _cached(model: _Model, task: EvalTask, key_data: dict) -> EvalResult | None:
    """The task's cached result under the model's current label, also stored with its run; None if not cached."""
    key = cache_key(model.fingerprint, task.name, key_data)
    cached = _current(read_cached(key))
    if cached is None:
        return None
    cached["cached"] = True
    if model.run_dir is not None and key not in read_run_evaluations(model.run_dir, keyed=True):
        store_with_run(model.run_dir, key, cached)
    # a run may have been renamed since the result was stored
    return replace(EvalResult.from_dict(cached), **task.model_fields(model.label),
                   run_id=getattr(model, "run_id", None))


def _computed(model: _Model, task: EvalTask, key_data: dict, lookup: dict, encoding, *, store: bool) -> EvalResult:
    """Encode what ``lookup`` lacks of the task's names, score them, and cache the result when ``store``."""
    started = time.perf_counter()
    missing = [t for t in task.texts() if t not in lookup]
    encoder = getattr(model, "encoder", None)
    # a vectors file (or a run's input file) answers only its own names
    file = getattr(encoder, "file", None) or getattr(getattr(encoder, "base", None), "file", None)
    if missing and task.partial and file is not None:
        # counted out, not scored: the task's n says how many it covers (a benchmark's covered pairs)
        lookup.update(dict.fromkeys([t for t, row in zip(missing, file.rows(missing)) if row < 0],
                                    np.zeros(file.dim, dtype=np.float32)))
        missing = [t for t in missing if t not in lookup]
    if missing:
        lookup.update(model.vectors(missing, encoding))
    scored = task.score(model, lookup)
    result = EvalResult(
        **task.model_fields(model.label), model_spec=model.spec, run_id=getattr(model, "run_id", None),
        fingerprint=model.fingerprint, task=task.task, metrics=scored.metrics, ci=scored.ci, sizes=scored.sizes,
        data=key_data, per_item=scored.per_item, per_class=scored.per_class,
        seconds=round(time.perf_counter() - started, 3))
    stored = json_safe(result.to_dict())  # NaN -> None, numpy -> Python: as it reads back from the cache
    if store:
        store_result(cache_key(model.fingerprint, task.name, key_data), stored, model.run_dir)
    return EvalResult.from_dict(stored)


def evaluate(view: LevelView, split: Split, models: ModelSpec | Sequence[ModelSpec], tasks="all", *,
             ontology: Ontology | None = None, settings: EvalSettings | None = None, use_cache: bool = True,
             progress: Progress | None = None, exclude_names=None, steps: Steps | None = None) -> list[EvalResult]:
    """Evaluate every model on every split task, on the same view and split.

    Parameters
    ----------
    view : LevelView
    split : Split
        The split of ``view`` (for a trained run: the one it was trained with, see
        :func:`split_spec_for_run`).
    models : ModelSpec or sequence of ModelSpec
        The models (presets, directories, hub ids, trained runs), parsed by the caller.
    tasks : str or list of str
        Names from :data:`TASKS`, or ``all``.
    ontology : Ontology, optional
        Needed by ``leaf2parent`` and ``hierarchy-auc`` (the IS-A graph).
    settings : EvalSettings, optional
    use_cache : bool
        Serve and store results in the result cache (``BIOVIZ_HOME/eval``).
    progress : callable, optional
        ``progress(message)`` before each (model, task) that is computed (not cached).
    exclude_names : iterable of str, optional
        Names left out of every held-out query set and of the hierarchy pairs. By default
        the training and validation names of every trained run among ``models`` (from its
        ``split.json``), so all models are compared on items no compared run has seen,
        also on levels or splits the runs were not trained on.
    steps : callable, optional
        ``steps(done, total, message)`` before each (model, task), cached ones included,
        while its names are encoded (``done`` fractional) and once at the end
        (``done == total``): drives a progress bar with an ETA.

    Returns
    -------
    list of EvalResult
        One result per (model, task), models in the given order.

    Raises
    ------
    EvaluationError, ModelError
        Unknown task, a task needing the ontology without it, a model that cannot load.
    """
    models = _models(models)
    if exclude_names is None:
        exclude_names = seen_by_runs(models)
    data = SplitData(view, split, ontology, settings or EvalSettings(), tuple(sorted(set(exclude_names))))
    chosen = split_tasks(tasks, data)
    for task in chosen:  # a task that needs the ontology without it is refused before any model loads
        task.data_key()
    return _run(models, chosen, use_cache=use_cache, progress=progress, steps=steps)


def evaluate_benchmarks(models: ModelSpec | Sequence[ModelSpec], benchmarks="all", *,
                        settings: EvalSettings | None = None, use_cache: bool = True,
                        progress: Progress | None = None, steps: Steps | None = None) -> list[EvalResult]:
    """Spearman's rho of every model on relatedness benchmarks (names or file paths).

    Returns
    -------
    list of EvalResult
        One result per (model, benchmark): ``metrics["spearman"]``, ``ci["spearman"]``,
        ``sizes["pairs"]`` and ``sizes["covered"]``. ``progress`` and ``steps`` as for :func:`evaluate`.
    """
    settings = settings or EvalSettings()
    names = [b for spec in ([benchmarks] if isinstance(benchmarks, (str, Path)) else benchmarks)
             for b in expand_benchmarks(str(spec))]
    tasks = [BenchmarkTask(load_benchmark(name), settings) for name in names]
    return _run(_models(models), tasks, use_cache=use_cache, progress=progress, steps=steps)


def evaluate_normalisation(gold: GoldFile, level: LevelSpec, models: Sequence[ModelSpec],
                           rankings: Sequence[Ranking], *,
                           settings: EvalSettings | None = None, index_of: Callable | None = None,
                           progress: Progress | None = None, steps: Steps | None = None) -> list[EvalResult]:
    """Score every model under every ranking on a gold file over a level; one result per pair (never cached).

    Parameters
    ----------
    gold : GoldFile
    level : LevelSpec
        The level the file was coded on (GSC+: :data:`~bioviz.evaluation.normalisation.EXAMPLE_LEVEL`).
    models : sequence of ModelSpec
    rankings : sequence of Ranking
    settings : EvalSettings, optional
        Its ``n_boot`` and ``sample_seed``: the bootstrap of the intervals.
    index_of : callable, optional
        ``index_of(model)`` -> the level's name index under a :class:`ModelSpec` (a page passes its cached one).
    progress, steps : callable, optional
        As for :func:`evaluate`.

    Raises
    ------
    BiovizError
        Gold ids outside the level, an unknown model, or no models or rankings.
    """
    if not models or not rankings:
        raise EvaluationError("choose at least one model and one ranking")
    settings = settings or EvalSettings()
    ontology = level.ontology()
    mentions = Mentions(gold, level.load(ontology), ontology, index_of)
    tasks = [NormalisationTask(mentions, ranking, settings) for ranking in rankings]
    return _run(_models(models), tasks, use_cache=False, progress=progress, steps=steps)


def cross_level(ontology: Ontology, models: ModelSpec | Sequence[ModelSpec], *, depths=(1, 2, 3, 4),
                root: str | None = None, split_spec: SplitSpec | None = None, keep_ambiguous: bool = False,
                settings: EvalSettings | None = None, use_cache: bool = True,
                progress: Progress | None = None, steps: Steps | None = None) -> dict:
    """Semantic similarity ranking mAP of each model on each level (higher-level-semantics Table 4).

    Each level is cut from the same root and split with the same settings; a model trained
    on level i is then read along its row. Levels deeper than the tree are skipped.
    ``steps(done, total, message)`` counts one step per level (fractional within a level).

    Returns
    -------
    dict
        ``depths`` (evaluated), ``models`` (labels), ``map`` (models x depths, None where
        nothing was scored), ``ci`` (same shape, ``[low, high]``), ``skipped`` (depth ->
        reason), and ``results`` (the per-level results).
    """
    split_spec = split_spec or DEFAULT_SPLIT
    models = _models(models)
    done, skipped, table, ci, labels, results = [], {}, {}, {}, {}, []
    depths = list(depths)
    for position, depth in enumerate(depths):
        try:
            view = level_view(ontology, depth=depth, root=root, keep_ambiguous=keep_ambiguous)
            split = split_spec.make(view)
        except BiovizError as error:
            skipped[depth] = str(error)
            continue
        done.append(depth)
        for result in evaluate(view, split, models, ["ranking"], ontology=ontology, settings=settings,
                               use_cache=use_cache, progress=progress,
                               steps=_within(steps, position, len(depths), f"level {depth} · ")):
            labels[result.model_spec] = result.model
            table[(result.model_spec, depth)] = result.metrics["map"]
            ci[(result.model_spec, depth)] = result.ci["map"]
            results.append(result)
    return {
        "depths": done,
        "models": [labels.get(m.spec, m.spec) for m in models],
        "map": [[table.get((m.spec, d)) for d in done] for m in models],
        "ci": [[ci.get((m.spec, d)) for d in done] for m in models],
        "skipped": skipped,
        "results": results,
    }
