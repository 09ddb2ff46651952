"""Code a term list: each term's first concept of the chosen level under one or two models, agreement, a review flag,
and the coder's move of a concept one level up or down."""

from __future__ import annotations

import hashlib
import re
import time

import pandas as pd
import streamlit as st

from bioviz.csv_export import frame_to_csv
from bioviz.errors import BiovizError
from bioviz.models.encoding_estimate import time_left
from bioviz.models.model_spec import ModelSpec
from bioviz.models.registry import load_encoder
from bioviz.models.runs import model_labels
from bioviz.models.vectors_coverage import vectors_models
from bioviz.ontology import LevelSpec
from bioviz.search.granularity import (DOWN, KEEP, MODEL, MOVED_DOWN, MOVED_UP, UP, CodingChoice, current_choices,
                                       granularity, move, with_choices, with_parents)
from bioviz.search.hybrid import DEFAULT_RANKING, RANKING_KINDS, Ranking, ranking_of
from bioviz.search.lexicon import NO_EXPANSION, Expansion, expansion_of
from bioviz.search.coding_confidence import REVIEW_FIGURES, RULE_REVIEW
from bioviz.search.neighbours import concept_card
from bioviz.search.progressive import partial_coding
from bioviz.search.term_coding import (MAX_K, MAX_TABLE_BYTES, MAX_TERMS, agreement, code_term_list,
                                       export_frame, read_term_table, resolve_terms, terms_from_column,
                                       terms_from_text)
from bioviz.text_clean import clean_texts
from bioviz.uploads import check_upload_size
from bioviz.figures.ranking_table import partial_coding_table
from ui import cache, clinical_vocabulary, progressive, state
from ui.markdown import md, md_code
from ui.metric_row import metric_row

RESULT = "_ct_result"  # the last coding of this session: shown again on every rerun until the next one
PENDING = "_ct_pending"  # a coding asked for while the level encodes: done in full once it is encoded
PARTIAL_TERMS = 50  # terms coded on each poll of a partial coding (each is ranked against every name's spelling)
TERM_COLUMN = re.compile(r"term|name|text|label|diagnos|descr|condition|phenotype|problem|symptom", re.I)
TABLE_KEYS = {False: "ct_table", True: "ct_table_disagree"}  # one selection per row set: rows are positions
# The coder's choices, per coding (terms, level, models, ranking, expansion): a choice never moves to another list.
CHOICES = "_ct_choices"
KEPT_CODINGS = 8  # codings whose choices are kept in a session: the oldest are forgotten first
MOVE_ERROR = "_ct_move_error"
MAX_CHILD_BUTTONS = 12  # more children (HPO has concepts with dozens) go into one select box: still one action
ARROWS = {MOVED_UP: "↑", MOVED_DOWN: "↓"}  # any other move (up, then down to a sibling): ↕
# What the Review flag means, with the clinical vocabulary's rules (bioviz.search.coding_confidence.RULE_REVIEW):
# an ambiguous abbreviation always (a coder picks its sense), a code the vocabulary placed never, others by score.
ALWAYS_REVIEWED = [rule for rule, fixed in RULE_REVIEW.items() if fixed is True]
NEVER_REVIEWED = [rule for rule, fixed in RULE_REVIEW.items() if fixed is False]
REVIEW_RULE = (f"A term read as {' or '.join(f'*{r}*' for r in ALWAYS_REVIEWED)} is always flagged (the coder "
               f"picks its sense); a code the clinical vocabulary placed ({', '.join(f'*{r}*' for r in NEVER_REVIEWED)}) "
               "is not; an exact code or name never is.")
INPUTS = {"paste": "Paste terms (one per line)", "upload": "Upload a CSV/TSV file"}
state.page_params({"ct_input": "paste", "ct_k": 5, "ct_ranking": DEFAULT_RANKING.kind, "ct_expand": True},
                  choices={"ct_input": list(INPUTS), "ct_ranking": list(RANKING_KINDS)},
                  casts={"ct_expand": lambda v: v != "0"},
                  url_names={"ct_input": "input", "ct_k": "k", "ct_ranking": "ranking", "ct_expand": "expand"},
                  bounds={"ct_k": (1, MAX_K)})

