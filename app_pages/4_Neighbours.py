"""Neighbours: the nearest names of a query under two models, side by side."""

from __future__ import annotations

import numpy as np
import pandas as pd
import streamlit as st

from bioviz.csv_export import frame_to_csv
from bioviz.errors import BiovizError
from bioviz.figures import export_config_as
from bioviz.figures.neighbours import SAME_CLASS, SAME_CONCEPT, neighbour_table_figure, row_colour
from bioviz.figures.ranking_table import neighbours_file_stem, partial_ranking_table, ranking_table
from bioviz.models.runs import model_labels
from bioviz.models.vector_cache import VectorCache
from bioviz.models.vectors_coverage import vectors_models
from bioviz.search.neighbours import (AMONG, comparison_rows, concept_card, first_encoding_estimate, rank_neighbours,
                                      resolve_query)
from bioviz.ontology import DEFAULT_SPLIT
from bioviz.search.hybrid import DEFAULT_RANKING, RANKING_KINDS, ExpandedForms, ranking_of
from bioviz.search.lexicon import DEFAULT_EXPANSION, expand_queries, expansion_of, load_lexicon
from bioviz.search.vocabulary_vectors import with_similar_terms
from bioviz.search.progressive import partial_neighbours, with_rank_changes
from ui import cache, clinical_vocabulary, progressive, state
from ui.markdown import md, md_code

SEARCH_MATCHES = 50  # ontology names suggested for a typed query on large levels

view = state.current_view()
model_a, model_b = state.chosen_models()  # model_b is None when the sidebar's "Compare two models" is off
two = model_b is not None
# Page keys: from the URL (a shared link reopens the comparison), else as last used on this
# page (Streamlit drops widget keys on a visit to another page), else the default.
URL_NAMES = {"nb_query": "query", "nb_among": "among", "nb_k": "k", "nb_restrict": "restrict", "nb_image": "image",
             "nb_ranking": "ranking", "nb_expand": "expand"}

AMONG_LABELS = {"names": "all names of the level", "train": f"training names ({DEFAULT_SPLIT.shots}-shot split, seed {DEFAULT_SPLIT.seed})",
                "hypernyms": "class names (hypernyms)"}
MAX_K = 100
state.page_params({"nb_query": None, "nb_among": "names", "nb_k": 10, "nb_restrict": False, "nb_image": "png",
                   "nb_ranking": DEFAULT_RANKING.kind, "nb_expand": True},
                    casts={"nb_query": lambda v: v or None, "nb_restrict": lambda v: v == "1",
                           "nb_expand": lambda v: v != "0"},
                    choices={"nb_among": list(AMONG), "nb_image": ["png", "svg"], "nb_ranking": list(RANKING_KINDS)},
                    url_names=URL_NAMES,
                    bounds={"nb_k": (1, MAX_K)})

st.title("Neighbours")
st.caption("The nearest names of a term among the names of the chosen level, for two models side by side. "
           "Names in the query's synonym set or class are highlighted, as in the papers' ranking tables.")

with st.sidebar.expander("Embedding cache"):
    vector_cache = VectorCache()
    cached = vector_cache.summary()  # stored counts: a few rows, whatever the cache's size
    st.caption(f"{cached['vectors']:,} vectors of {cached['models']} models, {cached['bytes'] / 2**20:.1f} MiB on disk")
    if st.button("Clear cached vectors", help="Vectors are encoded again the next time they are needed"):
        # Only the disk copy goes: indexes already in memory stay valid (same fingerprints),
        # so the page does not re-encode the level at once.
        deleted = vector_cache.clear()
        st.toast(f"Embedding cache cleared ({deleted:,} vectors)")


def sync_url(query: str | None) -> None:
    """Mirror the page's controls in the URL (the concept and image format where they are shown), and keep them."""
    state.keep(URL_NAMES)
    state.sync_url(k=str(st.session_state["nb_k"]), two="1" if two else "0", among=st.session_state["nb_among"],
                   restrict="1" if st.session_state["nb_restrict"] else "0", image=st.session_state["nb_image"],
                   ranking=st.session_state["nb_ranking"], expand="1" if st.session_state["nb_expand"] else "0")
    state.set_url_param("query", query)


if view is None:
    sync_url(st.session_state["nb_query"])
    st.stop()

s = st.session_state
level = state.selection()
ontology = cache.level_ontology(level)
try:
    held_out = cache.held_out_names(level)
