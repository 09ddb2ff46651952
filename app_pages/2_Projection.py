"""Projection: the level's names under two models side by side, aligned, coloured by class."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd
import streamlit as st

from bioviz.csv_export import frame_to_csv
from bioviz.errors import BiovizError, SplitError
from bioviz.figures import (projection_map_figure, projection_pair_figure, projection_table, selected_rows,
                            separation_figure, slug)
from bioviz.figures.movement import MAX_ARROWS, colour_by, movement_figure
from bioviz.figures.point_cloud import choose_renderer, pack_point_cloud, selected_view_rows
from bioviz.figures.projection import sample_map_figure
from bioviz.figures.theme import part_colours
from bioviz.ontology import DEFAULT_SPLIT
from bioviz.views.movement import DEFAULT_K, arrow_rows, movers_table, part_summary
from bioviz.views.projection import ProjectionParams, align_pair, pair_is_cached, preview_params
from bioviz.models.model_spec import trained_from
from bioviz.models.runs import model_labels, run_mtime
from bioviz.views.sample_map import sample_map
from bioviz.views.separation import MEASURES
from ui import cache, compare, progressive, state
from ui.markdown import md
from ui.point_cloud import point_cloud_chart

view = state.current_view()
model_a, model_b = state.chosen_models()
fmt = compare.image_format()

DEFAULTS = {"method": "umap", "dims": 2, "nn": 15, "md": 0.1, "cap": 10_000, "shots": DEFAULT_SPLIT.shots,
            "measure": "map", "hl": [], "map": False, "mv_class": "", "mv_n": 150, "one": False}
# The widgets' bounds, also the bounds of a link's values.
# The cap goes to millions: above 100k points the point-cloud renderer draws (plotly below).
BOUNDS = {"nn": (2, 100), "md": (0.0, 0.99), "cap": (10, 5_000_000), "shots": (1, 500), "mv_n": (10, MAX_ARROWS)}
LIST_KEYS = ("hl",)  # lists of class ids: comma-separated in the URL
state.page_params(DEFAULTS, choices={"method": ["umap", "pca"], "dims": [2, 3], "measure": list(MEASURES)},
                  bounds=BOUNDS, casts={"hl": lambda text: [c for c in text.split(",") if c.strip()]})
SELECTED = "_projection_selected"  # view rows picked with box/lasso, kept across reruns
CLOUD_SEQ = "_projection_cloud_answer"  # id of the point-cloud component's last answer already taken


def run_markers() -> tuple:
    """``(RunSplit or None, note)``: the split a compared (else baseline) run was trained with on this level.

    Markers should show what the run really trained on, zero-shot classes included; the
    note says why a run's own split cannot be used (another level, no split.json).
    """
    for model in (model_b, model_a):
        if model and model.kind == "run":
            mtime = run_mtime(model.path)
            if mtime is None:  # the run was deleted since the pickers were drawn
                return None, ""
            try:
                return cache.run_split(str(model.path), state.selection(), mtime), ""
            except SplitError as error:
                return None, str(error)
    return None, ""


marks, marks_note = run_markers() if view is not None else (None, "")

st.title("Projection")
st.caption("Each model's vectors of the level's names, projected with UMAP (cosine) and aligned with a Procrustes "
           "fit so the same names sit in comparable places. Box- or lasso-select points in either panel to "
           "highlight the same names in both.")

cols = st.columns([1.1, 0.8, 1.3, 1.3, 1.1, 0.9, 1.3])
cols[0].radio("Method", ["umap", "pca"], key="method", format_func=str.upper, horizontal=True)
cols[1].radio("Dimensions", [2, 3], key="dims", format_func=lambda d: f"{d}D", horizontal=True)
cols[2].slider("n_neighbors", *BOUNDS["nn"], key="nn", disabled=st.session_state["method"] == "pca",
               help="UMAP neighbourhood size: larger keeps more global structure")
cols[3].slider("min_dist", *BOUNDS["md"], step=0.01, key="md", disabled=st.session_state["method"] == "pca",
               help="UMAP minimum distance: smaller packs clusters tighter")
cols[4].number_input("Point cap", *BOUNDS["cap"], step=1_000, key="cap",
                     help="Larger views are sampled per class so every class stays visible. Above 100,000 "
                          "points a point-cloud renderer draws instead of plotly (millions stay interactive)")
cols[5].number_input("Shots", *BOUNDS["shots"], key="shots", disabled=marks is not None,
                     help=f"Markers show {md(marks.describe())}" if marks is not None else
                     f"Split used to mark train / validation / test names (seed {DEFAULT_SPLIT.seed}, no zero-shot classes)")
cols[6].selectbox("Separation measure", list(MEASURES), key="measure", format_func=MEASURES.get)
if view is not None:
    # A link's (or an earlier level's) class ids that this level does not have are dropped.
    st.session_state["hl"] = [c for c in st.session_state["hl"] if c in view.classes]
    if st.session_state["mv_class"] not in ("", *view.classes):
        st.session_state["mv_class"] = ""
    class_names = dict(zip(view.classes, view.class_labels))
    left, right, alone = st.columns([4, 1.3, 1])
    left.multiselect("Highlight classes", view.classes, key="hl", format_func=lambda c: f"{c} · {class_names[c]}",
                     placeholder="All classes in colour",
                     help="Draw these classes in colour and grey the rest, so a few classes stand out")
    right.toggle("Ontology-labelled map", key="map", disabled=st.session_state["dims"] == 3,
                 help="Contours holding half of each class's names, and the class's name (from the ontology) at its "
                      "density peak, so the figure explains itself without a legend (2-D)")
    alone.toggle("One model", key="one", help="A map of the baseline model alone (one panel, no alignment)")
url = compare.url_values(DEFAULTS)
url.update({key: ",".join(st.session_state[key]) for key in LIST_KEYS})
state.sync_url(**url)
for key in LIST_KEYS:  # sync_url leaves an emptied list's old value behind
    state.set_url_param(key, url[key])

if view is None:
    st.stop()
level = state.selection()
models = [m for m in (model_a, model_b) if m]


@st.fragment(run_every=progressive.REFRESH_S)
def sample_map_answer() -> None:
    """The encoding's bar and a PCA map of a sample of the names encoded so far, redrawn every couple of
    seconds until every name is encoded; then the whole page once more, for the usual layout."""
    running = progressive.still_encoding(models, level)  # none left: the page reruns into the usual layout
    if running is None:
        return
    for job in running.values():
        progressive.encoding_bar(job)
    # The map of the first model still encoding: a model already stored would show a finished map.
    model = next(iter(running))
    sample = sample_map(progressive.partial_vectors(model, level), view.labels, seed=0)
    final = str(st.session_state["method"]).upper()  # the layout the page draws once every name is stored
    st.info(f"**{md(sample.marker)}**: a PCA of {len(sample.rows):,} of the names encoded so far (a class-stratified "
            f"sample), redrawn as the encoding goes on; the {final} layout follows when every name is encoded.",
            icon=":material/hourglass_top:")
    if len(sample.rows) < 2:
        st.caption("No map yet: names are being encoded.")
        return
    label = model_labels([model])[0]
    fig = sample_map_figure(view, sample, label, highlight_classes=list(st.session_state["hl"]) or None)
    st.plotly_chart(fig, width="stretch", config={"displayModeBar": False}, key="projection_sample_map")


# A level with many names still to encode (here, by the warm-up, another page or a job) gets a sample
# map at once, refined as the background encoding goes on (ui.progressive), instead of a bar alone.
progressive.answer_while_encoding(models, level, sample_map_answer)
try:
    params = ProjectionParams(st.session_state["method"], int(st.session_state["dims"]), int(st.session_state["nn"]),
                              float(st.session_state["md"]), int(st.session_state["cap"]))
    cache.prepare_vectors((model_a, model_b), level)  # a first encoding: its estimate, then a bar with the time left
    space_a = cache.view_space(model_a, level)
    space_b = cache.view_space(model_b, level)
    # read afresh (a renamed run is titled by its new name); one at a time: the page tells two equal ones apart itself
    label_a, label_b = (model_labels([model])[0] for model in (model_a, model_b))
    if marks is not None:
        parts, marks_caption = marks.parts, f"markers: {marks.describe()}"
    else:
        parts = replace(DEFAULT_SPLIT, shots=int(st.session_state["shots"])).make(view).part_of(len(view.names))
        marks_caption = (f"markers: split with {st.session_state['shots']} shots, seed {DEFAULT_SPLIT.seed}, "
                         "no zero-shot classes"
                         + (f" ({marks_note})" if marks_note else ""))
except BiovizError as error:
    st.error(md(error))
    st.stop()


def on_select() -> None:
    """Keep the rows of a new box/lasso selection (an empty one clears the highlight)."""
    event = st.session_state.get("projection_chart")
    st.session_state[SELECTED] = selected_rows(event.selection if event else None)


highlight = st.session_state.get(SELECTED, np.zeros(0, dtype=np.int64))
method_label = params.method.upper()
highlight_classes = list(st.session_state["hl"])
labelled_map = bool(st.session_state["map"]) and params.n_components == 2
one_model = bool(st.session_state["one"])


def draw_cloud(pair, title: str, *, name: str, why: str, preview: bool) -> None:
    """The two panels through the point-cloud component; its selection becomes the page's selection."""
    caption = f"{pair.params.caption()} · Procrustes disparity {pair.disparity:.3f}"
    key = cache.digest("cloud", state.selection(), label_a, label_b, pair.rows, pair.coords_a, pair.coords_b,
                       title, caption, ",".join(highlight_classes))
    cloud = cache.figure(key, lambda: pack_point_cloud(view, pair.rows, pair.coords_a, pair.coords_b, model_a=label_a,
                                                       model_b=label_b, title=title, caption=caption,
                                                       highlight_classes=highlight_classes or None, filename=name))
    st.caption(f"Renderer: {why}. Drag to pan, scroll to zoom (both panels move together); click a point, or "
               "shift + drag a box, or alt + drag a lasso, to select names in both panels; Esc or a click on "
               "empty space clears. Split markers and the labelled map are drawn by the plotly renderer only.")
    answer = point_cloud_chart(cloud, key="projection_cloud_preview" if preview else "projection_cloud")
    if not preview:
        st.download_button(f"Download numbers (CSV, {len(pair.rows):,} rows)",
                           lambda: frame_to_csv(projection_table(view, pair.rows, pair.coords_a, pair.coords_b,
                                                                 parts=parts)),
                           f"{name}.csv", "text/csv", key=f"csv-{name}-cloud", on_click="ignore")
    if not preview and answer and answer.get("id") != st.session_state.get(CLOUD_SEQ):
        st.session_state[CLOUD_SEQ] = answer.get("id")
        st.session_state[SELECTED] = selected_view_rows(answer, cloud)


