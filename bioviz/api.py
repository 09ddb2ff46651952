"""bioviz in a notebook: a few functions over what the pages and the command line already use.

Each function is a thin face on a library call the app makes, with the command line's option
names and defaults (``python -m bioviz ...``, ``bioviz/cli/``): a level is opened once
(:func:`open_level`) and passed to the rest; a MODEL is any text the app takes (a preset, a run
directory, a sentence-transformers directory or hub id, a vectors file); tables come back as
pandas DataFrames, figures as plotly Figures with the pages' titles and palette
(``bioviz/figures``). Vectors go through the same cache under ``BIOVIZ_HOME`` as the app's, and a
training job goes to the app's job queue (``trainer/jobs``), so the Train page lists it.

Bad input raises a :class:`~bioviz.errors.BiovizError` with one line; in IPython or Jupyter it is
shown as that one line, without a traceback (:func:`_show_errors_as_one_line`).

Examples are in ``docs/api.md`` and ``examples/quickstart.ipynb``.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from bioviz import PUBLIC_NAMES
from bioviz.errors import BiovizError, ModelError
from bioviz.models.model_spec import DEFAULT_MODEL, ModelSpec
from bioviz.models.runs import model_labels
from bioviz.models.vectors_coverage import covered_view
from bioviz.ontology import DEFAULT_SPLIT, LevelSpec
from bioviz.ontology.levels import LevelView
from bioviz.ontology.model import Ontology
from bioviz.search.neighbours import level_space
from bioviz.space import Space

if TYPE_CHECKING:  # annotations only: pandas, plotly and the job queue load when a function needs them
    import pandas as pd
    import plotly.graph_objects as go
    from trainer.jobs.store import Job

# The public names are listed once, in bioviz/__init__.py (which loads them lazily): this module's are those
__all__ = [name for name, module in PUBLIC_NAMES.items() if module == "api"]

BASELINE_MODEL = "minilm"  # the CLI's default MODEL of embed and project (neighbours and code: med-minilm)
WAIT_POLL_S = 0.5  # how often :func:`wait` looks at the job table


@dataclass(frozen=True, eq=False)
class Level:
    """An opened concept level: what it is (``spec``), its names and classes (``view``) and its source.

    Attributes
    ----------
    spec : LevelSpec
        Source, root, depth, synonym-set mode and loader options (the sidebar's selection).
    view : LevelView
        The level's names grouped into classes.
    ontology : Ontology
        The parsed source (concept names, synonyms, the IS-A graph).
    """

    spec: LevelSpec
    view: LevelView
    ontology: Ontology

    @property
    def title(self) -> str:
        """The level as figure titles name it (``mini · MINI:0000001 depth 1``)."""
        return self.view.title

    @property
    def names(self) -> "pd.DataFrame":
        """One row per name: ``name``, ``concept``, ``class``, ``class_label``."""
        import pandas as pd  # heavy: only a table needs it

        view = self.view
        return pd.DataFrame({"name": view.names, "concept": view.name_concepts,
                             "class": [view.classes[i] for i in view.labels],
                             "class_label": [view.class_labels[i] for i in view.labels]})

    @property
    def concepts(self) -> "pd.DataFrame":
        """One row per concept with a name in the level: ``concept``, ``names`` (how many), ``class``."""
        frame = self.names
        return (frame.groupby(["concept", "class"], sort=False).size().rename("names").reset_index()
                [["concept", "names", "class"]])

    @property
    def classes(self) -> "pd.DataFrame":
        """One row per class: ``class``, ``label``, ``names``, ``hypernym_names`` (as ``levels --classes``)."""
        import pandas as pd  # heavy: only a table needs it

        return pd.DataFrame(self.view.class_table())

    def stats(self) -> dict:
        """Classes, names and names per class, as ``python -m bioviz levels`` prints them."""
        return self.view.stats()

    def __repr__(self) -> str:
        return f"Level({self.title}: {len(self.view.classes):,} classes, {len(self.view.names):,} names)"


def open_level(source: str = "icd10", *, root: str | None = None, depth: int = 1, synonyms: bool = False,
               keep_ambiguous: bool = False, sab: str | None = None, semantic_group: str | None = None,
               hierarchy: str | None = None) -> Level:
    """Open a concept level of a source, as the sidebar and ``python -m bioviz levels`` do.

    Parameters
    ----------
    source : str
        ``icd10``, ``icd10cm``, ``hpo``, or a path (an ``.obo`` file, a ``.tsv``/``.csv`` table, a UMLS
        ``META`` directory).
    root : str, optional
        Root concept id (default: the source's root).
    depth : int
        Levels below the root whose concepts are the classes.
    synonyms : bool
        Synonym-set mode: every concept under the root is its own class.
    keep_ambiguous : bool
        Keep names found under several classes (dropped by default).
    sab, semantic_group, hierarchy : str, optional
        UMLS options: source vocabulary, semantic group, IS-A edges (``parchd`` or ``isa``).

    Returns
    -------
    Level

    Raises
    ------
    BiovizError
        An unknown source, an unreadable file, an unknown root, a level deeper than the tree.
    """
    options = {key: value for key, value in
               {"sab": sab, "semantic_group": semantic_group, "hierarchy": hierarchy}.items() if value is not None}
    spec = LevelSpec(str(source), root=root, depth=depth, synonyms=synonyms, keep_ambiguous=keep_ambiguous,
                     options=options)
    ontology = spec.ontology()
    return Level(spec, spec.load(ontology), ontology)


def _model(model: ModelSpec | str) -> ModelSpec:
    """A MODEL parsed once, as on the command line (a notebook is the machine's own user: any path)."""
    if isinstance(model, ModelSpec):
        return model
    if not isinstance(model, str) or not model.strip():
        raise ModelError(f"a MODEL is a preset name, a run or model directory, a hub id or a vectors file "
                         f"(got {model!r})")
    return ModelSpec.parse(model)


def _level(level: Level) -> Level:
    if not isinstance(level, Level):
        raise BiovizError(f"expected a level from bioviz.open_level(...), got {type(level).__name__}")
    return level


def _covered(level: Level, models: list[ModelSpec]) -> LevelView:
    """The level cut to the names every vectors file among ``models`` covers (the whole level otherwise)."""
    return covered_view(level.view, models)[0]


def _bar(description: str, show: bool, unit: str = "name"):
    """A ``progress(done, total)`` callback drawing a tqdm bar (a widget in Jupyter), and its closer."""
    from tqdm.auto import tqdm  # tqdm.auto imports ipywidgets in a notebook: only when a bar is drawn

    state: dict = {}

    def update(done: int, total: int) -> None:
        if not show or ("bar" not in state and done >= total):  # all cached: nothing to follow
            return
        if "bar" not in state:  # started at the first count: names found cached are done at once
            state["bar"] = tqdm(total=total, desc=description, unit=unit, initial=done, file=sys.stderr)
        bar = state["bar"]
        bar.total = total
        bar.update(done - bar.n)

    def close() -> None:
        if "bar" in state:
            state["bar"].close()

    return update, close


def _space(view: LevelView, model: ModelSpec, *, progress: bool, batch_size: int = 64,
           use_cache: bool = True) -> Space:
    update, close = _bar(f"encoding {len(view.names):,} names ({model.spec})", progress)
    try:
        return level_space(view, model, batch_size=batch_size, progress=update, use_cache=use_cache,
                           owner="a notebook")[0]
    finally:
        close()


def encode(level: Level, model: ModelSpec | str = BASELINE_MODEL, *, batch_size: int = 64, use_cache: bool = True,
           progress: bool = True) -> Space:
    """Vectors of every name of the level under a model, through the shared vector cache (``embed``).

    Parameters
    ----------
    level : Level
    model : str or ModelSpec
        A preset (``minilm``, ``med-minilm``, ``char-tfidf``), a run directory, a sentence-transformers
        directory or hub id, or a vectors file (``.parquet``, ``.npz``, the Projector's ``.tsv``).
    batch_size : int
        Names per forward pass.
    use_cache : bool
        Read and write the vector cache under ``BIOVIZ_HOME`` (the app's).
    progress : bool
        Draw a progress bar (a tqdm widget in Jupyter) while names are encoded.

    Returns
    -------
    Space
        The names (rows as in ``level.view.names``, cut to what a vectors file covers) and unit vectors.
    """
    spec = _model(model)
    return _space(_covered(_level(level), [spec]), spec, progress=progress, batch_size=batch_size,
                  use_cache=use_cache)


def _cli_args(command: str, level: Level, models: dict, **options) -> argparse.Namespace:
    """The parsed options of a CLI command, its defaults filled in, with ``options`` set over them."""
    from bioviz.cli import build_parser  # the command line's own parser gives its defaults

    args = build_parser([command]).parse_args([command, "-", "--quiet"])
    spec = level.spec
    level_options = {"source": spec.source, "root": spec.root, "depth": spec.depth, "synonyms": spec.synonyms,
                     "keep_ambiguous": spec.keep_ambiguous, **spec.source_options}
    for key, value in {**level_options, **models, **options}.items():
        setattr(args, key, value)
    return args


def _frame(rows: list[dict], meta: dict) -> "pd.DataFrame":
    import pandas as pd  # heavy: only a table needs it

    frame = pd.DataFrame(rows)
    frame.attrs.update(meta)
    return frame


def neighbours(level: Level, text: str, *, model: ModelSpec | str = DEFAULT_MODEL,
               compare: ModelSpec | str | None = None, k: int = 10, among: str = "names",
               restrict_class: str | None = None, ranking: str = "dense", weight: float | None = None,
               expand: bool = True, synonyms_file: str | None = None, progress: bool = True) -> "pd.DataFrame":
    """The nearest names of a query in the level, as ``python -m bioviz neighbours`` ranks them.

    Parameters
    ----------
    level : Level
    text : str
        Any text, an ontology name or a concept id.
    model, compare : str or ModelSpec
        The model that ranks, and optionally a second one (each neighbour then has its rank under it).
    k : int
        Neighbours.
    among : str
        ``names`` (every name), ``train`` (the 15-shot split's training names) or ``hypernyms``.
    restrict_class : str, optional
        Rank only the names of this class.
    ranking : str
        ``dense`` (cosine) or ``hybrid`` (exact match first, then cosine + ``weight`` x char-tfidf).
    weight : float, optional
        The hybrid ranking's char-tfidf weight.
    expand : bool
        Read the query with the clinical vocabulary and the ontologies' synonyms (a few seconds the first
        time in a process); False ranks the text as typed.
    synonyms_file : str, optional
        Your own ``term<TAB>concept_id`` synonyms, added to the clinical vocabulary.
    progress : bool
        Progress bars while the level's names are encoded.

    Returns
    -------
    pandas.DataFrame
        One row per neighbour (rank, name, concept, class, cosine, whether it shares the query's class or
        concept, and its rank under ``compare``); ``.attrs`` holds the rest of the command's answer
        (``ranked_text``, ``expansion``, ``first_answer_from`` ...).
    """
    from bioviz.cli.neighbours import run  # the command's own answer, so the two cannot differ

    level = _level(level)
    models = {"model": _model(model), "compare": _model(compare) if compare is not None else None}
    for spec in (m for m in models.values() if m is not None):  # the bars here: the command runs quiet
        _space(_covered(level, [m for m in models.values() if m]), spec, progress=progress)
    args = _cli_args("neighbours", level, models, text=str(text), k=k, among=among, restrict_class=restrict_class,
                     ranking=ranking, weight=weight, expand=expand, synonyms_file=synonyms_file)
    result = run(args)
    rows = result.pop("neighbours")
    return _frame(rows, result)


def code_terms(level: Level, terms, *, model: ModelSpec | str = DEFAULT_MODEL,
               model_b: ModelSpec | str | None = None, k: int = 5, ranking: str = "dense",
               weight: float | None = None, expand: bool = True, synonyms_file: str | None = None,
               progress: bool = True) -> "pd.DataFrame":
    """Code free-text terms to the level's concepts under one or two models (``python -m bioviz code``).

    Parameters
    ----------
    level : Level
    terms : str or list of str
        The terms (a string: one per line).
    model, model_b : str or ModelSpec
        The model that codes, and optionally a second one (both codes, and whether they agree).
    k : int
        Concepts per term and model.
    ranking, weight, expand, synonyms_file
        As in :func:`neighbours`.
    progress : bool
        Progress bars while names are encoded and terms coded.

    Returns
    -------
    pandas.DataFrame
        The CSV the command writes: one row per term with each model's code, name, score, what placed
        it, the review flag and the parents in the level; ``.attrs`` has the agreement counts.
    """
    from bioviz.cli.neighbours import vocabulary_for_args  # the command's vocabulary options, shared
    from bioviz.search.granularity import with_parents  # as the command: one level up from each code
    from bioviz.search.hybrid import ranking_of  # light, but only coding needs it
    from bioviz.search.lexicon import expansion_of  # as above
    from bioviz.search.neighbours import candidate_index  # as above
    from bioviz.search.term_coding import agreement, code_term_list, export_frame, terms_from_text  # as above

    level = _level(level)
    text = terms if isinstance(terms, str) else "\n".join(str(t) for t in terms)
    listed = terms_from_text(text)
    models = [_model(model)] + ([_model(model_b)] if model_b is not None else [])
    view = _covered(level, models)
    indexes = []
    for spec in models:
        update, close = _bar(f"encoding {len(view.names):,} names ({spec.spec})", progress)
        try:
            indexes.append(candidate_index(view, spec, progress=update))
        finally:
            close()
    options = argparse.Namespace(expand=expand, synonyms_file=synonyms_file)
    vocabulary = vocabulary_for_args(options, level.ontology, not progress)
    update, close = _bar(f"coding {len(listed)} terms", progress, unit="term")
    try:
        frame = code_term_list(listed, view, level.ontology, list(zip(models, indexes)), k=k, progress=update,
                               ranking=ranking_of(ranking, weight), expansion=expansion_of(expand),
                               vocabulary=vocabulary)
    finally:
        close()
    export = export_frame(with_parents(frame, level.ontology, root=view.root))
    export.attrs.update({"models": frame.attrs["models"], "level": view.title,
                         **{key: value for key, value in agreement(frame).items() if key != "terms"}})
    return export


def _labels(models: list[ModelSpec]) -> list[str]:
    """Readable labels as the pages show them (a run by its name, two equal ones told apart)."""
    return model_labels(models)


def projection(level: Level, model: ModelSpec | str = BASELINE_MODEL, compare: ModelSpec | str | None = None, *,
               method: str = "umap", n_components: int = 2, max_points: int = 20_000, n_neighbors: int = 15,
               min_dist: float = 0.1, seed: int = 0, shots: int = DEFAULT_SPLIT.shots,
               highlight_classes: list[str] | None = None, progress: bool = True) -> "go.Figure":
    """The Projection page's figure: the level's names under one model, or two side by side, aligned.

    Parameters
    ----------
    level : Level
    model, compare : str or ModelSpec
        The baseline and, optionally, the compared model (Procrustes-aligned to the baseline's layout).
    method, n_components, max_points, n_neighbors, min_dist, seed
        As ``python -m bioviz project``: ``umap`` (cosine) or ``pca``, 2 or 3 dimensions, the point cap
        (larger levels are sampled per class), UMAP's settings, the seed of the sample and of UMAP.
    shots : int
        The few-shot split the markers show (train/validation/test), as on the page.
    highlight_classes : list of str, optional
        Classes drawn in colour; the others grey.
    progress : bool
        Progress bars while names are encoded.

    Returns
    -------
    plotly.graph_objects.Figure
        Titled ``METHOD · model vs compared · level``; coordinates are cached under ``BIOVIZ_HOME/projections``.
    """
    from dataclasses import replace  # light, but only the markers' split needs it

    from bioviz.figures import projection_pair_figure  # plotly: only a figure needs it
    from bioviz.views.projection import ProjectionParams, align_pair, project, stratified_sample  # scipy, umap

    level = _level(level)
    params = ProjectionParams(method, n_components, n_neighbors, min_dist, max_points, seed)  # checks them
    models = [_model(model)] + ([_model(compare)] if compare is not None else [])
    view = _covered(level, models)
    spaces = [_space(view, spec, progress=progress) for spec in models]
    labels = _labels(models)
    rows = stratified_sample(view.labels, params.max_points, params.seed)
    coords = [project(space, params, rows=rows, labels=view.labels) for space in spaces]
    parts = replace(DEFAULT_SPLIT, shots=shots).make(view).part_of(len(view.names))
    marks = f"markers: split with {shots} shots, seed {DEFAULT_SPLIT.seed}, no zero-shot classes"
    options = dict(parts=parts, method=params.method.upper(), highlight_classes=highlight_classes)
    if compare is None:
        title = f"{params.method.upper()} · {labels[0]} · {view.title}"
        return projection_pair_figure(view, rows, coords[0], None, model_a=labels[0], model_b=None,
                                      caption=f"{params.caption()}<br>{marks}", title=title, **options)
    pair = align_pair(rows, coords[0], coords[1], params)
    title = f"{params.method.upper()} · {labels[0]} vs {labels[1]} · {view.title}"
    caption = f"{params.caption()} · Procrustes disparity {pair.disparity:.3f}<br>{marks}"
    return projection_pair_figure(view, pair.rows, pair.coords_a, pair.coords_b, model_a=labels[0],
                                  model_b=labels[1], caption=caption, title=title, disparity=pair.disparity, **options)


def similarity(terms, model: ModelSpec | str = BASELINE_MODEL, compare: ModelSpec | str = DEFAULT_MODEL, *,
               order: str = "given", difference: bool = False, level: Level | None = None) -> "go.Figure":
    """The Similarity matrix page's figure: cosine heatmaps of a term list under two models.

    Parameters
    ----------
    terms : str or list of str
        The terms (a string: one per line, a blank line starts a new group), or the name of an example
        set in ``assets/examples`` (``biolord_appendix_b``).
    model, compare : str or ModelSpec
        Baseline and compared model.
    order : str
        ``given``, ``group`` or ``cluster`` (average linkage on the compared model's similarities).
    difference : bool
        The difference figure (compared − baseline) instead of the two matrices.
    level : Level, optional
        Colour the terms by their class in this level.

    Returns
    -------
    plotly.graph_objects.Figure
    """
    from bioviz.figures import similarity_figures  # plotly: only a figure needs it
    from bioviz.models.registry import embed  # the term list's vectors, through the cache
    from bioviz.views.similarity import (compare_terms, covered_term_list, example_sets, load_example,
                                         parse_terms, with_class_groups)  # pandas, scipy

    if isinstance(terms, str) and terms in example_sets():
        listed = load_example(terms)
    else:
        listed = parse_terms(terms if isinstance(terms, str) else "\n".join(str(t) for t in terms))
    if level is not None:
        listed = with_class_groups(listed, _level(level).view)
    models = [_model(model), _model(compare)]
    listed, _ = covered_term_list(listed, models)
    vectors = [embed(list(listed.terms), spec).vectors for spec in models]
    labels = _labels(models)
    comparison = compare_terms(listed, vectors[0], vectors[1], model_a=labels[0], model_b=labels[1], order=order)
    view = level.view if level is not None else None
    figures = similarity_figures(comparison, subtitle=f"{listed.origin} · {view.title}" if view else listed.origin,
                                 colour_order=view.classes if view else None,
                                 group_labels=dict(zip(view.classes, view.class_labels)) if view else None)
    return figures["difference" if difference else "pair"]


HIERARCHY_COLOURS = {"map": "within-sample mAP gain", "silhouette": "silhouette gain", "none": "depth (no scores)"}


def hierarchy(level: Level, model: ModelSpec | str = BASELINE_MODEL, compare: ModelSpec | str = DEFAULT_MODEL, *,
              kind: str = "treemap", colour: str = "map", levels: int = 3, node: str | None = None,
              progress: bool = True) -> "go.Figure":
    """The Hierarchy page's figure: the tree under the level's root, coloured by the compared model's gain.

    Parameters
    ----------
    level : Level
    model, compare : str or ModelSpec
        Baseline and compared model.
    kind : str
        ``treemap``, ``icicle`` or ``sunburst``.
    colour : str
        ``map`` (within-sample mAP gain per class), ``silhouette`` or ``none`` (depth).
    levels : int
        Levels drawn at once.
    node : str, optional
        The concept the drawing opens at (default: the root).
    progress : bool
        Progress bars while names are encoded.

    Returns
    -------
    plotly.graph_objects.Figure
    """
    from bioviz.figures import hierarchy_figure  # plotly: only a figure needs it
    from bioviz.figures.hierarchy import KINDS  # as above
    from bioviz.views.hierarchy import drawn_part, level_tree, node_scores  # pandas
    from bioviz.views.separation import compare_separation  # pandas, scipy

    level = _level(level)
    if kind not in KINDS:
        raise BiovizError(f"unknown drawing {kind!r}: use one of {', '.join(KINDS)}")
    if colour not in HIERARCHY_COLOURS:
        raise BiovizError(f"unknown colour {colour!r}: use one of {', '.join(HIERARCHY_COLOURS)}")
    models = [_model(model), _model(compare)]
    view = level.view
    tree = level_tree(level.ontology, view)
    if node is not None and node not in set(tree.nodes["id"]):
        raise BiovizError(f"{node!r} is not a node of the tree under {view.root}")
    labels = _labels(models)
    values, caption = None, f"{len(tree)} nodes · size = names · colour = {HIERARCHY_COLOURS[colour]}"
    if colour != "none":
        spaces = [_space(view, spec, progress=progress) for spec in models]
        sep = compare_separation(spaces[0], spaces[1], view.labels, classes=view.classes,
                                 class_labels=view.class_labels, measure=colour, max_names=5_000, seed=0)
        values = node_scores(tree, sep.table["gain"].to_numpy(), view.class_sizes())
        caption += f" ({labels[1]} − {labels[0]}, {sep.sample_size:,}-name sample)"
    caption += " · concepts with several parents drawn under the first"
    part = drawn_part(tree, node or tree.root, levels)
    if part.cut:
        caption += f" · {len(part.tree):,} of {len(tree):,} nodes drawn"
    return hierarchy_figure(part.tree, values[part.rows] if values is not None else None, kind=kind,
                            title=f"Hierarchy · {labels[1]} vs {labels[0]} · {view.title}", caption=caption,
                            value_label=HIERARCHY_COLOURS[colour] if values is not None else "gain",
                            focus=node if node not in (None, tree.root) else None, max_depth=levels)


def _results(level: Level, models, *, tasks, shots, seed, n_boot, use_cache, progress) -> list:
    """Every (model, task) result on the level, with the split the command line would choose."""
    from bioviz.evaluation import run as evaluation  # scipy.stats: only an evaluation needs it
    from bioviz.evaluation.splits import choose_split  # as above
    from bioviz.evaluation.tasks import EvalSettings  # as above

    level = _level(level)
    listed = [models] if isinstance(models, (str, ModelSpec)) else list(models)
    specs = [_model(m) for m in listed]
    if not specs:
        raise BiovizError("give at least one model to evaluate")
    split_spec, _ = choose_split(specs, shots=shots, seed=seed)
    view = _covered(level, specs)
    update, close = _bar("evaluating", progress, unit="step")
    try:
        return evaluation.evaluate(view, split_spec.make(view), specs, evaluation.expand_tasks(tasks),
                                   ontology=level.ontology, settings=EvalSettings(n_boot=n_boot),
                                   use_cache=use_cache,
                                   steps=lambda done, total, message: update(int(done), total))
    finally:
        close()


def evaluate(level: Level, models, *, tasks="all", shots: int | None = None, seed: int | None = None,
             n_boot: int = 1000, use_cache: bool = True, progress: bool = True) -> "pd.DataFrame":
    """The Evaluation page's results: each model on each task of the level, with bootstrap 95% intervals.

    Parameters
    ----------
    level : Level
    models : str, ModelSpec or list of them
        Base models and trained runs.
    tasks : str or list of str
        ``all``, or task names (``ranking``, ``hypernym``, ``synonym``, ``leaf2parent``, ``hierarchy-auc``).
    shots, seed : int, optional
        The split (default, as ``python -m bioviz eval``: a run's own split, else 15 shots, seed 0).
    n_boot : int
        Bootstrap resamples of the intervals.
    use_cache : bool
        Serve and store results in ``BIOVIZ_HOME/eval`` (and with each run).
    progress : bool
        A progress bar over the (model, task) steps.

    Returns
    -------
    pandas.DataFrame
        One row per (model, task, metric): ``value``, ``ci_low``, ``ci_high``, ``n`` ...
    """
    import pandas as pd  # heavy: only a table needs it

    from bioviz.evaluation.tables import results_table  # as above

    results = _results(level, models, tasks=tasks, shots=shots, seed=seed, n_boot=n_boot, use_cache=use_cache,
                       progress=progress)
    return pd.DataFrame(results_table(results))


def paired_differences(level: Level, models, *, baseline: ModelSpec | str | None = None, tasks="all",
                       shots: int | None = None, seed: int | None = None, n_boot: int = 1000,
                       progress: bool = True) -> "pd.DataFrame":
    """Each model's difference from a baseline on the same items, with paired bootstrap 95% intervals.

    Parameters
    ----------
    level : Level
    models : list of str or ModelSpec
        The baseline among them.
    baseline : str or ModelSpec, optional
        Default: the first of ``models``.
    tasks, shots, seed, n_boot, progress
        As in :func:`evaluate` (results come from its cache when it ran before).

    Returns
    -------
    pandas.DataFrame
        One row per (model, task, metric): ``delta`` (model − baseline), ``ci_low``, ``ci_high``, ``n`` and
        ``excludes_zero``.
    """
    import pandas as pd  # heavy: only a table needs it

    from bioviz.evaluation.paired import differences  # scipy: only an evaluation needs it

    listed = [models] if isinstance(models, (str, ModelSpec)) else list(models)
    if not listed:
        raise BiovizError("give the models to compare, the baseline among them")
    base = _model(baseline if baseline is not None else listed[0])
    results = _results(level, listed, tasks=tasks, shots=shots, seed=seed, n_boot=n_boot, use_cache=True,
                       progress=progress)
    found = differences(results, base, n_boot=n_boot)
    return pd.DataFrame([{"model": d.model, "baseline": d.baseline, "task": d.task, "metric": d.metric,
                          "delta": d.delta, "ci_low": d.ci[0] if d.ci else None,
                          "ci_high": d.ci[1] if d.ci else None, "n": d.n, "excludes_zero": d.excludes_zero}
                         for d in found])


def train(level: Level, *, device: str = "auto", **options) -> "Job":
    """Queue a few-shot training job on the level in the app's job queue (the Train page lists it).

    Parameters
    ----------
    level : Level
    device : str
        ``auto`` (a GPU when present, else the CPU), ``cpu``, ``cuda`` or ``cuda:N``.
    **options
        ``python -m trainer train`` options by name (``shots``, ``encoder``, ``base``, ``init``, ``epochs``,
        ``hidden``, ``seed`` ...); the trainer's defaults fill in the rest.

    Returns
    -------
    trainer.jobs.store.Job
        The job as queued or started; :func:`wait` follows it to its end. Its ``run_dir`` is a MODEL
        once it succeeded.

    Raises
    ------
    BiovizError
        An unknown option or value, a device not available here (checked before the job is created).
    """
    from trainer.jobs.queue import Worker  # the job queue sits above the library: loaded only to train

    level = _level(level)
    config = {**level.spec.to_config(), **options}
    if "base" in config and isinstance(config["base"], ModelSpec):
        config["base"] = config["base"].spec
    return Worker().submit(config, device=device)


def wait(job, *, timeout: float | None = None, progress: bool = True) -> "Job":
    """Follow a training job until it ends, with a progress bar over its epochs.

    Parameters
    ----------
    job : Job or str
        A job from :func:`train`, or a job id.
    timeout : float, optional
        Seconds to wait at most (default: until it ends).
    progress : bool
        Draw a bar over the job's epochs.

    Returns
    -------
    trainer.jobs.store.Job
        The finished job (``status`` ``succeeded``; ``run_dir`` is the trained run).

    Raises
    ------
    BiovizError
        The job failed, was cancelled or interrupted (with its reason), or ``timeout`` passed first.
    """
    from trainer.jobs.queue import Worker  # as in train
    from trainer.jobs.store import SUCCEEDED  # as above

    worker = Worker()
    job_id = job if isinstance(job, str) else job.id
    update, close = _bar(f"job {job_id}", progress, unit="epoch")
    deadline = None if timeout is None else time.monotonic() + timeout
    try:
        while True:
            worker.reconcile()  # starts it when a slot frees, records its end
            current = worker.store.get(job_id)
            epoch, epochs = current.progress.get("epoch"), current.progress.get("max_epochs")
            if epoch is not None and epochs:
                update(int(epoch), int(epochs))
            if current.finished:
                break
            if deadline is not None and time.monotonic() > deadline:
                raise BiovizError(f"job {job_id} is still {current.status} after {timeout:g} s")
            time.sleep(WAIT_POLL_S)
    finally:
        close()
    if current.status != SUCCEEDED:
        raise BiovizError(f"job {job_id} {current.status}: {current.error or 'see its log at ' + current.log_path}")
    return current


def _show_errors_as_one_line() -> None:
    """In IPython/Jupyter, show a :class:`BiovizError` as its one line (bad input needs no traceback)."""
    shell_module = sys.modules.get("IPython")
    shell = shell_module.get_ipython() if shell_module is not None else None
    if shell is None:
        return

    def one_line(shell, etype, value, tb, tb_offset=None):
        sys.stderr.write(f"{etype.__name__}: {value}\n")

    shell.set_custom_exc((BiovizError,), one_line)


_show_errors_as_one_line()