state.restore_form(state.current_page())  # the pasted terms, after a visit to another page
view = state.current_view()
model_a, model_b = state.chosen_models()  # model_b is None when the sidebar's "Compare two models" is off
models = [m for m in (model_a, model_b) if m]
s = st.session_state


def sync_url() -> None:
    """Mirror the page's settings in the URL (never the terms: they are the user's data) and keep them."""
    state.keep(["ct_input", "ct_k", "ct_text", "ct_ranking", "ct_expand"])
    state.sync_url(k=str(s["ct_k"]), input=s["ct_input"], two="1" if model_b else "0", ranking=s["ct_ranking"],
                   expand="1" if s["ct_expand"] else "0")


def coding_table(frame: pd.DataFrame, labels: list[str], score_word: str, k: int) -> tuple[pd.DataFrame, dict]:
    """The table shown: per model its code, concept and score (and other codes when k > 1), the flags.

    Empty text for what is missing (never "None"). Narrow widths, which the grid spreads over its frame:
    two models' columns fit the page at 1440 px instead of scrolling sideways (names are cut in their cells),
    and their headers are short (``Code A``; the caption says which model is A) so they are not cut either.
    With two models the concepts' names are narrower, to leave room for the coder's *Chosen* code.
    """
    two = len(labels) == 2
    tags = [f" {x.upper()}" if two else "" for x in "ab"[:len(labels)]]
    columns = {"term": "Term", "match": "Match"}
    formats = {"Term": st.column_config.TextColumn(width=120 if two else 140),
               "Match": st.column_config.TextColumn(
                   width=70, help="What placed the first concept: exact (a code or name of the ontology), a rule of the "
                                  "clinical vocabulary (abbreviation, ambiguous abbreviation, vocabulary, rewritten), "
                                  "or nearest (the model's ranking)")}
    for x, tag, label in zip("ab", tags, labels):
        columns |= {f"code_{x}": f"Code{tag}", f"name_{x}": f"Concept{tag}", f"score_{x}": f"Score{tag}"}
        formats |= {f"Code{tag}": st.column_config.TextColumn(width=80, help=f"The first concept's code under {label}"),
                    f"Concept{tag}": st.column_config.TextColumn(width=120 if two else 155),
                    f"Score{tag}": st.column_config.NumberColumn(format="%.3f", width=70,
                                                                 help=f"{score_word} under {label} (1.0: exact)")}
        if len(labels) == 1 and f"parent_name_{x}" in frame.columns:  # two models': in the CSV and the panel
            columns[f"parent_name_{x}"] = "Parent"
            formats["Parent"] = st.column_config.TextColumn(
                width=120, help="One level up from the concept (select the row to move there)")
        if k > 1 and len(labels) == 1:  # two models' other codes would not fit beside each other: in the cards
            columns[f"others_{x}"] = f"Other codes{tag}"
            formats[f"Other codes{tag}"] = st.column_config.TextColumn(width=130, help=f"The rest of the top {k}")
    if two:
        columns["agree"] = "Agree"
        formats["Agree"] = st.column_config.CheckboxColumn(width=55, help="Both models give the same first concept")
    if "chosen_shown" in frame.columns:
        columns["chosen_shown"] = "Chosen"
        formats["Chosen"] = st.column_config.TextColumn(  # the code first: it stays in view when the name is cut
            width=95 if two else 120, help=f"The concept the coder moved to (↑ a parent, ↓ a child); empty: {labels[0]}'s is kept")
    columns["low_confidence"] = "Review"
    formats["Review"] = st.column_config.CheckboxColumn(
        width=60, help="Low confidence: a low score or a close second concept under some model. " + REVIEW_RULE)
    display = frame[list(columns)].rename(columns=columns)
    text = [c for c in display.columns if display[c].dtype == object]
    display[text] = display[text].fillna("")
    return display, formats


