"""Evaluate models on the papers' protocols and benchmarks, with cached results.

:func:`evaluate` takes a level view, its split and one or more MODEL strings and returns
one result dict per (model, task); :func:`evaluate_benchmarks` does the same for the
relatedness benchmarks; :func:`cross_level` gives the models x levels table of
higher-level-semantics Table 4.

A result dict::

    {"model": label, "model_spec": MODEL, "run_id": id or None, "fingerprint": ..., "task": "ranking",
     "metrics": {"map": 0.61, ...}, "ci": {"map": [0.55, 0.67], ...},
     "sizes": {"queries": 22, "references": 330}, "data": {...what was evaluated...},
     "per_item": {"ap": [...], "rank": [...]}, "seconds": 0.4, "cached": False}

``per_item`` keeps what the figures are means or correlations of, one value per query or
pair in a fixed order (``None`` where a query was not scored): ``ap`` and ``rank`` of each
ranking part (``test.ap`` ... for synonym retrieval), ``similarity`` and ``distance`` of the
hierarchy pairs, ``cosine`` and ``human`` of a benchmark's pairs. Two models' results on the
same data are compared item by item (:mod:`bioviz.evaluation.paired`). A cached result from
before these were kept is computed again.

``model`` is the model's readable label (a run's name and short id, as it is now: a cached
result of a run renamed since gets its new name); ``run_id`` keeps a run's id.
Results are cached on disk and stored with trained runs (:mod:`bioviz.evaluation.store`);
which split to evaluate on is :mod:`bioviz.evaluation.splits`; the tables made of the
results are :mod:`bioviz.evaluation.tables`.
"""

from __future__ import annotations

import logging
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable

import numpy as np

from bioviz.errors import BiovizError, EvaluationError
from bioviz.evaluation import metrics, protocols
from bioviz.evaluation.benchmarks import expand_benchmarks, load_benchmark, score_benchmark
from bioviz.evaluation.splits import seen_by_runs
from bioviz.evaluation.store import (cache_key, digest, json_safe, read_cached, read_run_evaluations, split_key,
                                     store_result, store_with_run, view_key)
from bioviz.models.cached_encoding import encode_cached
from bioviz.models.model_spec import ModelSpec
from bioviz.models.registry import load_encoder
from bioviz.models.runs import read_run
from bioviz.ontology import DEFAULT_SPLIT, Split, SplitSpec, level_view
from bioviz.ontology.levels import LevelView
from bioviz.ontology.model import Ontology

logger = logging.getLogger(__name__)

TASKS = ("ranking", "hypernym", "synonym", "leaf2parent", "hierarchy-auc")
TASK_LABELS = {
    "ranking": "Semantic similarity ranking",
    "hypernym": "Hypernym detection",
    "synonym": "Synonym retrieval / concept mapping",
    "leaf2parent": "Leaf-to-parent mapping",
    "hierarchy-auc": "Hierarchy distance ROC-AUC",
    # not one of TASKS (those run on a split of the level): a gold file's mentions (bioviz.evaluation.normalisation)
    "normalisation": "Mention normalisation",
}

Progress = Callable[[str], None]
# steps(done, total, message): ``done`` of ``total`` (model, task) steps, fractional while a
# step encodes names, so a progress bar moves (and an ETA can be read) during a long first encoding.
Steps = Callable[[float, int, str], None]
ENCODING_SHARE = 0.8  # of a step that encodes names: the rest scores them


@dataclass(frozen=True)
class EvalSettings:
    """Sizes of the samples and of the bootstrap (part of every cache key)."""

    n_boot: int = 1000  # bootstrap resamples for the 95% intervals
    leaf_queries: int = 2000  # leaf-to-parent: leaf concepts sampled (fixed seed)
    pairs_per_distance: int = 1000  # hierarchy AUC: pairs sampled per distance (fixed seed)
    sample_seed: int = 0  # seed of both samples and of the bootstrap


@dataclass
class _Model:
    spec: str
    label: str
    fingerprint: str
    run_dir: Path | None
    encoder: object
    run_id: str | None = None

    def vectors(self, texts: list[str], progress: Callable[[int, int], None] | None = None) -> dict[str, np.ndarray]:
        """``text -> vector`` through the embedding cache (``progress(done, total)`` in names)."""
        unique = list(dict.fromkeys(texts))
        vectors, _ = encode_cached(self.encoder, unique, progress=progress)
        return dict(zip(unique, vectors))


