"""Hierarchy: the subtree down to the level's classes, coloured by how much the compared model
groups each branch better than the baseline; a node's names, neighbours and hypernym ranking."""

from __future__ import annotations

import numpy as np
import pandas as pd
import streamlit as st

from bioviz.models.runs import model_labels
from bioviz.errors import BiovizError
from bioviz.figures import hierarchy_figure, hypernym_ranking_figure, slug
from bioviz.figures.hierarchy import KINDS
from bioviz.views.hierarchy import (MAX_DRAWN_NODES, MAX_LISTED_NAMES, MAX_MENTIONS, MAX_NODE_OPTIONS, drawn_part,
                                    hypernym_candidates, hypernym_ranking, largest_gain_node, nearest, node_scores,
                                    search_nodes)
from bioviz.views.separation import separation_so_far
from bioviz.ontology import DEFAULT_SPLIT
from ui import cache, compare, progressive, state
from ui.markdown import md

view = state.current_view()
model_a, model_b = state.chosen_models()
fmt = compare.image_format()

COLOURS = {"map": "within-sample mAP gain", "silhouette": "silhouette gain", "none": "depth (no scores)"}
DEFAULTS = {"kind": "treemap", "colour": "map", "levels": 3, "node": "", "mention": ""}
# "levels" is clamped again to the tree's depth once the tree is known.
state.page_params(DEFAULTS, choices={"kind": list(KINDS), "colour": list(COLOURS)}, bounds={"levels": (1, 100)})

st.title("Hierarchy")
st.caption("The ontology under the root down to the level's classes. Size = names under a node; colour = how much "
           "better the compared model groups the node's names than the baseline (red = better, blue = worse). "
           "Click a box to zoom in the drawing; click a row of the node table (or find a node) to see its names, "
           "neighbours and hypernym ranking.")

if view is None:
    st.stop()
level = state.selection()
try:
    tree = cache.level_tree(level)
except BiovizError as error:
    state.sync_url(**compare.url_values(DEFAULTS))
    st.error(md(error))
    st.stop()
node_ids = list(tree.nodes["id"])
labels = dict(zip(tree.nodes["id"], tree.nodes["label"]))
# Scored before the widgets: the default node is the class the compared model improved most.
SEPARATION_NAMES = 5_000  # both measures compare every pair of names: a class-stratified sample of the level
models = [m for m in (model_a, model_b) if m]


@st.fragment(run_every=progressive.REFRESH_S)
def tree_so_far() -> None:
    """The encoding's bar and the tree coloured by the gains on the names both models have encoded so far,
    redrawn every couple of seconds; then the whole page once more, for the usual view and its details."""
    running = progressive.still_encoding(models, level)  # none left: the page reruns into the usual view
    if running is None:
        return
    for job in running.values():
        progressive.encoding_bar(job)
    label_a, label_b = (model_labels([model])[0] for model in (model_a, model_b))
    partial_a, partial_b = (progressive.partial_vectors(model, level) for model in (model_a, model_b))
    measure = st.session_state["colour"]
    sep = None if measure == "none" else separation_so_far(
        partial_a, partial_b, view.labels, classes=view.classes, class_labels=view.class_labels,
        model_ids=(label_a, label_b), measure=measure, max_names=SEPARATION_NAMES, seed=0)
    done, total = min(partial_a.done, partial_b.done), partial_a.total
    st.info(f"**partial: {done:,} of {total:,} names encoded under both models, refining**: the colours are the "
            f"gains on {sep.sample_size if sep else 0:,} of them (a class-stratified sample), redrawn as the encoding "
            "goes on; the node's names, neighbours and hypernym ranking follow when every name is encoded.",
            icon=":material/hourglass_top:")
    values = node_scores(tree, sep.table["gain"].to_numpy(), view.class_sizes()) if sep is not None else None
    levels = int(min(max(1, st.session_state["levels"]), int(tree.nodes["depth"].max()) + 1))
    part = drawn_part(tree, tree.root, levels)
    caption = (f"{len(tree)} nodes · size = names · colour = "
               + (f"{COLOURS[measure]} ({label_b} − {label_a}, on the {sep.sample_size:,} names encoded so far)"
                  if sep is not None else "depth (no scores yet)"))
    fig = hierarchy_figure(part.tree, values[part.rows] if values is not None else None,
                           kind=st.session_state["kind"], title=f"Hierarchy · {label_b} vs {label_a} · {view.title}",
                           caption=caption, value_label=COLOURS[measure] if sep is not None else "gain",
                           max_depth=levels)
    st.plotly_chart(fig, width="stretch", config={"displayModeBar": False}, key="hierarchy_so_far")