def chosen_label(choice: CodingChoice | None) -> str:
    """The table's *Chosen* cell: empty while the model's concept is kept, else an arrow, the code and the name."""
    if choice is None or choice.how == MODEL:
        return ""
    return f"{ARROWS.get(choice.how, '↕')} {choice.chosen.id} {choice.chosen.name}"


def choose(current: CodingChoice, kind: str, target: str | None) -> None:
    """A move's callback: the term's choice after it, kept under the shown coding (the oldest codings forgotten).

    Runs before the page does, so the table drawn next already shows the move.
    """
    result = s[RESULT]
    try:
        chosen = move(current, cache.level_ontology(result["level"]), kind, target, root=result["root"])
    except BiovizError as error:
        s[MOVE_ERROR] = str(error)
        return
    codings = s.setdefault(CHOICES, {})
    key = result["choices_key"]
    codings[key] = {**codings.pop(key, {}), current.term: chosen}  # put back last: the most recently used
    while len(codings) > KEPT_CODINGS:
        codings.pop(next(iter(codings)))


def choose_child(current: CodingChoice, widget: str) -> None:
    """The children select box's callback: move down to the picked child, then empty the box for the next move."""
    if s.get(widget):
        choose(current, DOWN, s[widget])
    s[widget] = None


def granularity_panel(choice: CodingChoice, ontology, root: str, label: str) -> None:
    """The selected term's chosen concept with its parents and children: one click moves it one level.

    Raises
    ------
    BiovizError
        The concept is not in the ontology (a name of the level without a concept of its own).
    """
    around = granularity(ontology, choice.chosen.id, root=root)
    with st.container(border=True):
        st.markdown(f"#### Code for **{md(choice.term)}**: {md(choice.chosen.name)} {md_code(choice.chosen.id)}")
        st.caption(f"{md(choice.how.capitalize())} from {md(label)}'s concept, {md(choice.proposed.name)} "
                   f"{md_code(choice.proposed.id)}." if choice.how != MODEL else
                   f"{md(label)}'s concept. Too general or too specific? Move it one level up or down: the table "
                   "and the CSV keep the choice.")
        up, down = st.columns(2)
        with up:
            st.markdown("**Parent** (one level up)")
            for parent in around.parents:
                st.button(f"↑ {md(parent.name)} · {md(parent.id)}", key=f"ct_up_{parent.id}", on_click=choose,
                          args=(choice, UP, parent.id))
            if not around.parents:
                st.caption("None in this level: its root is the next level up.")
        with down:
            st.markdown("**Children** (one level down)")
            if len(around.children) > MAX_CHILD_BUTTONS:
                names = {c.id: f"{c.name} · {c.id}" for c in around.children}
                st.selectbox(f"{len(names)} children", list(names), index=None, key="ct_down_pick",
                             format_func=names.get, placeholder="Move down to…", on_change=choose_child,
                             args=(choice, "ct_down_pick"))
            for child in around.children if len(around.children) <= MAX_CHILD_BUTTONS else ():
                st.button(f"↓ {md(child.name)} · {md(child.id)}", key=f"ct_down_{child.id}", on_click=choose,
                          args=(choice, DOWN, child.id))
            if not around.children:
                st.caption("None: the most specific concept.")
        if choice.how != MODEL:
            st.button(f"Back to {md(label)}'s concept", key="ct_keep", on_click=choose, args=(choice, KEEP, None))


st.title("Code a term list")
if view is None:
    sync_url()
    st.stop()
try:
    for model in models:  # an unreachable model (a hub id offline, a damaged run) is one line before any work
        load_encoder(model)  # no weights are loaded: what the model is and where its files are
    labels = model_labels(models)
except BiovizError as error:
    st.error(md(error))
    st.stop()