except BiovizError:  # a level too small to split still has neighbours to browse
    held_out = []
clinical_vocabulary.synonyms_sidebar(level)  # the user's own synonyms for this source, read with the vocabulary


def pick_random() -> None:
    """Put a random held-out test name in the query box."""
    counter = st.session_state.get("_nb_random", 0) + 1
    st.session_state["_nb_random"] = counter
    if held_out:
        st.session_state["nb_query"] = held_out[int(np.random.default_rng(counter).integers(len(held_out)))]


def use_match() -> None:
    """Make the picked ontology name the query."""
    st.session_state["nb_query"] = st.session_state["_nb_match"]
    st.session_state["_nb_match"] = None


query_col, random_col, k_col = st.columns([6, 2, 1], vertical_alignment="bottom")
if len(view.names) <= cache.MAX_BROWSER_NAMES:
    # Small enough to hand every name to the browser, which filters them as one types.
    names = sorted(set(view.names))
    if s["nb_query"] and s["nb_query"] not in names:
        names = [s["nb_query"], *names]
    query = query_col.selectbox(
        "Query: an ontology name (type to search) or any text", names, key="nb_query",
        accept_new_options=True, placeholder="e.g. urinary hesitancy",
        help="Type to filter the level's names; press Enter to use free text that is not in the list.",
    )
else:
    # Too many names for the browser: the typed text is the query (free text works as is),
    # and the server's name search suggests the ontology names that match it.
    query = query_col.text_input(
        "Query: any text (press Enter); matching ontology names are suggested below", key="nb_query",
        placeholder="e.g. urinary hesitancy, hesit urin, or a code such as R39.11",
        help=f"The level has {len(view.names):,} names: words may be beginnings of words, in any order.",
    ) or None
random_col.button("Random held-out name", on_click=pick_random, disabled=not held_out,
                  help=f"A held-out test name of the default few-shot split (seed {DEFAULT_SPLIT.seed})")
k = int(k_col.number_input("k", min_value=1, max_value=MAX_K, step=1, key="nb_k"))
if query and len(view.names) > cache.MAX_BROWSER_NAMES:
    search = cache.name_search(level)
    matches = [m for m in search.search(query, limit=SEARCH_MATCHES) if m != query]
    st.columns([6, 3])[0].selectbox(
        "Ontology names matching the query", matches, index=None, key="_nb_match", on_change=use_match,
        format_func=lambda name: f"{name} · {search.concept_of(name)}",
        placeholder=f"{len(matches)} matching names: pick one to use it" if matches else "no matching names",
        disabled=not matches,
    )
among_col, ranking_col, expand_col = st.columns([3, 2, 1], vertical_alignment="bottom")
among = among_col.radio("Rank among", AMONG, format_func=AMONG_LABELS.get, key="nb_among", horizontal=True,
                        help="Training names reproduce the few-shot paper's Table 4; class names the hypernym "
                             "rankings of the higher-level semantics paper (Table 6)")
ranking = ranking_of(ranking_col.radio(
    "Ranking", list(RANKING_KINDS), key="nb_ranking", horizontal=True, format_func=lambda kind: ranking_of(kind).label,
    help="dense: the model's cosine. hybrid: the names of a concept one of whose names equals the query but for "
         "case, spacing and punctuation first, then cosine + weight × character n-gram TF-IDF cosine (BioSyn's "
         f"scoring; weight and default chosen on the coding dev files). Default: {DEFAULT_RANKING.kind}."))
expansion = expansion_of(expand_col.toggle(
    "Expand synonyms", key="nb_expand",
    help="A query that is an ontology synonym (HPO synonyms, ICD-10-CM inclusion terms) is also ranked as its "
         "concept's preferred name, each name keeping its best score: 'heart attack' as 'Myocardial infarction'. "
         f"Dictionary lookup, not the model (scopes {', '.join(DEFAULT_EXPANSION.scopes)}; default on). The clinical "
         "vocabulary (ICD-10-CM inclusion terms, HPO lay and abbreviation synonyms, common clinical abbreviations, "
         "your synonyms file in the sidebar) also puts the concept an abbreviation or lay phrase names first: "
         "'DVT' → deep vein thrombosis."))
# An exact code (R39.11, r3911) or an exact name in another case is its concept's name: that is ranked.
info = resolve_query(query, view, ontology) if query else None
restrict = st.toggle("Rank only names of the query's class", key="nb_restrict",
                     disabled=info is None or info.class_id is None,
                     help="Available when the query is a name of this level")