# A level with many names still to encode (by the warm-up, another page or a job) is drawn at once,
# coloured by what is encoded so far (ui.progressive), instead of behind a bar alone.
progressive.answer_while_encoding(models, level, tree_so_far)
try:
    cache.prepare_vectors((model_a, model_b), level)  # a first encoding: its estimate, then a bar with the time left
    space_a = cache.view_space(model_a, level)
    space_b = cache.view_space(model_b, level)
    # read afresh (a renamed run is titled by its new name); one at a time: the page tells two equal ones apart itself
    label_a, label_b = (model_labels([model])[0] for model in (model_a, model_b))
    values, sep = None, None
    if st.session_state["colour"] != "none":
        sample = min(SEPARATION_NAMES, len(view.names))
        with st.spinner(f"Scoring each class under both models ({COLOURS[st.session_state['colour']]} on a "
                        f"{sample:,}-name sample)…"):
            sep = cache.separation(model_a, model_b, level, measure=st.session_state["colour"],
                                   max_names=SEPARATION_NAMES, seed=0)
        values = node_scores(tree, sep.table["gain"].to_numpy(), view.class_sizes())
except BiovizError as error:
    st.error(md(error))
    st.stop()
if st.session_state["node"] not in labels:
    st.session_state["node"] = largest_gain_node(tree, values)

cols = st.columns([1.4, 1.3, 1, 2.3])
cols[0].radio("Drawing", list(KINDS), key="kind", horizontal=True)
cols[1].selectbox("Colour", list(COLOURS), key="colour", format_func=COLOURS.get)
max_levels = int(tree.nodes["depth"].max()) + 1  # the root's level included
st.session_state["levels"] = int(min(max(1, st.session_state["levels"]), max_levels))
cols[2].slider("Levels at once", 1, max(2, max_levels), key="levels")
with cols[3]:
    query = st.text_input("Find a node (id or name)", key="_find", placeholder="e.g. neoplasm, HP:0001626")
    hits = search_nodes(tree, query) if query.strip() else []
    if query.strip() and not hits:
        st.caption("No node matches.")
    if hits and st.session_state["node"] not in hits:
        st.session_state["node"] = hits[0]
    # A deep level's tree has tens of thousands of nodes: the picker offers the first ones (the
    # shallowest: parents come before children) and "Find a node" reaches the others.
    options = hits or node_ids[:MAX_NODE_OPTIONS]
    if st.session_state["node"] not in options:
        options = [st.session_state["node"], *options]
    st.selectbox("Node", options, key="node", format_func=lambda n: f"{n} · {labels[n]}")


def on_row() -> None:
    """A row picked in the node table becomes the selected node.

    (Streamlit reports no selection events for treemap/icicle/sunburst clicks, which
    plotly uses for zooming; the table is the click target.)
    """
    event = st.session_state.get("node_table")
    rows = event.selection.rows if event else []
    shown = st.session_state.get("_node_table_ids", node_ids)  # the table lists the drawn nodes
    if rows and rows[0] < len(shown):
        st.session_state["node"] = shown[rows[0]]
        st.session_state["_find"] = ""


state.sync_url(**compare.url_values(["kind", "colour", "levels", "node"]))


node = st.session_state["node"]
value_label = COLOURS[st.session_state["colour"]] if values is not None else "gain"
title = f"Hierarchy · {label_b} vs {label_a} · {view.title}"
caption = (f"{len(tree)} nodes · size = names · colour = {COLOURS[st.session_state['colour']]}"
           + (f" ({label_b} − {label_a}, {sep.sample_size:,}-name sample)" if sep else "")
           + " · concepts with several parents drawn under the first")
part = drawn_part(tree, node, int(st.session_state["levels"]))
if part.cut:
    caption += f" · {len(part.tree):,} of {len(tree):,} nodes drawn"
drawn_values = values[part.rows] if values is not None else None
fig = hierarchy_figure(part.tree, drawn_values, kind=st.session_state["kind"], title=title, caption=caption,
                       value_label=value_label,
                       focus=node if node != tree.root else None, max_depth=int(st.session_state["levels"]))
frame = part.tree.nodes.assign(value=drawn_values if drawn_values is not None else np.nan)
st.session_state["_node_table_ids"] = list(frame["id"])
if part.cut:
    st.caption(f"The tree has {len(tree):,} nodes, more than a drawing holds and stays responsive "
               f"({MAX_DRAWN_NODES:,}): drawn are the path to **{md(labels[part.opened])}** and {part.levels} levels "
               "from it. Open a node in the table or find one to draw its part of the tree.")
figure_col, table_col = st.columns([3, 1])
with figure_col:
    # The CSV holds every node of the tree, drawn or not; built only when asked for.
    compare.show_figure(fig, slug("hierarchy", label_a, "vs", label_b, view.source.split()[0], f"d{view.depth}"),
                        fmt, lambda: tree.nodes.assign(value=values if values is not None else np.nan),
                        key="hierarchy_chart", rows=len(tree))