clinical_vocabulary.synonyms_sidebar(state.selection())  # the user's own synonyms for this source
st.caption(f"Each term's nearest concepts among the names of **{md(view.title)}** under "
           f"**{' and '.join(md(label) for label in labels)}**, with codes and scores"
           + (", whether the two models agree" if len(models) == 2 else "") + " and a flag on codes to review"
           + ". A term that is an exact code or name of the ontology resolves to its concept (score 1.0, "
             "marked exact). The terms are read in memory only: not stored, not put in the URL.")


@st.cache_data(max_entries=8, show_spinner=False)
def coded(terms: tuple[str, ...], specs: tuple[ModelSpec, ...], fingerprints: tuple[str, ...], level: LevelSpec, *,
          k: int, ranking: Ranking, _indexes, expansion: Expansion = NO_EXPANSION, _vocabulary=None,
          synonyms: str = "") -> pd.DataFrame:
    """The coding of ``terms``, kept by the terms, models, level and k (``_indexes``: the models' name indexes).

    The models' fingerprints are part of the key: a run trained again in the same folder codes afresh; so is
    the digest of the user's synonyms file (``synonyms``) the clinical vocabulary (``_vocabulary``) was built with.

    The bar is created (and removed) in here: Streamlit replays what a cached function drew on a hit.
    """
    bar = st.empty()
    started = time.perf_counter()

    def progress(done: int, total: int) -> None:
        left = time_left(time.perf_counter() - started, done, total)
        eta = f", {left}" if left else ""
        step = "Encoding" if done < len(specs) * len(terms) else "Coding"
        share = done / max(total, 1)
        bar.progress(share, text=f"{step} {len(terms):,} terms ({len(specs)} "
                                 f"model{'s' if len(specs) > 1 else ''}): {share:.0%}{eta}")

    try:
        return code_term_list(terms, cache.view(level), cache.level_ontology(level), list(zip(specs, _indexes)),
                              k=k, progress=progress, ranking=ranking, expansion=expansion, vocabulary=_vocabulary)
    finally:
        bar.empty()


source = st.radio("Terms", list(INPUTS), format_func=INPUTS.get, key="ct_input", horizontal=True)
table = None
if source == "paste":
    st.text_area("Terms, one per line", key="ct_text", height=180,
                 placeholder="heart attack\nR39.11\nshortness of breath on exertion",
                 help=f"At most {MAX_TERMS:,} distinct terms; blank lines and repeats are skipped.")
else:
    upload = st.file_uploader("A CSV or TSV file with a header line", type=["csv", "tsv", "txt"], key="ct_file",
                              max_upload_size=MAX_TABLE_BYTES // 2**20,  # the browser refuses a larger file
                              help=f"At most {MAX_TABLE_BYTES / 2**20:.0f} MiB and {MAX_TERMS:,} distinct terms. "
                                   "The file is parsed as a table in memory: never stored or run.")
    if upload is not None:
        try:
            check_upload_size(upload.name, upload.size, MAX_TABLE_BYTES)  # a scripted upload skips the browser's check
            table = read_term_table(upload.getvalue(), upload.name)
        except BiovizError as error:
            st.error(md(error))
        else:
            columns = list(table.columns)
            state.forget_stale_choice("ct_column", columns)
            if "ct_column" not in s:  # a column named like one holding terms, else the first one
                s["ct_column"] = next((c for c in columns if TERM_COLUMN.search(c)), columns[0])
            st.selectbox("Column with the terms", columns, key="ct_column")
            st.caption(f"{len(table):,} rows · {len(columns)} columns · first rows:")
            st.dataframe(table.head(5), hide_index=True)
k = int(st.number_input("Concepts per term (k)", min_value=1, max_value=MAX_K, step=1, key="ct_k",
                        help="The first concept and k - 1 others under each model (the others are in the cards and the CSV)"))
ranking = ranking_of(st.radio(
    "Ranking", list(RANKING_KINDS), key="ct_ranking", horizontal=True, format_func=lambda kind: ranking_of(kind).label,
    help="dense: the model's cosine (exact codes and names first). hybrid: also names equal but for case, spacing "
         "and punctuation first, then cosine + weight × character n-gram TF-IDF cosine (BioSyn's scoring; weight "
         f"and default chosen on the coding dev files). Default: {DEFAULT_RANKING.kind}."))
