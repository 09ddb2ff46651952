"""Streamlit caching of library results, in one place.

``st.cache_resource`` for shared objects (ontologies, models, indexes), ``st.cache_data``
with ``max_entries`` for tables and coordinates. Keys are the arguments that made them.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import streamlit as st

from bioviz.errors import BiovizError
from bioviz.models.encoding_estimate import time_left
from bioviz.models.encoding_session import EncodingSession
from bioviz.models import runs
from bioviz.models.model_spec import ModelSpec
from bioviz.models.registry import embed, load_encoder
from bioviz.models.shared_encoding import EncodingProgress
from bioviz.models.vectors_coverage import level_coverage as coverage_of, load_level
from bioviz.ontology import LevelSpec, load_source
from bioviz.ontology.levels import LevelView
from bioviz.ontology.model import Ontology
from bioviz.search import neighbours
from bioviz.search.hybrid import SparseNames
from bioviz.search.index import NeighbourIndex
from bioviz.search.name_search import NameSearch
from bioviz.search.vectors_query import query_answer
from ui import warmup_banner
from ui.markdown import md

if TYPE_CHECKING:  # annotations only: projection and evaluation take seconds to import, off every page's start-up
    from bioviz.evaluation.tasks import EvalSettings
    from bioviz.ontology import SplitSpec
    from bioviz.views.projection import ProjectionParams


@st.cache_resource(max_entries=6, show_spinner="Loading ontology…")
def ontology(source: str, options: tuple = ()) -> Ontology:
    """The parsed source (cached across reruns and sessions).

    ``options`` are the loader options as sorted ``(name, value)`` pairs (UMLS ``sab``,
    ``semantic_group``, ``hierarchy``); they are part of this cache's key and of the
    on-disk parsed-source key, so two option sets never share an ontology.
    """
    return load_source(source, **dict(options))


@st.cache_resource(max_entries=12, show_spinner="Cutting the concept level…")
def view(spec: LevelSpec) -> LevelView:
    """The level view (or synonym-set view) ``spec`` names, cut from the cached ontology.

    Cut to the names its ``covered_by`` vectors files cover (:func:`bioviz.models.vectors_coverage.load_level`).
    """
    return load_level(spec, level_ontology(spec))


@st.cache_data(max_entries=12, show_spinner=False)
def level_coverage(spec: LevelSpec) -> tuple:
    """Each ``covered_by`` vectors file's :class:`~bioviz.models.vectors_coverage.Coverage` of the level."""
    return coverage_of(spec, level_ontology(spec))


# --- Comparison views (Projection, Similarity matrix, Hierarchy) -------------------------
# A level is named by a LevelSpec (``ui.state.selection``, hashable); the functions below
# rebuild its view through ``view`` above.


def level_ontology(spec: LevelSpec) -> Ontology:
    """The parsed source of a level, with its loader options."""
    return ontology(spec.source, spec.options)


class _EncodingBar:
    """``report(EncodingProgress)`` drawn as a bar: names done, the recent rate, the time left.

    Above it, the estimate said before the encoding started. Outside a cached function it
    also redraws the warm-up banner, whose own polling waits for the page's run to end.
    """

    def __init__(self, starting: str, banner: bool) -> None:
        self.note, self.slot, self.banner = st.empty(), st.empty(), banner
        self.slot.progress(0.0, text=md(starting))

    def say(self, text: str) -> None:
        self.note.caption(md(text))

    def __call__(self, progress: EncodingProgress) -> None:
        self.slot.progress(progress.fraction, text=md(progress.text()))
        if self.banner:
            warmup_banner.refresh()

    def close(self) -> None:
        self.note.empty()
        self.slot.empty()


def prepare_vectors(models: Sequence[ModelSpec | None], spec: LevelSpec) -> None:
    """Make sure every name of the level has vectors under each model, showing how long and how far.

    Called by the pages before the cached functions that need the level's vectors (not cached
    itself, so its bar can also keep the warm-up banner live). For each model whose vectors
    are not stored yet: the estimate from the model's measured rate, then a bar with names
    done and the time left, updated every couple of seconds. A level the warm-up, another
    session or a job is encoding already is waited for, with that encoding's progress
    (:func:`bioviz.models.shared_encoding.encode_shared`), not encoded a second time.
    """
    ready = st.session_state.setdefault("_vectors_ready", set())  # a rerun does not hash the level's names again
    names = view(spec).names
    for model in dict.fromkeys(m for m in models if m and (m, spec) not in ready):
        try:
            encoder = load_encoder(model)
        except BiovizError as error:  # said once, here: asking again (a download, say) would fail the same way
            st.error(md(error))
            st.stop()
        session = EncodingSession.of(encoder, names, owner="a page")  # the road's one owner: estimate, claim, store
        if session.ready():
            ready.add((model, spec))
            continue
        bar = _EncodingBar(f"Checking which of {len(names):,} names have vectors under {encoder.label}…", banner=True)
        try:
            estimate = session.estimate()
            if estimate.needed:
                bar.say(estimate.message())
                session.encode(report=bar)
            ready.add((model, spec))
        finally:
            bar.close()