def draw(pair, preview: bool = False) -> None:
    """The two aligned panels, with their caption, exports and (for the final figure) selection."""
    caption = (f"{pair.params.caption()} · Procrustes disparity {pair.disparity:.3f}<br>{marks_caption}"
               + (" · contours: half of each class's names, its name at its density peak" if labelled_map else ""))
    title = (f"{pair.params.method.upper()} · {label_a} vs {label_b} · {view.title}"
             + (" · preview while UMAP computes" if preview else ""))
    renderer, why = choose_renderer(len(pair.rows))
    if renderer == "point cloud" and pair.params.n_components == 2:
        name = slug(pair.params.method, label_a, "vs", label_b, view.source.split()[0], f"d{view.depth}")
        draw_cloud(pair, title, name=name, why=why, preview=preview)
        return
    if renderer == "point cloud":
        why = f"{len(pair.rows):,} points per panel in 3-D: drawn with plotly (the point-cloud renderer is 2-D)"
    if not preview:
        st.caption(f"Renderer: {why}.")
    if one_model:
        caption = caption.replace(f" · Procrustes disparity {pair.disparity:.3f}", "")
        title = title.replace(f" vs {label_b}", "")
    key = cache.digest(state.selection(), label_a, label_b, pair.rows, pair.coords_a, pair.coords_b, parts,
                       highlight, caption, title, ",".join(highlight_classes), labelled_map, one_model)
    options = dict(highlight=highlight, method=pair.params.method.upper(), caption=caption, title=title,
                   highlight_classes=highlight_classes or None, contours=labelled_map)
    fig = cache.figure(key, lambda: projection_map_figure(view, pair.rows, pair.coords_a, label_a, parts=parts, **options)
                       if one_model else projection_pair_figure(view, pair.rows, pair.coords_a, pair.coords_b,
                                                                model_a=label_a, model_b=label_b, parts=parts,
                                                                disparity=pair.disparity,
                                                                **options))
    name = (slug(pair.params.method, label_a, view.source.split()[0], f"d{view.depth}") if one_model else
            slug(pair.params.method, label_a, "vs", label_b, view.source.split()[0], f"d{view.depth}"))
    if preview:
        st.plotly_chart(fig, width="stretch", config={"displayModeBar": False})
        return
    interactive = pair.params.n_components == 2
    compare.show_figure(fig, name, fmt, lambda: projection_table(view, pair.rows, pair.coords_a, pair.coords_b,
                                                                 parts=parts),
                        key="projection_chart", rows=len(pair.rows),
                        on_select=on_select if interactive else "ignore",
                        selection_mode=("box", "lasso") if interactive else ("points",))


