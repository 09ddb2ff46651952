"""What each evaluation task does: one task object per protocol, looked up by name.

A task knows everything that differs between the protocols of :data:`TASK_CLASSES`: what it
is built from (a level view and its split, a benchmark, a gold file under a ranking), what
identifies its data in the result cache (:meth:`EvalTask.data_key`), the names a model must
encode for it (:meth:`EvalTask.texts`) and how a model's vectors are scored
(:meth:`EvalTask.score`). The loop that loads each model, serves cached results, encodes the
missing names and stores what it computed (:mod:`bioviz.evaluation.run`) is the same for
every task and never asks which task it runs.

The split tasks (:data:`TASKS`) are the papers' protocols on a level view and its split;
:class:`BenchmarkTask` is a relatedness benchmark (Spearman's rho);
:class:`NormalisationTask` ranks a gold file's mentions as term coding does
(:mod:`bioviz.evaluation.normalisation`).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import asdict, dataclass, field
from functools import cached_property

import numpy as np

from bioviz.errors import EvaluationError
from bioviz.evaluation import metrics, protocols
from bioviz.evaluation.benchmarks import Benchmark, score_benchmark
from bioviz.evaluation.normalisation import (TASK as NORMALISATION, GoldFile, check_gold_ids, gold_ranks,
                                             normalisation_figures, paraphrased)
from bioviz.evaluation.store import digest, split_key, view_key
from bioviz.models.model_spec import ModelSpec
from bioviz.ontology import Split
from bioviz.ontology.levels import LevelView
from bioviz.ontology.model import Ontology
from bioviz.search.hybrid import Ranking, SparseNames
from bioviz.search.neighbours import candidate_index
from bioviz.search.term_coding import encode_terms, resolve_terms


@dataclass(frozen=True)
class EvalSettings:
    """Sizes of the samples and of the bootstrap (part of every cache key)."""

    n_boot: int = 1000  # bootstrap resamples for the 95% intervals
    leaf_queries: int = 2000  # leaf-to-parent: leaf concepts sampled (fixed seed)
    pairs_per_distance: int = 1000  # hierarchy AUC: pairs sampled per distance (fixed seed)
    sample_seed: int = 0  # seed of both samples and of the bootstrap


@dataclass(frozen=True)
class Scored:
    """One model's figures on one task, before the loop adds who and what (:class:`EvalResult`)."""

    metrics: dict
    ci: dict
    sizes: dict
    per_item: dict = field(default_factory=dict)
    per_class: dict | None = None


class EvalTask(ABC):
    """One evaluation protocol on its data; built once per evaluation and shared by every model.

    Attributes
    ----------
    name : str
        The task's key (in :data:`TASK_CLASSES` and the result cache's key).
    label : str
        Its readable name (:data:`TASK_LABELS`).
    cacheable : bool
        Results are read from and written to the result cache (not a user's gold file).
    partial : bool
        Texts a vectors file lacks are counted out (a zero vector the score treats as not
        covered) rather than refusing the task.
    """

    name: str
    label: str
    cacheable = True
    partial = False

    @property
    def task(self) -> str:
        """The result's ``task``: the key, or what a table shows for it (a benchmark's label)."""
        return self.name

    @property
    def step_label(self) -> str:
        """What a progress message calls this step."""
        return self.label

    def model_fields(self, label: str) -> dict:
        """The result's fields naming the model (from its current label): :class:`EvalResult` keywords."""
        return {"model": label}

    @abstractmethod
    def data_key(self) -> dict:
        """What identifies the evaluated data (with the model's fingerprint and :attr:`name`: the cache key)."""

    @abstractmethod
    def texts(self) -> list[str]:
        """The names a model's vectors are needed for (encoded through the vector cache)."""

    @abstractmethod
    def score(self, model, lookup: dict[str, np.ndarray]) -> Scored:
        """The figures of ``model`` (``spec``, ``label``) from ``lookup``: ``text -> vector`` of :meth:`texts`."""


# --- the split tasks: the papers' protocols on a level view and its split --------------------


