"""Similarity matrix: cosine similarities of a term list under two models, and what changed."""

from __future__ import annotations

import streamlit as st

from bioviz.models.runs import model_labels
from bioviz.errors import BiovizError
from bioviz.figures import similarity_figures, slug
from bioviz.views.similarity import (MAX_CLASS_OPTIONS, ORDERS, class_terms, compare_terms, concept_family_terms,
                                     covered_term_list,
                                     example_sets, find_classes, find_concept, load_example, parse_terms,
                                     with_class_groups)
from ui import cache, compare, state
from ui.markdown import md

view = state.current_view()
model_a, model_b = state.chosen_models()
fmt = compare.image_format()

SOURCES = {"example": "Example set", "typed": "Typed or pasted", "class": "Names of a class",
           "concept": "A concept, its synonyms and siblings"}
EXAMPLES = list(example_sets())
DEFAULTS = {"from": "example", "example": "biolord_appendix_b" if "biolord_appendix_b" in EXAMPLES else EXAMPLES[0],
            "terms": "heart attack\nmyocardial infarction\natrial fibrillation\nfracture of femur\nbroken hip",
            "cls": "", "limit": 20, "concept": "", "order": "given", "colour": "list"}
BOUNDS = {"limit": (2, 60)}  # the slider's bounds, also those of a link's value
state.page_params(DEFAULTS, choices={"from": list(SOURCES), "example": EXAMPLES, "order": list(ORDERS),
                                       "colour": ["list", "class"]}, bounds=BOUNDS)

st.title("Similarity matrix")
st.caption("Cosine similarity of every pair of terms under the baseline and the compared model, on one shared "
           "colour scale, and their difference. BioLORD's Appendix B list is the default example.")

left, right = st.columns([1, 2])
with left:
    st.radio("Terms from", list(SOURCES), key="from", format_func=SOURCES.get)
    st.radio("Order", list(ORDERS), key="order", horizontal=True,
             format_func={"given": "as listed", "group": "by group / class", "cluster": "hierarchical clustering"}.get,
             help="Clustering: average linkage on the compared model's similarities (scipy), optimal leaf order")
    st.radio("Colour rows by", ["list", "class"], key="colour", horizontal=True,
             format_func={"list": "the list's groups", "class": "class in this level"}.get)
with right:
    source = st.session_state["from"]
    if source == "example":
        st.selectbox("Example set", EXAMPLES, key="example", format_func=lambda n: n.replace("_", " "))
    elif source == "typed":
        st.text_area("Terms, one per line (a blank line starts a new group)", key="terms", height=180)
    elif source == "class" and view is not None:
        class_label = dict(zip(view.classes, view.class_labels))  # not classes.index per option: n² on 50k classes
        if st.session_state["cls"] not in class_label:
            st.session_state["cls"] = view.classes[0]
        options = view.classes
        if len(view.classes) > MAX_CLASS_OPTIONS:
            # Too many to send to the browser as one list: a search narrows them on the server.
            found = st.text_input("Find a class (id or name)", key="_cls_find", placeholder="e.g. neoplasm")
            options = find_classes(view, found)
            st.caption(f"{len(view.classes):,} classes: the list shows {len(options):,} "
                       f"{'matching' if found.strip() else 'first'} ones (at most {MAX_CLASS_OPTIONS:,}); "
                       "type to find others.")
            if found.strip() and options and st.session_state["cls"] not in options:
                st.session_state["cls"] = options[0]  # a search opens its first match
            if st.session_state["cls"] not in options:
                options = [st.session_state["cls"], *options]
        st.selectbox("Class", options, key="cls", format_func=lambda c: f"{c} · {class_label[c]}")
        st.slider("Names (a seeded sample when the class has more)", *BOUNDS["limit"], key="limit")
    elif source == "concept":
        st.text_input("Concept id or name", key="concept", placeholder="e.g. I21 or myocardial infarction")
URL_KEYS = {"example": ["example"], "typed": ["terms"], "class": ["cls", "limit"], "concept": ["concept"]}
state.sync_url(**compare.url_values(["from", "order", "colour", *URL_KEYS[source]]))

if view is None:
    st.stop()
level = state.selection()
try:
    if source == "example":
        terms = load_example(st.session_state["example"])
    elif source == "typed":
        terms = parse_terms(st.session_state["terms"])
    elif source == "class":
        terms = class_terms(view, st.session_state["cls"], int(st.session_state["limit"]))
    else:
        onto = cache.level_ontology(level)
        wanted = st.session_state["concept"].strip()
        if not wanted:
            st.info("Type a concept id or name to compare its names with its siblings'.")
            st.stop()
        terms = concept_family_terms(onto, find_concept(onto, wanted))
    if st.session_state["colour"] == "class":
        terms = with_class_groups(terms, view)
    terms, coverage = covered_term_list(terms, (model_a, model_b))  # a vectors file: only the terms it holds
    for found in coverage:
        if found.missing:
            st.info(md(f"Vectors file {found.label}: {found.message('terms')}."))
    space_a = cache.term_space(model_a, terms.terms)
    space_b = cache.term_space(model_b, terms.terms)
    # read afresh (a renamed run is titled by its new name); one at a time: the page tells two equal ones apart itself
    label_a, label_b = (model_labels([model])[0] for model in (model_a, model_b))
    comparison = compare_terms(terms, space_a.vectors, space_b.vectors, model_a=label_a, model_b=label_b,
                               order=st.session_state["order"])
except BiovizError as error:
    st.error(md(error))
    st.stop()

by_class = st.session_state["colour"] == "class"
colour_order = view.classes if by_class else None
# The level is part of what is shown when the terms come from it or are coloured by its classes.
subtitle = f"{terms.origin} · {view.title}" if source == "class" or by_class else terms.origin
# Class squares get a legend naming each class (the list's own groups are already names).
group_labels = dict(zip(view.classes, view.class_labels)) if by_class else None
figures = similarity_figures(comparison, subtitle=subtitle, colour_order=colour_order, group_labels=group_labels)
table = comparison.long_table()
base = slug("similarity", label_a, "vs", label_b, terms.origin)
if st.session_state["colour"] == "class":
    missing = sum(1 for g in terms.groups if not g)
    if missing:
        st.caption(f"{missing} of {len(terms)} terms are not names of {md(view.title)}: shown without a class colour.")

compare.show_figure(figures["pair"], base, fmt, table, key="sim_pair")
compare.show_figure(figures["difference"], f"{base}-difference", fmt, key="sim_diff")
st.markdown(f"**Largest changes** ({md(label_b)} − {md(label_a)})")
changes = table.reindex(table["difference"].abs().sort_values(ascending=False).index).head(15)
st.dataframe(changes[["term_1", "term_2", "similarity_a", "similarity_b", "difference"]], hide_index=True,
             width="stretch")