figure_slot = st.empty()
with figure_slot.container():
    umap_pending = params.method == "umap" and not pair_is_cached(space_a, space_a if one_model else space_b,
                                                                  view.labels, params)
    if umap_pending:
        # PCA takes a second: show it while UMAP runs, then replace it.
        preview = preview_params(params)
        rows, pca_a = cache.projection(model_a, level, preview)
        # One model: the compared layout is neither computed nor drawn.
        pca_b = pca_a if one_model else cache.projection(model_b, level, preview)[1]
        draw(align_pair(rows, pca_a, pca_b, preview), preview=True)
    # Each layout shows its own bar (its steps and the time left) while it computes.
    rows, coords_a = cache.projection(model_a, level, params, _label=f"{method_label} · {label_a}")
    coords_b = coords_a if one_model else cache.projection(model_b, level, params,
                                                           _label=f"{method_label} · {label_b}")[1]
pair = align_pair(rows, coords_a, coords_b, params)
with figure_slot.container():
    draw(pair)

highlight = st.session_state.get(SELECTED, highlight)  # the point-cloud component answers while drawing
if len(highlight):
    picked = projection_table(view, highlight, np.zeros((len(highlight), 0)), np.zeros((len(highlight), 0)),
                              parts=parts)
    head, clear = st.columns([5, 1])
    head.markdown(f"**{len(highlight):,} selected names**")
    # The point-cloud component keeps its own selection (Esc clears it there).
    in_cloud = choose_renderer(len(pair.rows))[0] == "point cloud" and params.n_components == 2
    if not in_cloud and clear.button("Clear selection"):
        st.session_state[SELECTED] = np.zeros(0, dtype=np.int64)
        st.rerun()
    st.dataframe(picked, hide_index=True, width="stretch", height=240)