expansion = expansion_of(st.toggle(
    "Expand synonyms", key="ct_expand",
    help="A term the ontology does not name but that is an ontology synonym (HPO synonyms, ICD-10-CM inclusion "
         "terms) is also ranked as its concept's preferred name: 'heart attack' as 'Myocardial infarction'. The "
         "clinical vocabulary (ICD-10-CM inclusion terms, HPO lay and abbreviation synonyms, common clinical "
         "abbreviations, your synonyms file in the sidebar) also puts the concept an abbreviation or lay phrase names "
         "right after exact matches: 'DVT' → deep vein thrombosis (the Match column names the rule)."))
sync_url()
run = st.button("Code the terms", type="primary", disabled=source == "upload" and table is None)
# Pressed while the level was still encoding: coded in part at once (partial_coding below), then in full
# by the run the fragment starts when every name is encoded.
run = run or bool(s.get(PENDING))


@st.fragment(run_every=progressive.REFRESH_S)
def partial_coding_panel(terms: list[str], level: LevelSpec) -> None:
    """The encoding's bar and the first terms coded from the names encoded so far, redrawn until every name
    is encoded; then the whole page once more, which codes the list in full."""
    running = progressive.still_encoding(models, level)  # none left: the page codes the pending list in full
    if running is None:
        s.pop(PENDING, None)
        return
    v, ontology = cache.view(level), cache.level_ontology(level)
    shown_terms = terms[:PARTIAL_TERMS]
    infos = resolve_terms(shown_terms, v, ontology)
    for model, label in zip(models, labels):
        if model in running:
            progressive.encoding_bar(running[model])
        vectors = progressive.query_vectors(model, [info.text for info in infos])
        # each term's synonym expansion and clinical reading's long forms, as the full coding has them, once a thread
        # has read them (the partial coding places nothing: the full one does)
        forms = [progressive.query_forms(model, level, progressive.query_expansion(info, expansion, level))
                 for info in infos]
        coding = partial_coding(shown_terms, infos, v, progressive.partial_vectors(model, level), term_vectors=vectors,
                                lexicals=[progressive.lexical_ranking(level, info.text) for info in infos], k=k,
                                ontology=ontology, forms=forms)
        more = f" (the first {PARTIAL_TERMS:,} of {len(terms):,} terms)" if len(terms) > PARTIAL_TERMS else ""
        st.markdown(f"**{md(label)}** · partial coding{more}")
        st.info(progressive.caption(coding.marker, coding.lexical), icon=":material/hourglass_top:")
        st.dataframe(partial_coding_table(coding.rows), hide_index=True, width="stretch")
    progressive.start_tfidf(level)  # after the answer is drawn: the next polls rank by char-tfidf once it is built