sync_url(query)

if not query:
    st.info("Type a name or free text above, or pick a random held-out name.")
    st.stop()


models = [m for m in (model_a, model_b) if m]
ranked = info.text  # what was typed, or the concept's name it resolved to
waiting = st.empty()


@st.fragment(run_every=progressive.REFRESH_S)
def partial_answer() -> None:
    """The encoding's bar and a partial ranking per model, redrawn every couple of seconds until every name
    is encoded; then the whole page once more, for the usual ranking."""
    running = progressive.still_encoding(models, level)  # none left: the usual ranking (expansion, card, export)
    if running is None:
        return
    columns = st.columns(len(models))
    for column, model in zip(columns, models):  # the bars first: they show while the answers are computed
        if model in running:
            with column:
                progressive.encoding_bar(running[model])
    lexical = progressive.lexical_ranking(level, ranked)
    # the synonym expansion and clinical reading as the full ranking has them ("heart attack" also as "Myocardial
    # infarction", "DVT" as "deep vein thrombosis"), once a thread has read them: the first polls answer without them
    expanded = progressive.query_expansion(info, expansion, level)
    answers = []
    for model in models:
        vectors = progressive.query_vectors(model, [ranked])
        answers.append(partial_neighbours(view, progressive.partial_vectors(model, level), info,
                                          query_vector=None if vectors is None else vectors[0], lexical=lexical,
                                          k=k, restrict_class=info.class_id if restrict else None,
                                          matcher=progressive.matcher(level),
                                          forms=progressive.query_forms(model, level, expanded),
                                          placed=expanded.placed if expanded is not None else ()))
    if len(answers) == 2:  # Δ rank: where each name sits in the other model's merged ranking so far
        answers = [with_rank_changes(answers[0], answers[1]), with_rank_changes(answers[1], answers[0])]
    for column, label, answer in zip(columns, model_labels(models), answers):
        with column:
            st.markdown(f"**{md(label)}** · partial ranking")
            st.info(progressive.caption(answer.marker, answer.lexical), icon=":material/hourglass_top:")
            if answer.rows:
                st.table(partial_ranking_table(answer.rows), hide_index=True, border="horizontal")
            else:
                st.caption("No name matches yet: names are being encoded.")
    # below the tables, so that the expansion arriving between two polls does not move them
    if expanded is not None and expanded.reading is not None and expanded.reading.senses:
        st.caption(f"Read by the clinical vocabulary ({md(expanded.rule)}): {md(expanded.note)}."
                   + (" The full ranking puts its concepts first; this partial one ranks the names by its long forms "
                      "too." if expanded.placed else ""))
    elif expanded is not None and expanded.note:
        st.caption(f"Expanded: {md(expanded.note)}.")
    if len(answers) == 2:
        st.caption("Δ rank: rank in the other model's partial ranking minus rank here (▲ ranked higher here; "
                   "blank: not yet among the other model's merged names).")
    progressive.start_tfidf(level)  # after the answer is drawn: the next polls rank by char-tfidf once it is built


