"""Home: choose an ontology and a concept level, and see what it holds."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from bioviz.csv_export import frame_to_csv
from bioviz.errors import BiovizError
from bioviz.figures import class_size_bar, export_config
from bioviz.ontology import DEFAULT_SPLIT, SplitSpec
from bioviz.ontology.levels import source_title
from bioviz.uploads import MAX_UPLOAD_BYTES, check_upload_size, store_upload
from ui import cache, state
from ui.markdown import md
from ui.metric_row import metric_row
from ui.vectors_upload import vectors_expander


def use_upload() -> None:
    """Store an uploaded ontology and select it (a callback: the sidebar's source widget exists already)."""
    upload = st.session_state.get("_home_upload")
    if upload is None:
        return
    try:
        check_upload_size(upload.name, upload.size)  # a scripted upload skips the browser's check
        stored = store_upload(upload.name, upload.getvalue(), keep=state.uploads_in_use())
        state.remember_upload(stored)
        state.choose_source(str(stored))
        st.session_state["_home_upload_note"] = ("success", f"Loaded {upload.name}: selected as the source.")
    except BiovizError as error:
        st.session_state["_home_upload_note"] = ("error", str(error))


def split_caption(split, classes: int, names: int) -> str:
    """What the split preview's numbers mean (a test count equal to the class count looks like a mistake)."""
    sizes = split.sizes()
    used = sum(sizes[part] for part in ("train", "validation", "test", "zero_shot"))
    return (f"Per class: {split.shots} training and {split.shots} validation names, and {split.test_per_class} "
            f"held-out test name{'s' if split.test_per_class != 1 else ''} (as in the papers), so {sizes['test']:,} "
            f"test names for {classes:,} classes. The other {names - used:,} names are in no part: "
            "not trained on, still shown in every view.")


def use_server_path() -> None:
    """Select the typed server path (the path policy is checked when the view loads: one message for any refusal)."""
    state.choose_source(st.session_state["server_path"].strip())


def level_words(view, ontology) -> str:
    """The level in plain words: which concepts are its classes (the root by its name, not its id)."""
    root = ontology.concepts.get(view.root)
    # the whole ontology's root is named like the source itself: "ICD-10 · classes under “ICD-10”" says nothing
    plain = (root.name if root is not None else "").lower().replace("-", "")
    top = not plain or plain in source_title(view.source).lower().replace("-", "")
    under = "the whole ontology" if top else f"“{root.name}”"
    if view.mode == "synonyms":
        return f"synonym sets under {under}"
    if top:
        return f"{len(view.classes):,} classes, its {'top-level groups' if view.depth == 1 else f'groups {view.depth} levels down'}"
    where = "directly under" if view.depth == 1 else f"{view.depth} levels under"
    return f"{len(view.classes):,} classes, the concepts {where} {under}"


# What a first-time visitor does next: each page works on the level the sidebar selects.
NEXT_STEPS = (
    ("app_pages/4_Neighbours.py", "Neighbours", ":material/search:",
     "Type a term or a code and see its nearest names under one or two models."),
    ("app_pages/1_Train.py", "Train", ":material/model_training:",
     "Train a few-shot encoder on this level, as a background job."),
    ("app_pages/2_Projection.py", "Projection", ":material/scatter_plot:",
     "See the level's names on a map, coloured by class, baseline beside a trained run."),
)

# The classes table's columns as a reader names them (the CSV keeps the field names).
CLASS_COLUMNS = {"class": "Code", "label": "Class", "names": "Names", "hypernym_names": "Class names"}

# The split preview's rows: Split.sizes() key -> what the row counts.
SPLIT_ROWS = {"train": "training names", "validation": "validation names", "test": "test names",
              "zero_shot": "zero-shot names", "zero_shot_classes": "zero-shot classes",
              "short_classes": "classes short of names"}

st.title("bioviz")
st.caption("Explore and train representations of biomedical names: pick an ontology and a concept level, "
           "train few-shot encoders, and compare baseline and trained embeddings.")
st.markdown("**Start here:** pick an ontology and a level in the sidebar (ICD-10 chapters to begin with); "
            "every page works on that level. Then open:")
for column, (script, title, icon, what) in zip(st.columns(len(NEXT_STEPS)), NEXT_STEPS):
    with column:
        st.page_link(script, label=title, icon=icon)
        st.caption(what)

with st.expander("Use your own ontology (OBO file, table, or UMLS release)"):
    left, right = st.columns(2)
    with left:
        st.file_uploader(
            "OBO file or concept table (.obo, .tsv, .csv)", type=["obo", "tsv", "csv"], key="_home_upload",
            on_change=use_upload, max_upload_size=MAX_UPLOAD_BYTES // 2**20,  # the browser refuses a larger file
            help=f"Tables need columns concept_id, name, parent_id[, definition][, synonyms]. "
                 f"At most {MAX_UPLOAD_BYTES // 2**20} MiB.",
        )
        if note := st.session_state.pop("_home_upload_note", None):
            (st.success if note[0] == "success" else st.error)(md(note[1]))
    with right:
        server_path = st.text_input("…or a path on this server (an .obo, a table, or a UMLS META directory)",
                                    placeholder="/data/umls/2024AA/META", key="server_path",
                                    help="Inside a data folder this server shares (BIOVIZ_DATA_DIRS); a relative "
                                         "path is read inside them.")
        st.button("Use this path", key="use_path", disabled=not server_path.strip(), on_click=use_server_path)
        st.caption("For a UMLS directory, the sidebar then offers the vocabulary (SAB), an optional semantic "
                   "group and the IS-A relations (PAR/CHD or RELA = isa).")

vectors_expander()

view = state.current_view()
state.sync_url()
if view is None:
    st.stop()

stats = view.stats()
per_class = stats["names_per_class"]
st.subheader(f"{md(source_title(view.source))} · {md(level_words(view, cache.level_ontology(state.selection())))}",
             help=f"The level as other pages' titles name it: {view.title}")
# Plain words on the tiles; the technical term is in the help.
metric_row([("Classes", stats["classes"]), ("Names", stats["names"]),
            ("Class names", stats["hypernym_names"],
             {"help": "Hypernym names: the class concepts' own names and synonyms, ranked in the hypernym task"}),
            ("Names in 2+ classes", stats["ambiguous_dropped"],
             {"help": "Ambiguous names dropped: a name found under two or more classes is left out of the level "
                      "(the sidebar can keep them)"}),
            ("Class sizes", f"{per_class['min']:,}–{per_class['max']:,}",
             {"help": "Names in the smallest and in the largest class"}),
            ("Mean size", f"{per_class['mean']:,.0f} ± {per_class['stdev']:,.0f}",
             {"help": "Mean ± standard deviation of the names per class"})])
notes = []
if stats["removed_cycles"]:
    notes.append(f"{stats['removed_cycles']} cyclic edges removed")
if stats["removed_shortcuts"]:
    notes.append(f"{stats['removed_shortcuts']} shortcut edges removed")
if stats["empty_classes"]:
    notes.append(f"{stats['empty_classes']} dead-end concepts at this level left out")
if notes:
    st.caption(" · ".join(notes))

fig = class_size_bar(view)
st.plotly_chart(fig, width="stretch", config=export_config(f"class-sizes-{stats['source'].split()[0]}-d{view.depth}"))

table, split_col = st.columns([3, 2])
with table:
    st.markdown("**Classes**")
    frame = pd.DataFrame(view.class_table())
    # Narrow widths the grid spreads over its frame: a long class name is cut in its cell, never
    # pushing the count columns out of sight (the table scrolled sideways at 1440 px).
    st.dataframe(frame.rename(columns=CLASS_COLUMNS).style.format(thousands=","), hide_index=True, width="stretch",
                 height=320, column_config={
                     "Code": st.column_config.TextColumn(width=60), "Class": st.column_config.TextColumn(width=240),
                     "Names": st.column_config.NumberColumn(width=70),
                     "Class names": st.column_config.NumberColumn(
                         width=90, help="Hypernym names: the class concept's own names and synonyms")})
    st.download_button("Download classes (CSV)", frame_to_csv(frame), "classes.csv", "text/csv")
with split_col:
    st.markdown("**Few-shot split preview**")
    shots = st.number_input("Shots per class", min_value=1, max_value=500, value=DEFAULT_SPLIT.shots,
                            help="Training names per class (few-shot: a handful of examples per class); as many "
                                 "again are kept for validation")
    seed = st.number_input("Split seed", min_value=0, value=DEFAULT_SPLIT.seed,
                           help="Which names are drawn: the same seed gives the same split")
    try:
        split = SplitSpec(shots=int(shots), seed=int(seed)).make(view)
        sizes = split.sizes()
        st.dataframe(pd.DataFrame({"count": [sizes[key] for key in SPLIT_ROWS]},
                                  index=list(SPLIT_ROWS.values())).style.format("{:,}"), width="stretch")
        st.caption(split_caption(split, len(view.classes), len(view.names)))
        if split.short_classes:
            count = len(split.short_classes)
            st.warning(f"{count:,} class{'es have' if count != 1 else ' has'} fewer than {1 + 2 * int(shots)} names "
                       "(1 test + shots train + shots validation); they get what they have.")
    except BiovizError as error:
        st.error(md(error))
    if view.ambiguous:
        with st.expander(f"{len(view.ambiguous):,} names in two or more classes"
                         f"{' (dropped)' if view.ambiguous_dropped else ' (kept)'}"):
            st.markdown(md(", ".join(view.ambiguous[:300])) + (" …" if len(view.ambiguous) > 300 else ""))