if run:
    try:
        terms = terms_from_text(s.get("ct_text") or "") if source == "paste" else \
            terms_from_column(table, s["ct_column"])
        raw = (s.get("ct_text") or "").splitlines() if source == "paste" else table[s["ct_column"]].astype(str)
        level = state.selection()
        if progressive.partial_wanted(models, level) and progressive.running_encodings(models, level):
            s[PENDING] = True  # coded in full by the run that follows the encoding
            partial_coding_panel(terms, level)
            st.stop()
        s.pop(PENDING, None)
        cache.prepare_vectors(models, level)  # a first encoding: its estimate, then a bar with the time left
        indexes = [cache.candidate_index(m, level, "names") for m in models]
        fingerprints = tuple(load_encoder(m).fingerprint for m in models)
        # the clinical vocabulary (with the user's synonyms for this source): built here, under its own bar, not
        # inside the cached coding (whose drawing a cache hit would replay)
        vocabulary = clinical_vocabulary.vocabulary(level, cache.level_ontology(level)) if expansion.on else None
        synonyms = clinical_vocabulary.synonyms_digest(level) if expansion.on else ""
        frame = coded(tuple(terms), tuple(models), fingerprints, level, k=k, ranking=ranking, _indexes=indexes,
                      expansion=expansion, _vocabulary=vocabulary, synonyms=synonyms)
        # each first concept's parents, looked up once per coding (not on every rerun of the table)
        frame = with_parents(frame, cache.level_ontology(level), root=view.root)
    except BiovizError as error:
        s.pop(PENDING, None)
        st.error(md(error))
        st.stop()
    digest = hashlib.sha256("\n".join(terms).encode()).hexdigest()  # the list itself, not kept twice
    # a vectors file lacking a term answered it from its nearest name: said with the table
    stand_ins = [note for m in models if vectors_models([m]) for t in dict.fromkeys(terms)
                 if (note := cache.query_note(m, t))]
    s[RESULT] = {"frame": frame, "labels": labels, "title": view.title, "models": tuple(models),
                 "level": state.selection(), "k": k, "invisible": clean_texts(raw).dropped, "ranking": ranking,
                 "root": view.root, "choices_key": (level, tuple(models), ranking, expansion, synonyms, digest),
                 "stand_ins": stand_ins}
    for key in TABLE_KEYS.values():  # a new table: the old row selection means nothing
        s.pop(key, None)

result = s.get(RESULT)
if result is None:
    st.info("Paste terms or upload a file, then press **Code the terms**.")
    st.stop()

frame: pd.DataFrame = result["frame"]
labels = result["labels"]
two = len(labels) == 2
if result["models"] != tuple(models) or result["level"] != state.selection() or result["k"] != k \
        or result["ranking"] != ranking:
    st.info("The table below was coded for another level, models, k or ranking: press **Code the terms** to code "
            "the list for the current selection.")
score_word = "Hybrid score" if result["ranking"].hybrid else "Cosine"
st.subheader(f"{' vs '.join(md(label) for label in labels)} · {md(result['ranking'].label)} ranking · "
             f"{md(result['title'])}")
if frame.attrs.get("ranking_note"):
    st.info(md(frame.attrs["ranking_note"]))
if frame.attrs.get("expansions"):
    st.caption("Expanded: " + " · ".join(md(note) for note in frame.attrs["expansions"]))
if result.get("stand_ins"):
    with st.expander(f"{len(result['stand_ins']):,} terms are not in a vectors file: each was coded from the "
                     "file's nearest name (lexical ranking)"):
        st.markdown("  \n".join(md(note) for note in result["stand_ins"][:200]))
summary = agreement(frame)
figures = [("Terms", summary["terms"]),
           ("Exact code or name", summary["exact"], {"help": "Terms that are an ontology code or name"}),
           ("To review", summary["low_confidence"],
            {"help": "Low confidence: under some model the first concept's score is low or the second concept "
                     "scores close to it (thresholds per model, chosen on development sets). " + REVIEW_RULE
                     + " " + REVIEW_FIGURES.sentence + " (med-minilm, dense)."})]
if two:
    figures += [("Same first concept", f"{summary['same_top1']:,} of {summary['terms']:,}"),
                (f"Shared in the top {result['k']}", f"{summary['mean_overlap']:.2f}",
                 {"help": "Concepts both models put in their top k, averaged over the terms"})]
metric_row(figures)
st.caption(f"Review flag: {REVIEW_FIGURES.sentence} (med-minilm, dense; benchmarks/review_flags.py). {REVIEW_RULE}")
if result.get("invisible"):
    st.info(f"{result['invisible']:,} term(s) made only of invisible characters (control or format characters "
            "such as NUL, zero-width spaces or right-to-left marks) were skipped; such characters are taken "
            "out of every other term.")

choices = s.get(CHOICES, {}).get(result.get("choices_key"), {})  # this coding's moves only
current = dict(zip(frame["term"], current_choices(frame, choices)))  # terms are unique in a coding
shown = frame.assign(chosen_shown=[chosen_label(choice) for choice in current.values()])
disagreeing = two and st.toggle("Only terms where the models' first concepts differ", key="ct_disagree")
if disagreeing:
    shown = shown[~shown["agree"].astype(bool)].reset_index(drop=True)