try:
    # Said before a first encoding starts (the progress bar and its ETA follow), from the measured rate;
    # not asked again for an index this session has built (a rerun costs nothing to say "nothing").
    built = s.setdefault("_nb_built", set())
    fresh = [m for m in models if (m, level, among) not in built]
    # Ranked among every name of a level still being encoded (here, by the warm-up, another page or a job):
    # a partial answer at once, refined as the encoding goes on (ui.progressive), the full one afterwards.
    partial = among == "names" and progressive.partial_wanted(fresh, level) \
        and bool(progressive.running_encodings(fresh, level))
    if partial:
        shown = f"{md(info.typed)} → **{md(ranked)}**" if info.typed and info.typed != ranked else f"**{md(ranked)}**"
        st.markdown(f"{shown} · {md(view.title)}")
        partial_answer()
        st.stop()
    if among == "names":  # the level's names: encoded (or the warm-up's encoding waited for) under a bar
        cache.prepare_vectors(fresh, level)  # (training or class names: only those, in candidate_index)
    notes = [e.message() for e in (first_encoding_estimate(view, m, among) for m in fresh) if e.needed]
    if notes:
        waiting.info("  \n".join(md(note) for note in notes), icon="⏳")
    indexes = [cache.candidate_index(m, level, among) for m in models]
    sparse = cache.sparse_names(level, among, indexes[0]) if ranking.hybrid else None  # same names for both models
    if sparse is not None and sparse.note:
        st.info(md(sparse.note))
    built.update((m, level, among) for m in models)
    vectors = [cache.query_vector(m, ranked) for m in models]
    if expansion.on and not info.in_ontology:  # a name or id of the ontology is its own concept (see expand_queries)
        with st.spinner("Reading the ontologies' synonyms (once per server)..."):
            lexicon = load_lexicon()
        # the clinical vocabulary of the level's ontology (and the user's synonyms): what an abbreviation or a lay
        # phrase names is placed first, by its rule
        vocabulary = clinical_vocabulary.vocabulary(level, ontology) if ontology is not None else None
        expanded = expand_queries([info], expansion, lexicon, vocabulary)[0]
        if among == "names" and vocabulary is not None:  # a phrasing near a term a source lists (first model)
            expanded = with_similar_terms([expanded], [info], vectors[0].reshape(1, -1), indexes[0].vectors,
                                          vocabulary=vocabulary, model=models[0],
                                          progress=clinical_vocabulary.terms_progress())[0]
    else:
        expanded = None
    # the concepts the vocabulary places first, tier by tier, the same for both models (class names: none)
    placed = expanded.placed if expanded is not None and among != "hypernyms" else ()
    forms = [ExpandedForms.of(expanded.forms, [0] * len(expanded.forms),
                              [cache.query_vector(m, form) for form in expanded.forms])
             if expanded is not None and expanded.forms else None for m in models]
except BiovizError as error:
    st.error(md(error))
    st.stop()
waiting.empty()

labels = model_labels(models)  # runs by their readable names, never by id or path
class_id = info.class_id if restrict else None
rankings = []
for i, index in enumerate(indexes):
    other = (indexes[1 - i], vectors[1 - i]) if len(indexes) == 2 else None
    rankings.append(rank_neighbours(index, vectors[i], info, k=k, restrict_class=class_id, other=other,
                                    ranking=ranking, sparse=sparse, forms=forms[i],
                                    other_forms=forms[1 - i] if other else None, placed=placed))
note = expanded.note if expanded is not None else ""  # "heart attack → Myocardial infarction (HPO synonym)"
reading = expanded.reading if expanded is not None and expanded.reading is not None and expanded.reading.senses \
    else None
placed_by = expanded.rule if placed else ""  # the rule named beside each row it placed
# beside each ranking's title: an ambiguous abbreviation's every sense is in the table above, not here
title_note = f"{reading.text}: ambiguous abbreviation, {len(reading.senses)} senses" \
    if reading is not None and reading.ambiguous else note

# --- the query ---------------------------------------------------------------------------
# The query, names, ids and definitions are the user's and the ontology's text: escaped (ui.markdown).
# A typed code or respelt name shows what it resolved to: that is the text ranked.
shown_query = f"{md(info.typed)} → **{md(ranked)}**" if info.typed and info.typed != ranked else f"**{md(ranked)}**"
if info.class_id is not None:
    st.markdown(f"{shown_query} · class **{md(info.class_label)}** ({md(info.class_id)}) · {md(view.title)}")
elif info.concept_ids:
    st.markdown(f"{shown_query} · an ontology name outside this level's names · {md(view.title)}")
else:
    st.markdown(f"{shown_query} · free text (not an ontology name) · {md(view.title)}")
for stand_in in dict.fromkeys(cache.query_note(m, ranked) for m in models if vectors_models([m])):
    if stand_in:  # a vectors file lacks the query: its nearest name's vector answered, said here
        st.warning(md(stand_in), icon=":material/swap_horiz:")
# which rule placed the first answer, and from where: the clinical vocabulary's (boxed) or the model's ranking
line = clinical_vocabulary.rule_line(expanded, first_placed=any(rows and rows[0].get("placed") for rows in rankings)) \
    if expanded is not None else ""
if reading is not None:
    st.info(line, icon=":material/menu_book:")
    if reading.ambiguous:  # every sense, not a guess
        st.table(clinical_vocabulary.senses_table(reading).style.format(
            {"Long form": md, "Concepts": md, "From": md}), hide_index=True, border="horizontal")
    if expanded.forms:
        st.caption("Each name also keeps its best score against " + "; ".join(f"*{md(form)}*" for form in expanded.forms)
                   + " (turn *Expand synonyms* off to rank the query alone).")