def _load_model(spec: str) -> _Model:
    ref = ModelSpec.parse(spec)  # results are keyed by the MODEL text; it is parsed once, here
    encoder = load_encoder(ref)
    run_dir = ref.path if ref.kind == "run" else None
    run_id = read_run(run_dir).run_id if run_dir is not None else None
    return _Model(spec, encoder.label, encoder.fingerprint, run_dir, encoder, run_id)


def _current(cached: dict | None) -> dict | None:
    """A cached result, or None when it predates the per-item values (then it is computed again)."""
    return cached if cached is not None and isinstance(cached.get("per_item"), dict) else None


def _labelled(result: dict, model: _Model) -> dict:
    """A cached or stored result under the model's current label (a run may have been renamed since)."""
    result["model"] = model.label
    result["run_id"] = getattr(model, "run_id", None)
    return result


def _matrix(lookup: dict[str, np.ndarray], texts) -> np.ndarray:
    if not len(texts):
        return np.zeros((0, len(next(iter(lookup.values()))) if lookup else 0), dtype=np.float32)
    return np.stack([lookup[t] for t in texts]).astype(np.float32)


def _score_problem(problem: protocols.RankingProblem, lookup: dict, settings: EvalSettings,
                   with_ap: bool = True, per_query: bool = False) -> dict:
    relevance = (metrics.matrix_relevance(problem.relevance) if problem.relevance is not None
                 else metrics.label_relevance(problem.query_labels, problem.reference_labels))
    return metrics.ranking_metrics(
        _matrix(lookup, problem.queries), _matrix(lookup, problem.references), relevance,
        exclude_self=problem.exclude_self, reference_groups=problem.reference_groups,
        with_ap=with_ap, n_boot=settings.n_boot, seed=settings.sample_seed, per_query=per_query,
    )


def _per_item(result: dict, prefix: str = "") -> dict:
    """Per-query AP (when computed) and first-relevant rank, rounded (they are stored as JSON)."""
    ap, rank = result["per_query"]["ap"], result["per_query"]["rank"]
    out = {f"{prefix}rank": rank}
    if not np.all(np.isnan(ap)):
        out[f"{prefix}ap"] = np.round(ap, 6)
    return {key: values.tolist() for key, values in out.items()}


def _split_metrics(result: dict, prefix: str = "") -> tuple[dict, dict, dict]:
    values = {f"{prefix}{k}": result[k] for k in ("map", "acc1", "mrr") if k in result}
    ci = {f"{prefix}{k}": v for k, v in result["ci"].items()}
    sizes = {f"{prefix}{k}": result[k] for k in ("queries", "skipped", "references")}
    return values, ci, sizes