@dataclass(frozen=True, eq=False)
class SplitData:
    """What the split tasks of one evaluation share.

    Attributes
    ----------
    view : LevelView
    split : Split
    ontology : Ontology or None
        The IS-A graph (``leaf2parent`` and ``hierarchy-auc`` need it).
    settings : EvalSettings
    exclude : tuple of str
        Names left out of every held-out query set and of the hierarchy pairs (seen by a compared run).
    """

    view: LevelView
    split: Split
    ontology: Ontology | None
    settings: EvalSettings
    exclude: tuple[str, ...] = ()

    def need_ontology(self, task: str) -> Ontology:
        if self.ontology is None:
            raise EvaluationError(f"task {task} needs the ontology (its IS-A graph), not only the level view")
        return self.ontology

    def base_key(self) -> dict:
        """The settings and the names left out: part of every split task's data key."""
        base = {"settings": asdict(self.settings)}
        if self.exclude:
            base["excluded_names"] = {"count": len(self.exclude), "digest": digest("\n".join(self.exclude))}
        return base

    def level_key(self) -> dict:
        return {**self.base_key(), "view": view_key(self.view), "split": split_key(self.split)}


def _matrix(lookup: dict[str, np.ndarray], texts) -> np.ndarray:
    if not len(texts):
        return np.zeros((0, len(next(iter(lookup.values()))) if lookup else 0), dtype=np.float32)
    return np.stack([lookup[t] for t in texts]).astype(np.float32)