@st.cache_resource(max_entries=8, show_spinner=False)
def view_space(model: ModelSpec, spec: LevelSpec):
    """Vectors of every name of the selected level view under ``model`` (a Space).

    Pages call :func:`prepare_vectors` first, so this mostly reads the stored block; otherwise
    a bar inside (replayed empty on a hit) follows the encoding.
    """
    bar = _EncodingBar("Embedding the level's names (cached on disk after the first time)…", banner=False)
    try:
        return neighbours.level_space(view(spec), model, report=bar, owner="a page")[0]
    finally:
        bar.close()


@st.cache_data(max_entries=64, show_spinner=False)
def term_space(model: ModelSpec, terms: tuple):
    """Vectors of a short term list under ``model`` (a Space)."""
    return embed(list(terms), model)


@st.cache_data(max_entries=32, show_spinner=False)
def projection(model: ModelSpec, spec: LevelSpec, params: ProjectionParams, _label: str = "Layout"):
    """``(rows, coords)``: the selected view under ``model`` projected with ``params``
    (:func:`bioviz.views.projection.project_sample`).

    The rows are the class-stratified sample for the point cap; coordinates also live in
    the disk cache (``BIOVIZ_HOME/projections``), so a new session reads them back at once.
    While a layout computes, a bar named ``_label`` (not part of the key) follows its own steps
    (neighbour graph, epochs, placement) with the time left; it is emptied afterwards
    (Streamlit replays it, empty, on a hit).
    """
    from bioviz.views.projection import project_sample  # scipy.linalg (about 0.5 s): off every page's start-up

    slot = st.empty()

    def follow(done: int, total: int, message: str) -> None:
        if done < total:
            slot.progress(min(done / max(total, 1), 1.0), text=f"{md(_label)} of {md(message)}")

    try:
        return project_sample(view_space(model, spec), view(spec).labels, params,  # landmarks per class
                              progress=follow)
    finally:
        slot.empty()


@st.cache_data(max_entries=8, show_spinner=False)
def movement(model_a: ModelSpec, model_b: ModelSpec, spec: LevelSpec, params: ProjectionParams, *, k: int):
    """``(Movement, coords_a, coords_b)``: what training moved between the two layouts of ``params``
    (:func:`bioviz.views.movement.training_movement`).

    Same rows and layouts as the Projection figure (:func:`projection`); nearest names on the
    original vectors, under a progress bar (two steps: one search per model).
    """
    from bioviz.views.movement import training_movement  # pandas and scipy: off every page's start-up

    rows, coords_a = projection(model_a, spec, params)
    coords_b = projection(model_b, spec, params)[1]
    return _with_steps("What training moved", lambda bar: training_movement(
        view_space(model_a, spec), view_space(model_b, spec), view(spec).labels, rows, coords_a=coords_a,
        coords_b=coords_b, k=k, progress=lambda fraction, message: bar(2 * fraction, 2, message)),
        starting="finding each name's nearest names under both models…")


@st.cache_data(max_entries=16, show_spinner=False)
def separation(model_a: ModelSpec, model_b: ModelSpec, spec: LevelSpec, *, measure: str, max_names: int, seed: int):
    """Per-class separation of the selected view under two models."""
    from bioviz.views.separation import compare_separation  # pandas and scipy: off every page's start-up

    v = view(spec)
    return compare_separation(view_space(model_a, spec), view_space(model_b, spec), v.labels,
                              classes=v.classes, class_labels=v.class_labels, measure=measure,
                              max_names=max_names, seed=seed)


def digest(*parts) -> str:
    """A short hash of strings, numbers and arrays: the key of :func:`figure`."""
    h = hashlib.sha256()
    for part in parts:
        if isinstance(part, np.ndarray):
            part = "\x1f".join(map(str, part)) if part.dtype == object else np.ascontiguousarray(part).tobytes()
        h.update(part if isinstance(part, bytes) else str(part).encode())
        h.update(b"\0")
    return h.hexdigest()[:24]