display, column_config = coding_table(shown, labels, score_word, result["k"])
st.caption((f"**A**: {md(labels[0])} · **B**: {md(labels[1])}. " if two else f"Model: {md(labels[0])}. ")
           + f"One row per term: each model's first concept, ranked by that model's own {score_word.lower()}"
           f"{', with the other codes of its top ' + str(result['k']) if result['k'] > 1 else ''}. "
           "**Review** marks a low-confidence code: a low score, or a second concept close behind. "
           + REVIEW_RULE + " **Match** says what placed the first concept; how the clinical vocabulary read each "
           "term is under the table (and in the CSV's *reading* column). "
           "Select a row for the concepts' cards and to move its code one level up or down (**Chosen**).")
event = st.dataframe(display, hide_index=True, width="stretch", on_select="rerun", selection_mode="single-row",
                     key=TABLE_KEYS[disagreeing], column_config=column_config)
readings = frame[frame["reading"] != ""] if "reading" in frame.columns else frame.iloc[0:0]
if len(readings):  # the notes are long: their own table below the grid, which then fits the page at 1440 px
    with st.expander(f"How the clinical vocabulary read {len(readings):,} term{'s' if len(readings) != 1 else ''}"):
        st.dataframe(readings[["term", "match", "reading"]].rename(
                         columns={"term": "Term", "match": "Match", "reading": "Reading"}),
                     hide_index=True, width="stretch",
                     column_config={"Term": st.column_config.TextColumn(width=160),
                                    "Match": st.column_config.TextColumn(width=120),
                                    "Reading": st.column_config.TextColumn(
                                        width=560, help="The long form, the concept and the source it came from")})
# The CSV of thousands of rows is built only when the button is pressed (and that press does not rerun).
# The choices are bound now: the press may come after later reruns have moved other codes.
st.download_button("Download the coding (CSV)",
                   lambda frame=frame, choices=dict(choices): frame_to_csv(export_frame(with_choices(frame, choices))),
                   f"coded-terms-{re.sub(r'[^A-Za-z0-9]+', '-', result['title']).strip('-')[:60]}"
                   f"-{result['ranking'].slug}.csv", "text/csv",
                   on_click="ignore")

selected = list(event.selection.rows) if event is not None else []
if selected and selected[0] < len(shown):
    row = shown.iloc[selected[0]]
    ontology = cache.level_ontology(result["level"])
    choice = current.get(row["term"])
    if s.get(MOVE_ERROR):
        st.error(md(s.pop(MOVE_ERROR)))
    if choice is not None and "root" in result:
        try:
            granularity_panel(choice, ontology, result["root"], labels[0])
        except BiovizError as error:  # a name of the level without a concept of its own: nothing to move
            st.info(md(error))
    moved = [choice.chosen.id] if choice is not None and choice.how != MODEL else []
    for code in dict.fromkeys([*moved, *(row[f"code_{x}"] for x in "ab"[:len(labels)] if row[f"code_{x}"])]):
        with st.container(border=True):
            try:
                card = concept_card(ontology, code)
            except BiovizError as error:
                st.info(md(error))
                continue
            st.markdown(f"#### {md(card['name'])}  \n{md_code(card['id'])} · for the term **{md(row['term'])}**")
            if card["synonyms"]:
                st.markdown("**Synonyms:** " + "; ".join(md(name) for name in card["synonyms"]))
            if card["definition"]:
                st.markdown(f"**Definition:** {md(card['definition'])}")
            st.markdown("**Path to root:** " + " › ".join(f"{md(p['name'])} {md_code(p['id'])}"
                                                           for p in card["path"]))
    others = [f"**{md(label)}**: {md(row[f'others_{x}'])}" for x, label in zip("ab", labels) if row[f"others_{x}"]]
    if others:
        st.caption(f"Other codes of the top {result['k']}: " + " · ".join(others))