else:
    if line:
        st.caption(line)
    if note:
        st.caption(f"Expanded: {md(note)}. Each name keeps its best score against the query and the expanded "
                   "form (turn *Expand synonyms* off to rank the query alone).")
if info.concept_ids and ontology is not None:
    with st.container(border=True):
        shown = info.concept_ids[0]
        if len(info.concept_ids) > 1:
            if s.get("nb_concept") not in info.concept_ids:  # a new query: the linked concept, else the first
                linked = st.query_params.get("concept")
                s["nb_concept"] = linked if linked in info.concept_ids else shown
            shown = st.selectbox("Concept", list(info.concept_ids), key="nb_concept",
                                 help="The query is a name of several concepts")
        state.set_url_param("concept", shown if len(info.concept_ids) > 1 else None)
        card = concept_card(ontology, shown)
        st.markdown(f"#### {md(card['name'])}  \n{md_code(card['id'])}")
        if card["synonyms"]:
            st.markdown("**Synonyms:** " + "; ".join(md(name) for name in card["synonyms"]))
        if card["definition"]:
            st.markdown(f"**Definition:** {md(card['definition'])}")
        st.markdown("**Path to root:** " + " › ".join(f"{md(p['name'])} {md_code(p['id'])}" for p in card["path"]))

# --- the rankings ------------------------------------------------------------------------
st.markdown(
    f"<span style='background:{SAME_CONCEPT};padding:2px 6px'>same concept (synonym)</span> "
    f"<span style='background:{SAME_CLASS};padding:2px 6px'>same class</span>"
    + (" · Δ rank: rank under the other model minus rank here (▲ ranked higher here)" if len(models) == 2 else ""),
    unsafe_allow_html=True,
)

# Static tables (st.table) rather than grids: long names wrap inside their column, so rank, name,
# code, match, cosine and Δ rank of both models stay in view side by side at 1440 px, no sideways scroll.
columns = st.columns(len(models))
score_label = "Score" if ranking.hybrid else "Cosine"  # a hybrid score is cosine + weight x char-tfidf cosine
for column, label, rows in zip(columns, labels, rankings):
    with column:
        st.markdown(f"**{md(label)}** · {md(ranking.label)} ranking" + (f" · {md(title_note)}" if title_note else ""))
        if not rows:
            st.info("No names to rank.")
            continue
        frame = ranking_table(rows, score_label)
        if placed_by:  # the rows whose concept the clinical vocabulary placed first, by which rule
            frame.insert(4, "Placed by", [placed_by if row.get("placed") else "" for row in rows])
        colours = [row_colour(r) for r in rows]
        styled = frame.style.apply(
            lambda row, fills=colours: [f"background-color: {fills[row.name]}"] * len(row), axis=1)
        # st.table renders its cells as markdown: names and codes are the ontology's text (escaped)
        st.table(styled.format({score_label: "{:.3f}", "Name": md, "Code": md}), hide_index=True, border="horizontal")

export = pd.DataFrame(comparison_rows(rankings[0], rankings[1] if len(rankings) > 1 else None, label_a=labels[0],
                                      label_b=labels[1] if len(labels) > 1 else None, query=ranked))
export["ranking"] = ranking.label  # which scores these are, in the file itself
export["expansion"] = note  # and what the query was expanded to ("" when not)
export["placed_by"] = [placed_by if row.get("placed") else "" for rows in rankings for row in rows]
file_stem = f"{neighbours_file_stem(ranked)}-{ranking.slug}"
st.download_button("Download the comparison (CSV)", frame_to_csv(export), f"{file_stem}.csv", "text/csv")
# Runs only while open (on_change="rerun"): building the figure was a good part of every rerun.
image = st.expander("Image-ready table (camera icon: PNG at 2x; or SVG)", key="nb_image_open", on_change="rerun")
with image:
    fmt = st.radio("Format", ["png", "svg"], horizontal=True, key="nb_image")
    if image.open:
        title = f"{view.title} · {ranking.label} ranking" + (f" · {note}" if note else "")
        fig = neighbour_table_figure(ranked, list(zip(labels, rankings)), title, k,
                                     query_class=info.class_label, score_label=score_label)
        # at its own width: the figure is laid out for it (stretched, its columns would leave the text)
        st.plotly_chart(fig, width="content", config=export_config_as(file_stem, fmt))