@st.cache_resource(max_entries=6, show_spinner=False)
def figure(key: str, _build):
    """The figure ``_build()`` returns, kept by ``key`` (a :func:`digest` of everything it shows).

    Building the two 20k-point projection panels is most of a revisit's server time, so a
    second visit, in any session, reuses the built figure. Plotly figures are not changed
    by ``st.plotly_chart``, so one object can be shared.
    """
    return _build()


@st.cache_data(max_entries=16, show_spinner=False)
def run_split(run_dir: str, spec: LevelSpec, stamp: float):
    """The split run ``run_dir`` was trained with, on the selected view (:func:`bioviz.models.runs.run_split`).

    ``stamp`` (the mtime of the run's ``run.json``) is only part of the key: a run deleted
    and trained again under the same path is read afresh.
    """
    return runs.run_split(run_dir, view(spec))


@st.cache_resource(max_entries=8, show_spinner="Drawing the subtree…")
def level_tree(spec: LevelSpec):
    """The ontology subtree from the selected view's root down to its classes."""
    from bioviz.views.hierarchy import level_tree as build  # pandas: off every page's start-up

    return build(level_ontology(spec), view(spec))


class _StepBar:
    """A progress bar with steps and an ETA for a ``steps(done, total, message)`` callback.

    Created (and emptied) inside the cached function that reports to it, like
    :func:`neighbour_index`'s bar: Streamlit replays what a cached function drew on a hit.
    The ETA is the time per step so far times the steps left; steps are (model, task)
    pairs whose first encoding dominates, so it is rough but moves with the work.
    """

    def __init__(self, what: str, starting: str) -> None:
        self._clock = time.perf_counter
        self.what, self.slot, self.started = what, st.empty(), time.perf_counter()
        self.slot.progress(0.0, text=f"{what}: {starting}")

    def __call__(self, done: float, total: int, message: str) -> None:
        elapsed = self._clock() - self.started
        left = time_left(elapsed, done, total) if elapsed > 1 else ""
        eta = f" · {left}" if left else ""
        step = min(int(done) + 1, total)
        text = f"{self.what}: step {step} of {total} · {md(message)}{eta}"
        self.slot.progress(min(done / max(total, 1), 1.0), text=text)

    def close(self) -> None:
        self.slot.empty()


def _with_steps(what: str, work, starting: str = "loading the models…"):
    """``work(bar)`` under a :class:`_StepBar` (first saying ``starting``), removed afterwards whatever happens."""
    bar = _StepBar(what, starting)
    try:
        return work(bar)
    finally:
        bar.close()


@st.cache_data(max_entries=16, show_spinner=False)
def evaluation_results(spec: LevelSpec, models: tuple[ModelSpec, ...], tasks: tuple, *, split: SplitSpec,
                       settings: EvalSettings) -> list:
    """Results of the ontology protocols (:func:`bioviz.evaluation.run.evaluate`) for the selected view.

    Results also live in the disk result cache (``BIOVIZ_HOME/eval``) and, for runs, in the run.
    """
    from bioviz.evaluation.run import evaluate  # pandas and scipy (seconds): off every page's start-up

    v = view(spec)
    return _with_steps("Ontology tasks", lambda bar: evaluate(
        v, split.make(v), list(models), list(tasks), ontology=level_ontology(spec), settings=settings, steps=bar))


@st.cache_data(max_entries=16, show_spinner=False)
def benchmark_results(models: tuple[ModelSpec, ...], benchmarks: tuple, settings: EvalSettings) -> list:
    """Spearman's rho of the models on relatedness benchmarks (names or stored upload paths)."""
    from bioviz.evaluation.run import evaluate_benchmarks  # pandas and scipy, as evaluation_results

    return _with_steps("Relatedness benchmarks", lambda bar: evaluate_benchmarks(
        list(models), list(benchmarks), settings=settings, steps=bar))


@st.cache_data(max_entries=8, show_spinner=False)
def cross_level_table(spec: LevelSpec, models: tuple[ModelSpec, ...], depths: tuple, *, split: SplitSpec,
                      settings: EvalSettings) -> dict:
    """Ranking mAP of the models on each level under the selected root (higher-level-semantics Table 4)."""
    from bioviz.evaluation.run import cross_level  # pandas and scipy, as evaluation_results

    table = _with_steps("Cross-level table", lambda bar: cross_level(
        level_ontology(spec), list(models), depths=list(depths), root=spec.root, split_spec=split,
        keep_ambiguous=spec.keep_ambiguous, settings=settings, steps=bar))
    table.pop("results")
    return table