class _TaskData:
    """Builds each task's problem once per evaluation, shared by every model."""

    def __init__(self, view: LevelView, split: Split, ontology: Ontology | None, settings: EvalSettings,
                 exclude_names=()):
        self.view, self.split, self.ontology, self.settings = view, split, ontology, settings
        self.exclude = sorted(set(exclude_names))
        self._built: dict[str, object] = {}

    def get(self, task: str):
        if task not in self._built:
            built = self._build(task)
            if self.exclude and task != "hierarchy-auc":
                if isinstance(built, dict):
                    # Training names are the train part's queries by definition: only the
                    # held-out parts lose names that a compared run has seen.
                    built = {part: problem if part == "train" else protocols.drop_queries(problem, self.exclude)
                             for part, problem in built.items()}
                else:
                    built = protocols.drop_queries(built, self.exclude)
            self._built[task] = built
        return self._built[task]

    def _need_ontology(self, task: str) -> Ontology:
        if self.ontology is None:
            raise EvaluationError(f"task {task} needs the ontology (its IS-A graph), not only the level view")
        return self.ontology

    def _build(self, task: str):
        view, split, s = self.view, self.split, self.settings
        if task == "ranking":
            return protocols.ranking_problem(view, split)
        if task == "hypernym":
            return protocols.hypernym_problem(view, split)
        if task == "synonym":
            return protocols.synonym_problems(view, split)
        if task == "leaf2parent":
            try:
                return protocols.leaf_to_parent_problem(self._need_ontology(task), view.root,
                                                        s.leaf_queries, s.sample_seed)
            except ValueError as error:
                raise EvaluationError(str(error)) from None
        if task == "hierarchy-auc":
            seen = [view.names[i] for i in np.concatenate([split.train, split.validation])] + self.exclude
            return protocols.hierarchy_pairs(self._need_ontology(task), view.root, seen,
                                             s.pairs_per_distance, s.sample_seed)
        raise EvaluationError(f"unknown task {task!r}: choose from {', '.join(TASKS)} or all")

    def data_key(self, task: str) -> dict:
        base = {"settings": asdict(self.settings)}
        if self.exclude:
            base["excluded_names"] = {"count": len(self.exclude), "digest": digest("\n".join(self.exclude))}
        if task == "leaf2parent":
            onto = self._need_ontology(task)
            return {**base, "ontology": onto.label, "concepts": len(onto), "root": self.view.root}
        key = {**base, "view": view_key(self.view), "split": split_key(self.split)}
        if task == "hierarchy-auc":
            key["ontology"] = self._need_ontology(task).label
        return key

    def texts(self, task: str) -> list[str]:
        built = self.get(task)
        if isinstance(built, dict):
            return [t for problem in built.values() for t in problem.texts]
        return built.texts

    def score(self, task: str, lookup: dict) -> tuple[dict, dict, dict, dict]:
        """(metrics, ci, sizes, extra) of one task for one model's vectors."""
        built = self.get(task)
        s = self.settings
        extra: dict = {"per_item": {}}
        if task == "synonym":
            values, ci, sizes = {}, {}, {}
            for part, problem in built.items():
                scored = _score_problem(problem, lookup, s, per_query=True)
                extra["per_item"].update(_per_item(scored, f"{part}."))
                v, c, z = _split_metrics(scored, f"{part}.")
                values.update(v)
                ci.update(c)
                sizes.update(z)
            return values, ci, sizes, extra
        if task == "hierarchy-auc":
            a, b = _matrix(lookup, built.first), _matrix(lookup, built.second)
            sims = (a * b).sum(axis=1) if len(a) else np.zeros(0)
            result = metrics.hierarchy_auc(sims, built.distances, s.n_boot, s.sample_seed)
            values = {"mean_auc": result["mean_auc"], **result["auc"]}
            sizes = {f"pairs.d{d}": n for d, n in result["pairs"].items()}
            extra["per_item"] = {"similarity": np.round(sims, 6).tolist(),
                                 "distance": np.asarray(built.distances).tolist()}
            return values, result["ci"], sizes, extra
        if task == "ranking":
            scored = _score_problem(built, lookup, s, per_query=True)
            per_class = metrics.per_class_map(scored["per_query"]["ap"], built.query_labels)
            extra["per_class"] = {self.view.classes[int(c)]: v for c, v in per_class.items()}
            extra["per_item"] = _per_item(scored)
            values, ci, sizes = _split_metrics(scored)
            return {"map": values["map"]}, {"map": ci["map"]}, sizes, extra
        if task in ("hypernym", "leaf2parent"):
            scored = _score_problem(built, lookup, s, with_ap=False, per_query=True)
            extra["per_item"] = _per_item(scored)
            values, ci, sizes = _split_metrics(scored)
            return values, ci, sizes, extra
        raise EvaluationError(f"unknown task {task!r}")


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


def expand_tasks(tasks) -> list[str]:
    """``all`` (or None) -> every task; validates names."""
    if tasks is None or tasks == "all" or (not isinstance(tasks, str) and "all" in tasks):
        return list(TASKS)
    tasks = [tasks] if isinstance(tasks, str) else list(tasks)
    unknown = [t for t in tasks if t not in TASKS]
    if unknown:
        raise EvaluationError(f"unknown task {unknown[0]!r}: choose from {', '.join(TASKS)} or all")
    return tasks


def evaluate(view: LevelView, split: Split, models, tasks="all", ontology: Ontology | None = None,
             settings: EvalSettings | None = None, use_cache: bool = True,
             progress: Progress | None = None, exclude_names=None, steps: Steps | None = None) -> list[dict]:
    """Evaluate every model on every task, on the same view and split.

    Parameters
    ----------
    view : LevelView
    split : Split
        The split of ``view`` (for a trained run: the one it was trained with, see
        :func:`split_spec_for_run`).
    models : str or list of str
        MODEL strings (``minilm``, ``char-tfidf``, directories, hub ids, run directories).
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
    list of dict
        One result per (model, task), models in the given order.

    Raises
    ------
    EvaluationError, ModelError
        Unknown task, a task needing the ontology without it, a model that cannot load.
    """
    settings = settings or EvalSettings()
    tasks = expand_tasks(tasks)
    models = [models] if isinstance(models, str) else list(models)
    if exclude_names is None:
        exclude_names = seen_by_runs(models)
    data = _TaskData(view, split, ontology, settings, exclude_names)
    results = []
    counter = _StepCounter(steps, len(models) * len(tasks))
    for spec in models:
        model = _load_model(spec)
        lookup: dict[str, np.ndarray] = {}  # vectors shared by this model's tasks
        for task in tasks:
            message = f"{model.label}: {TASK_LABELS[task]}"
            counter.start(message)
            key_data = data.data_key(task)
            key = cache_key(model.fingerprint, task, key_data)
            cached = _current(read_cached(key)) if use_cache else None
            if cached is not None:
                cached["cached"] = True
                if model.run_dir is not None and key not in read_run_evaluations(model.run_dir, keyed=True):
                    store_with_run(model.run_dir, key, cached)
                results.append(_labelled(cached, model))
                counter.finish()
                continue
            if progress is not None:
                progress(message)
            started = time.perf_counter()
            missing = [t for t in data.texts(task) if t not in lookup]
            if missing:
                lookup.update(model.vectors(missing, counter.encoding(message)))
            values, ci, sizes, extra = data.score(task, lookup)
            result = json_safe({
                "model": model.label, "model_spec": spec, "run_id": getattr(model, "run_id", None),
                "fingerprint": model.fingerprint, "task": task, "metrics": values, "ci": ci, "sizes": sizes,
                "data": key_data,
                "seconds": round(time.perf_counter() - started, 3), "cached": False, **extra,
            })
            if use_cache:
                store_result(key, result, model.run_dir)
            results.append(result)
            counter.finish()
    return results