def _score_problem(problem: protocols.RankingProblem, lookup: dict, settings: EvalSettings,
                   with_ap: bool = True) -> dict:
    relevance = (metrics.matrix_relevance(problem.relevance) if problem.relevance is not None
                 else metrics.label_relevance(problem.query_labels, problem.reference_labels))
    return metrics.ranking_metrics(
        _matrix(lookup, problem.queries), _matrix(lookup, problem.references), relevance,
        exclude_self=problem.exclude_self, reference_groups=problem.reference_groups,
        with_ap=with_ap, n_boot=settings.n_boot, seed=settings.sample_seed, per_query=True,
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


class SplitTask(EvalTask):
    """A protocol on a level view and its split; its problem is built on first use and kept."""

    def __init__(self, data: SplitData) -> None:
        self.data = data

    @abstractmethod
    def build(self):
        """The protocol's problem on the whole view (:mod:`bioviz.evaluation.protocols`)."""

    def held_out(self, built):
        """``built`` without the queries a compared run has seen."""
        return protocols.drop_queries(built, self.data.exclude)

    @cached_property
    def problem(self):
        built = self.build()
        return self.held_out(built) if self.data.exclude else built

    def data_key(self) -> dict:
        return self.data.level_key()

    def texts(self) -> list[str]:
        return self.problem.texts


class RankingTask(SplitTask):
    """Semantic similarity ranking: mAP of the held-out names against the training names, per class too."""

    name, label = "ranking", "Semantic similarity ranking"

    def build(self):
        return protocols.ranking_problem(self.data.view, self.data.split)

    def score(self, model, lookup) -> Scored:
        scored = _score_problem(self.problem, lookup, self.data.settings)
        per_class = metrics.per_class_map(scored["per_query"]["ap"], self.problem.query_labels)
        values, ci, sizes = _split_metrics(scored)
        return Scored({"map": values["map"]}, {"map": ci["map"]}, sizes, _per_item(scored),
                      per_class={self.data.view.classes[int(c)]: v for c, v in per_class.items()})


class HypernymTask(SplitTask):
    """Hypernym detection: MRR and Acc@1 of each held-out name's class name."""

    name, label = "hypernym", "Hypernym detection"

    def build(self):
        return protocols.hypernym_problem(self.data.view, self.data.split)

    def score(self, model, lookup) -> Scored:
        scored = _score_problem(self.problem, lookup, self.data.settings, with_ap=False)
        return Scored(*_split_metrics(scored), per_item=_per_item(scored))


class SynonymTask(SplitTask):
    """Synonym retrieval / concept mapping: one ranking per split part (``train.map``, ``test.acc1``, ...)."""

    name, label = "synonym", "Synonym retrieval / concept mapping"

    def build(self):
        return protocols.synonym_problems(self.data.view, self.data.split)

    def held_out(self, built):
        # Training names are the train part's queries by definition: only the held-out parts
        # lose names that a compared run has seen.
        return {part: problem if part == "train" else protocols.drop_queries(problem, self.data.exclude)
                for part, problem in built.items()}

    def texts(self) -> list[str]:
        return [t for problem in self.problem.values() for t in problem.texts]

    def score(self, model, lookup) -> Scored:
        values, ci, sizes, per_item = {}, {}, {}, {}
        for part, problem in self.problem.items():
            scored = _score_problem(problem, lookup, self.data.settings)
            per_item.update(_per_item(scored, f"{part}."))
            v, c, z = _split_metrics(scored, f"{part}.")
            values.update(v)
            ci.update(c)
            sizes.update(z)
        return Scored(values, ci, sizes, per_item)


class LeafToParentTask(HypernymTask):
    """Leaf-to-parent mapping: a sample of the ontology's leaves ranks the level's classes (needs the ontology)."""

    name, label = "leaf2parent", "Leaf-to-parent mapping"

    def build(self):
        s = self.data.settings
        try:
            return protocols.leaf_to_parent_problem(self.data.need_ontology(self.name), self.data.view.root,
                                                    s.leaf_queries, s.sample_seed)
        except ValueError as error:
            raise EvaluationError(str(error)) from None

    def data_key(self) -> dict:
        onto = self.data.need_ontology(self.name)
        return {**self.data.base_key(), "ontology": onto.label, "concepts": len(onto), "root": self.data.view.root}


class HierarchyAUCTask(SplitTask):
    """Hierarchy distance ROC-AUC: cosine of held-out pairs at IS-A distances 1-3, AUC per pair of distances."""

    name, label = "hierarchy-auc", "Hierarchy distance ROC-AUC"

    def build(self):
        view, split, s = self.data.view, self.data.split, self.data.settings
        seen = [view.names[i] for i in np.concatenate([split.train, split.validation])] + list(self.data.exclude)
        return protocols.hierarchy_pairs(self.data.need_ontology(self.name), view.root, seen,
                                         per_distance=s.pairs_per_distance, seed=s.sample_seed)

    def held_out(self, built):
        return built  # the seen names were left out of the pairs when they were drawn

    def data_key(self) -> dict:
        return {**self.data.level_key(), "ontology": self.data.need_ontology(self.name).label}

    def score(self, model, lookup) -> Scored:
        pairs, s = self.problem, self.data.settings
        a, b = _matrix(lookup, pairs.first), _matrix(lookup, pairs.second)
        sims = (a * b).sum(axis=1) if len(a) else np.zeros(0)
        result = metrics.hierarchy_auc(sims, pairs.distances, s.n_boot, s.sample_seed)
        return Scored({"mean_auc": result["mean_auc"], **result["auc"]}, result["ci"],
                      {f"pairs.d{d}": n for d, n in result["pairs"].items()},
                      {"similarity": np.round(sims, 6).tolist(), "distance": np.asarray(pairs.distances).tolist()})


# --- a relatedness benchmark ------------------------------------------------------------------


class BenchmarkTask(EvalTask):
    """Spearman's rho between a model's cosine of each rated pair and the human scores."""

    name, label = "benchmark", "Relatedness benchmark"
    partial = True  # a term a vectors file lacks leaves its pairs out (the covered count is the table's n)

    def __init__(self, benchmark: Benchmark, settings: EvalSettings) -> None:
        self.benchmark, self.settings = benchmark, settings

    @property
    def task(self) -> str:
        return self.benchmark.label

    @property
    def step_label(self) -> str:
        return self.benchmark.label

    def data_key(self) -> dict:
        b, s = self.benchmark, self.settings
        return {"benchmark": b.name, "digest": b.digest, "n_boot": s.n_boot, "seed": s.sample_seed}

    def texts(self) -> list[str]:
        return list(self.benchmark.terms)

    def score(self, model, lookup) -> Scored:
        b, s = self.benchmark, self.settings
        scored = score_benchmark(b, lookup, s.n_boot, s.sample_seed)
        return Scored({"spearman": scored["spearman"]}, scored["ci"],
                      {"pairs": scored["pairs"], "covered": scored["covered"]},
                      {"cosine": np.round(scored["cosines"], 6).tolist(), "human": b.scores.tolist()})


# --- mention normalisation ----------------------------------------------------------------------


class Mentions:
    """A gold file's mentions resolved on its level, shared by the normalisation task of each ranking.

    Parameters
    ----------
    gold : GoldFile
    view : LevelView
    ontology : Ontology or None
        To resolve exact names and find the paraphrased mentions.
    index_of : callable, optional
        ``index_of(model)`` -> the level's name index under a MODEL (a page passes its cached one).

    Raises
    ------
    EvaluationError
        Gold ids that are not concepts of the level.
    """

    def __init__(self, gold: GoldFile, view: LevelView, ontology: Ontology | None, index_of=None) -> None:
        check_gold_ids(gold, view)
        self.gold, self.view, self.ontology, self.index_of = gold, view, ontology, index_of
        self.paraphrased = paraphrased(gold, view, ontology)
        self.texts = [info.text for info in resolve_terms(gold.mentions, view, ontology)]
        self._last: tuple | None = None  # (model, index, vectors): one model's, kept while its rankings are scored

    def under(self, model: ModelSpec) -> tuple:
        """``(index, vectors)``: the level's name index and the mentions' vectors under ``model``.

        The mentions are encoded outside the disk vector cache: a gold file is the user's
        (:func:`bioviz.search.term_coding.encode_terms`).
        """
        if self._last is None or self._last[0] != model:
            index = self.index_of(model) if self.index_of is not None else candidate_index(self.view, model)
            self._last = (model, index, encode_terms(self.texts, model))
        return self._last[1:]


class NormalisationTask(EvalTask):
    """Mention normalisation under one ranking: Acc@1, Acc@5 and MRR of each mention's gold concept.

    Never cached: a gold file may be an upload, read in memory only.
    """

    name, label = NORMALISATION, "Mention normalisation"
    cacheable = False

    def __init__(self, mentions: Mentions, ranking: Ranking, settings: EvalSettings) -> None:
        self.mentions, self.ranking, self.settings = mentions, ranking, settings

    @property
    def step_label(self) -> str:
        return f"mention normalisation ({self.ranking.label})"

    def model_fields(self, label: str) -> dict:
        return {"model": f"{label} · {self.ranking.label}", "base_model": label, "ranking": self.ranking.label,
                "gold": self.mentions.gold.label, "level": self.mentions.view.title}

    def data_key(self) -> dict:
        gold, s = self.mentions.gold, self.settings
        return {"gold": {"label": gold.label, "digest": digest("\n".join(gold.mentions), "\n".join(gold.concept_ids))},
                "view": view_key(self.mentions.view), "ranking": self.ranking.label,
                "n_boot": s.n_boot, "seed": s.sample_seed}

    def texts(self) -> list[str]:
        return []  # the mentions are encoded by Mentions.under, outside the vector cache

    def score(self, model, lookup) -> Scored:
        m = self.mentions
        index, vectors = m.under(model.model)
        sparse = SparseNames.build(m.view.names, index.space.names) if self.ranking.hybrid else None
        ranks = gold_ranks(m.gold, m.view, index, vectors, ranking=self.ranking, ontology=m.ontology, sparse=sparse)
        return Scored(*normalisation_figures(ranks, m.paraphrased, n_boot=self.settings.n_boot,
                                             seed=self.settings.sample_seed))


SPLIT_TASKS: dict[str, type[SplitTask]] = {
    cls.name: cls for cls in (RankingTask, HypernymTask, SynonymTask, LeafToParentTask, HierarchyAUCTask)
}
"""The papers' protocols on a level view and its split, in the order tables show them."""

TASK_CLASSES: dict[str, type[EvalTask]] = {**SPLIT_TASKS, BenchmarkTask.name: BenchmarkTask,
                                           NormalisationTask.name: NormalisationTask}
"""Every task, keyed by :attr:`EvalTask.name`."""

TASKS = tuple(SPLIT_TASKS)
"""The names of the split tasks (``--task`` and the Evaluation page's choices)."""

TASK_LABELS = {name: cls.label for name, cls in TASK_CLASSES.items() if cls is not BenchmarkTask}
"""Readable task names (a benchmark result's task is already its label)."""


def expand_tasks(tasks) -> list[str]:
    """``all`` (or None) -> every split task; validates names.

    Examples
    --------
    >>> expand_tasks("ranking"), len(expand_tasks("all"))
    (['ranking'], 5)
    """
    if tasks is None or tasks == "all" or (not isinstance(tasks, str) and "all" in tasks):
        return list(TASKS)
    tasks = [tasks] if isinstance(tasks, str) else list(tasks)
    unknown = [t for t in tasks if t not in TASKS]
    if unknown:
        raise EvaluationError(f"unknown task {unknown[0]!r}: choose from {', '.join(TASKS)} or all")
    return tasks


def split_tasks(tasks, data: SplitData) -> list[SplitTask]:
    """The split tasks named by ``tasks`` (as :func:`expand_tasks` reads them) on ``data``."""
    return [SPLIT_TASKS[name](data) for name in expand_tasks(tasks)]