# --- Neighbours ----------------------------------------------------------------------------


@st.cache_resource(max_entries=4, show_spinner=False)
def neighbour_index(model: ModelSpec, spec: LevelSpec):
    """``(NeighbourIndex, stats)`` over the selected view's names under ``model``.

    Vectors come from the disk cache; names missing there are encoded under a progress bar
    with an ETA. The bar is created (and removed) inside this function because Streamlit
    replays the elements a cached function drew on every cache hit.
    """
    v = view(spec)
    bar = st.empty()

    def report(progress: EncodingProgress) -> None:
        bar.progress(progress.fraction, text=md(progress.text()))

    def indexing(done: int, total: int) -> None:
        # Above 250k names the approximate index is built (minutes at 1M) or read from disk.
        left = time_left(time.perf_counter() - built, done, total) if done else ""
        eta = f", {left}" if left else ""
        bar.progress(done / max(total, 1), text=f"Indexing {total:,} names for search: {done:,} added{eta}")

    try:
        space, stats = neighbours.level_space(v, model, report=report, owner="a page")
        built = time.perf_counter()
        index = NeighbourIndex.from_view(space, v, progress=indexing)
    finally:
        bar.empty()
    return index, stats


@st.cache_data(max_entries=256, show_spinner=False)
def query_vector(model: ModelSpec, text: str):
    """Unit vector of one query text under ``model``."""
    return neighbours.query_vector(text, model)


@st.cache_data(max_entries=256, show_spinner=False)
def query_note(model: ModelSpec, text: str) -> str:
    """Which name of a vectors file answered ``text`` when the file lacks it ("" when its own vector did)."""
    return query_answer(text, model).note


# Levels with more names than this are not sent to the browser as a selectbox's options
# (the page would stall); the Neighbours page searches them with ``name_search`` instead.
MAX_BROWSER_NAMES = 60_000


@st.cache_resource(max_entries=4, show_spinner="Indexing the level's names for search…")
def name_search(spec: LevelSpec):
    """Type-ahead search over the selected view's names (:class:`bioviz.search.name_search.NameSearch`)."""
    return NameSearch.from_view(view(spec))


@st.cache_data(max_entries=16, show_spinner=False)
def held_out_names(spec: LevelSpec) -> list[str]:
    """Held-out test names of the level's default split (``DEFAULT_SPLIT``)."""
    return neighbours.held_out_names(view(spec))


@st.cache_resource(max_entries=8, show_spinner=False)
def candidate_index(model: ModelSpec, spec: LevelSpec, among: str):
    """Index of the names a query is ranked against (``bioviz.search.neighbours.AMONG``) under ``model``."""
    # The level's names come from neighbour_index's cached index (its bar); built only when ``among`` is
    # ``names``. The training names and the class names are encoded alone, under this bar.
    bar = st.empty()

    def progress(done: int, total: int) -> None:
        bar.progress(done / max(total, 1), text=f"Embedding the {total:,} names to rank among: {done:,} done")

    try:
        return neighbours.candidate_index(view(spec), model, among, base=lambda: neighbour_index(model, spec)[0],
                                          progress=progress)
    finally:
        bar.empty()


@st.cache_resource(max_entries=8, show_spinner="Indexing the level's names by character n-grams…")
def sparse_names(spec: LevelSpec, among: str, _index) -> SparseNames:
    """The char-tfidf rows of a candidate set's names (``_index``'s, the same under every model) for a hybrid ranking."""
    return SparseNames.build(view(spec).names, _index.space.names)


@st.cache_data(max_entries=16, show_spinner=False)
def normalisation_results(spec: LevelSpec, models: tuple[ModelSpec, ...], gold, *, rankings: tuple,
                          n_boot: int) -> list:
    """Mention normalisation results of a gold file (a ``GoldFile``) on a level, per model and ranking, under a step bar."""
    from bioviz.evaluation.run import EvalSettings, evaluate_normalisation  # pandas, scipy: as above

    return _with_steps("Mention normalisation", lambda bar: evaluate_normalisation(
        gold, spec, list(models), list(rankings), settings=EvalSettings(n_boot=n_boot),
        index_of=lambda model: candidate_index(model, spec, "names"), steps=bar))