with table_col:
    st.markdown("**Nodes** (click a row to open it)")
    st.dataframe(frame[["id", "label", "names", "value"]].rename(columns={"value": "gain"}).round(3),
                 hide_index=True, width="stretch", height=560, key="node_table", on_select=on_row,
                 selection_mode="single-row")

# --- Node details ------------------------------------------------------------------------
row = tree.nodes.set_index("id").loc[node]
st.subheader(f"{md(labels[node])} ({md(node)})")
class_rows = tree.class_rows(node)
name_rows = np.flatnonzero(np.isin(view.labels, class_rows))
gain = values[node_ids.index(node)] if values is not None else np.nan
st.caption(f"{int(row['names']):,} names in {int(row['classes'])} classes · depth {int(row['depth'])}"
           + (f" · {value_label} {gain:+.3f}" if np.isfinite(gain) else ""))

# Column and panel names: the models' ids, told apart when both sides show the same model.
model_names = ((label_a, label_b) if label_a != label_b
               else (f"{label_a} (baseline)", f"{label_b} (compared)"))
names_col, near_col = st.columns([1, 2])
with names_col:
    st.markdown("**Names under this node**")
    listed = name_rows[:MAX_LISTED_NAMES]  # a table of every name under the root would stall the browser
    names = pd.DataFrame({"name": [view.names[r] for r in listed],
                          "concept": [view.name_concepts[r] for r in listed],
                          "class": [view.classes[view.labels[r]] for r in listed]})
    st.dataframe(names, hide_index=True, width="stretch", height=300)
    if len(name_rows) > len(listed):
        st.caption(f"The first {len(listed):,} of {len(name_rows):,} names (in the level's order); open a "
                   "node further down to list its names.")
with near_col:
    st.markdown(f"**Nearest names to “{md(labels[node])}”** (✓ = under this node)")
    under = set(name_rows.tolist())
    near_tables = []
    for space, model, name in ((space_a, model_a, model_names[0]), (space_b, model_b, model_names[1])):
        query_vec = cache.term_space(model, (labels[node],)).vectors[0]
        rows, scores = nearest(space.vectors, query_vec, k=10)
        near_tables.append(pd.DataFrame({
            name: [("✓ " if r in under else "") + view.names[r] for r in rows],
            f"cosine ({name})": np.round(scores, 3),
        }))
    st.dataframe(pd.concat(near_tables, axis=1), hide_index=True, width="stretch", height=300)

st.subheader("Hypernym ranking")
st.caption("All class names of the level (the class concepts' own names) ranked by cosine to a mention; the "
           "correct hypernyms (names of the mention's class) are highlighted (higher-level-semantics Table 6).")
if not len(name_rows):
    st.info("No names under this node.")
    st.stop()
split = DEFAULT_SPLIT.make(view)
# At most MAX_MENTIONS options: a deep level holds a test name per class, tens of thousands under the root.
test_rows = [r for r in split.test.tolist() if r in under][:MAX_MENTIONS]
mention_options = list(dict.fromkeys(view.names[r] for r in (test_rows or name_rows[:1].tolist())))
mention_options = list(dict.fromkeys([*mention_options, *(view.names[r] for r in name_rows[:MAX_MENTIONS])]))
mention_options = mention_options[:MAX_MENTIONS]
if st.session_state["mention"] not in mention_options:
    st.session_state["mention"] = mention_options[0]
st.selectbox("Mention (held-out test names of this node first)", mention_options, key="mention")
state.sync_url(**compare.url_values(["kind", "colour", "levels", "node", "mention"]))
mention_row = next(r for r in name_rows if view.names[r] == st.session_state["mention"])
true_class = int(view.labels[mention_row])
try:
    hyp_names, hyp_classes = hypernym_candidates(view)
    rankings = {}
    for space, model, name in ((space_a, model_a, model_names[0]), (space_b, model_b, model_names[1])):
        hyp_vectors = cache.term_space(model, tuple(hyp_names)).vectors
        rankings[name] = hypernym_ranking(space.vectors[mention_row], hyp_vectors, hypernym_names=hyp_names,
                                          hypernym_classes=hyp_classes, true_class=true_class, view=view, k=10)
except BiovizError as error:
    st.error(md(error))
    st.stop()
ranking_fig = hypernym_ranking_figure(rankings, st.session_state["mention"], view.class_labels[true_class],
                                      f"Hypernym ranking · {label_a} vs {label_b} · {view.title}")
table = pd.concat([frame.assign(model=model) for model, frame in rankings.items()], ignore_index=True)
compare.show_figure(ranking_fig, slug("hypernyms", label_a, "vs", label_b, view.source.split()[0],
                                      f"d{view.depth}"), fmt, table, key="hypernym_chart")