def evaluate_benchmarks(models, benchmarks="all", settings: EvalSettings | None = None,
                        use_cache: bool = True, progress: Progress | None = None,
                        steps: Steps | None = None) -> list[dict]:
    """Spearman's rho of every model on relatedness benchmarks (names or file paths).

    Returns
    -------
    list of dict
        One result per (model, benchmark): ``metrics.spearman``, ``ci.spearman``,
        ``sizes.pairs`` and ``sizes.covered``. ``progress`` and ``steps`` as for :func:`evaluate`.
    """
    settings = settings or EvalSettings()
    names = [b for spec in ([benchmarks] if isinstance(benchmarks, (str, Path)) else benchmarks)
             for b in expand_benchmarks(str(spec))]
    loaded = [load_benchmark(name) for name in names]
    models = [models] if isinstance(models, str) else list(models)
    results = []
    counter = _StepCounter(steps, len(models) * len(loaded))
    for spec in models:
        model = _load_model(spec)
        lookup = None
        for bench in loaded:
            message = f"{model.label}: {bench.label}"
            counter.start(message)
            key_data = {"benchmark": bench.name, "digest": bench.digest, "n_boot": settings.n_boot,
                        "seed": settings.sample_seed}
            key = cache_key(model.fingerprint, "benchmark", key_data)
            cached = _current(read_cached(key)) if use_cache else None
            if cached is not None:
                cached["cached"] = True
                results.append(_labelled(cached, model))
                counter.finish()
                continue
            if progress is not None:
                progress(message)
            started = time.perf_counter()
            if lookup is None or any(t not in lookup for t in bench.terms):
                lookup = {**(lookup or {}), **model.vectors([t for b in loaded for t in b.terms],
                                                             counter.encoding(message))}
            scored = score_benchmark(bench, lookup, settings.n_boot, settings.sample_seed)
            result = json_safe({
                "model": model.label, "model_spec": spec, "run_id": getattr(model, "run_id", None),
                "fingerprint": model.fingerprint, "task": bench.label, "metrics": {"spearman": scored["spearman"]},
                "ci": scored["ci"],
                "sizes": {"pairs": scored["pairs"], "covered": scored["covered"]}, "data": key_data,
                "per_item": {"cosine": np.round(scored["cosines"], 6).tolist(), "human": bench.scores.tolist()},
                "seconds": round(time.perf_counter() - started, 3), "cached": False,
            })
            if use_cache:
                store_result(key, result, model.run_dir)
            results.append(result)
            counter.finish()
    return results


def cross_level(ontology: Ontology, models, depths=(1, 2, 3, 4), root: str | None = None,
                split_spec: SplitSpec | None = None, keep_ambiguous: bool = False,
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
        reason), and ``results`` (the per-level result dicts).
    """
    split_spec = split_spec or DEFAULT_SPLIT
    models = [models] if isinstance(models, str) else list(models)
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
        for result in evaluate(view, split, models, ["ranking"], ontology, settings, use_cache, progress,
                               steps=_within(steps, position, len(depths), f"level {depth} · ")):
            labels[result["model_spec"]] = result["model"]
            table[(result["model_spec"], depth)] = result["metrics"]["map"]
            ci[(result["model_spec"], depth)] = result["ci"]["map"]
            results.append(result)
    return {
        "depths": done,
        "models": [labels.get(m, m) for m in models],
        "map": [[table.get((m, d)) for d in done] for m in models],
        "ci": [[ci.get((m, d)) for d in done] for m in models],
        "skipped": skipped,
        "results": results,
    }