def part_style(part: str) -> str:
    """A movers-table cell of the split part, tinted with the part's colour (as the arrows are)."""
    colour = part_colours().get(part)
    return f"background-color: {colour}33; color: #1f2933" if colour else ""


def show_movement() -> None:
    """What training moved: arrows for a class or the top movers, the movers table, per-part means."""
    st.subheader("What training moved")
    st.caption(f"Each name's move from its {md(label_a)} position to its aligned {md(label_b)} position, and how "
               f"many of its {DEFAULT_K} nearest names (cosine on the original vectors, among the measured names) "
               "are of its own class under each model. Split parts tell names the run trained on from held-out "
               "and zero-shot ones.")
    cols = st.columns([3, 2])
    cols[0].selectbox("Arrows for", ["", *view.classes], key="mv_class",
                      format_func=lambda c: f"{c} · {class_names[c]}" if c else "the names that moved furthest")
    cols[1].slider("Arrows (at most)", *BOUNDS["mv_n"], step=10, key="mv_n")
    moved, moved_a, moved_b = cache.movement(model_a, model_b, level, params, k=DEFAULT_K)
    chosen = st.session_state["mv_class"]
    class_index = view.classes.index(chosen) if chosen else None
    arrows = arrow_rows(moved, view.labels, class_index, int(st.session_state["mv_n"]))
    whose = f"names of {chosen} ({class_names[chosen]})" if chosen else "names that moved furthest"
    title = f"What training moved · {label_a} → {label_b} · {view.title}"
    measured = (f"{len(moved.rows):,} of the {len(pair.rows):,} names measured (a class-stratified sample)"
                if len(moved.rows) < len(pair.rows) else f"all {len(moved.rows):,} names measured")
    coloured = colour_by(parts[moved.rows] if parts is not None else np.full(len(moved.rows), "unused"), arrows)
    caption = (f"{len(arrows):,} {whose}: arrows from the {label_a} position to the aligned {label_b} position, "
               f"coloured by {coloured} · grey: the measured names under {label_b} · {measured} · "
               f"{pair.params.caption()}<br>{marks_caption}")
    key = cache.digest(state.selection(), label_a, label_b, moved.rows, moved_a, moved_b, parts, arrows, title,
                       caption)
    fig = cache.figure(key, lambda: movement_figure(view, moved, moved_a, moved_b, arrows=arrows, parts=parts,
                                                    model_a=label_a, model_b=label_b, title=title,
                                                    caption=caption))
    movers = movers_table(view, moved, parts)
    summary = part_summary(movers)
    # Column names say which model: the CSV is read away from the page.
    sides = (label_a, label_b) if label_a != label_b else (f"{label_a} (baseline)", f"{label_b} (compared)")
    names = {"precision_a": f"p@{DEFAULT_K} {sides[0]}", "precision_b": f"p@{DEFAULT_K} {sides[1]}"}
    table = movers.rename(columns=names)
    name = slug("movement", label_a, "vs", label_b, view.source.split()[0], f"d{view.depth}")
    compare.show_figure(fig, name, fmt, table, key="movement_chart")
    st.markdown(f"**Same-class precision@{DEFAULT_K} by split part** (means; zero-shot rows: classes the run never "
                "saw)")
    st.dataframe(summary.rename(columns=names).style.map(part_style, subset=["part"]).format(precision=3),
                 hide_index=True, width="stretch")
    st.markdown("**Names whose neighbourhood changed most** (change = compared − baseline precision; kept = share "
                "of nearest names both models share; moved = distance over the layout's RMS radius)")
    st.dataframe(table.head(200).style.map(part_style, subset=["part"]).format(precision=3), hide_index=True,
                 width="stretch", height=320)


if one_model:
    st.stop()  # what moved and per-class separation compare two models
# Only a run against a model it was trained from: between unrelated models nothing was trained.
trained = trained_from(model_b, model_a) or trained_from(model_a, model_b)
if not trained:
    st.caption(f"What training moved: shown when one model is a run trained from the other ({md(label_b)} was not "
               f"trained from {md(label_a)}).")
elif params.n_components == 2:
    show_movement()
else:
    st.caption("What training moved: switch to 2D to see each name's move between the two layouts.")

st.subheader("Per-class separation")
try:
    # Named by the runs' current labels (a run renamed since its vectors were cached).
    sep = replace(cache.separation(model_a, model_b, level, measure=st.session_state["measure"],
                                   max_names=5_000, seed=0),
                  model_a=label_a, model_b=label_b)
except BiovizError as error:
    st.error(md(error))
    st.stop()
mean_a, mean_b = sep.means
left, right = st.columns([3, 1])
with right:
    st.metric(f"{MEASURES[sep.measure]} · {md(label_a)}", f"{mean_a:.3f}")
    st.metric(f"{MEASURES[sep.measure]} · {md(label_b)}", f"{mean_b:.3f}", f"{mean_b - mean_a:+.3f}")
    st.caption(f"Computed on the original vectors (not the 2-D layout) of a class-stratified sample of "
               f"{sep.sample_size:,} names: each ranks the other sampled names by cosine; AP of finding its own "
               "class, averaged per class. Not the class-retrieval mAP of the Train and Evaluation pages, where "
               "held-out test names rank the training names.")
with left:
    compare.show_figure(separation_figure(sep, view.title), slug("separation", sep.measure, label_a,
                        "vs", label_b, view.source.split()[0], f"d{view.depth}"), fmt,
                        pd.DataFrame(sep.table).round(4), key="separation_chart")
