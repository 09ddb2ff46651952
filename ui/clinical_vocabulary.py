"""The clinical vocabulary in the app: a user's synonyms file per source, the vocabulary built under a bar, the rule line.

Neighbours and Code terms read a query or term with the level ontology's clinical vocabulary
(:mod:`bioviz.search.vocabulary`, :mod:`bioviz.search.query_reading`) when *Expand synonyms* is on.
A user may add their own ``term<TAB>concept_id`` file for the selected source, uploaded or named on
the server (only inside the data folders this server shares, :func:`bioviz.server_paths.shared_path`):
it is size-bounded, parsed in memory (never stored or run) and kept in the session per source, so
each source keeps its own file. A file that cannot be read is one error line in the sidebar; the
pages go on with the bundled vocabulary.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pandas as pd
import streamlit as st

from bioviz.errors import BiovizError, shown
from bioviz.ontology import LevelSpec
from bioviz.ontology.model import Ontology
from bioviz.search.lexicon import QueryExpansion
from bioviz.search.query_reading import QueryReading
from bioviz.search.vocabulary import (MAX_SYNONYMS_BYTES, ClinicalVocabulary, UserSynonyms, bundled_ready,
                                      read_user_synonyms, vocabulary_for)
from bioviz.server_paths import shared_path
from bioviz.uploads import check_upload_size
from ui import cache, state
from ui.markdown import md

SYNONYMS = "_user_synonyms"  # session key: source key -> {"label", "digest", "via", "synonyms"}
ERRORS = "_user_synonyms_error"  # session key: source key -> the last file's one-line error
PATH_KEY = "_synonyms_path"
LABEL = "Your synonyms (term<TAB>concept id)"


def source_key(spec: LevelSpec) -> tuple:
    """What a synonyms file belongs to: the source and its loader options (not the root or depth)."""
    return (spec.source, spec.options)


def uploader_key(spec: LevelSpec) -> str:
    """The uploader's widget key for the selected source: each source has its own, so a file stays with it."""
    return "_synonyms_upload_" + hashlib.sha256(repr(source_key(spec)).encode()).hexdigest()[:12]


def user_synonyms(spec: LevelSpec) -> UserSynonyms | None:
    """The user's synonyms for the level's source, as read; None when none is in use."""
    entry = st.session_state.get(SYNONYMS, {}).get(source_key(spec))
    return entry["synonyms"] if entry else None


def synonyms_digest(spec: LevelSpec) -> str:
    """A short digest of the source's synonyms file in use ("" when none): part of a cached coding's key."""
    entry = st.session_state.get(SYNONYMS, {}).get(source_key(spec))
    return entry["digest"] if entry else ""


def _read(spec: LevelSpec, data: bytes, *, name: str, via: str) -> None:
    """Parse ``data`` for the source and keep it; a BiovizError is kept as the source's one-line error instead."""
    key = source_key(spec)
    errors = st.session_state.setdefault(ERRORS, {})
    try:
        synonyms = read_user_synonyms(data, cache.level_ontology(spec), label=name)  # placed by id, named by file
    except BiovizError as error:
        errors[key] = f"{name}: {error}"
        return
    errors.pop(key, None)
    st.session_state.setdefault(SYNONYMS, {})[key] = {
        "label": name, "via": via, "synonyms": synonyms, "digest": hashlib.sha256(data).hexdigest()[:16]}


def _use_upload(spec: LevelSpec, widget: str) -> None:
    """The uploader's callback: read the file for the source; a cleared uploader stops using its file."""
    upload = st.session_state.get(widget)
    key = source_key(spec)
    if upload is None:
        entry = st.session_state.get(SYNONYMS, {}).get(key)
        if entry and entry["via"] == "upload":
            st.session_state[SYNONYMS].pop(key)
        st.session_state.get(ERRORS, {}).pop(key, None)
        return
    try:
        check_upload_size(upload.name, upload.size, MAX_SYNONYMS_BYTES)  # a scripted upload skips the browser's check
    except BiovizError as error:
        st.session_state.setdefault(ERRORS, {})[key] = str(error)
        return
    _read(spec, upload.getvalue(), name=upload.name, via="upload")


def _use_path(spec: LevelSpec) -> None:
    """The server path's callback: a file inside the shared data folders only, its size checked before it is read."""
    text = (st.session_state.get(PATH_KEY) or "").strip()
    try:
        path = shared_path(text)  # the one refusal for any path outside the data folders
        if not path.is_file():
            raise BiovizError(f"no synonyms file {shown(text)} in the shared data folders")
        check_upload_size(Path(text).name, path.stat().st_size, MAX_SYNONYMS_BYTES)
        data = path.read_bytes()
    except BiovizError as error:
        st.session_state.setdefault(ERRORS, {})[source_key(spec)] = str(error)
        return
    _read(spec, data, name=Path(text).name, via="path")


def _forget(spec: LevelSpec) -> None:
    st.session_state.get(SYNONYMS, {}).pop(source_key(spec), None)
    st.session_state.get(ERRORS, {}).pop(source_key(spec), None)


def synonyms_sidebar(spec: LevelSpec) -> None:
    """The sidebar's "Your synonyms" expander for the selected source: an upload or a server path, what was read."""
    entry = st.session_state.get(SYNONYMS, {}).get(source_key(spec))
    with st.sidebar.expander("Your synonyms", expanded=entry is not None):
        st.caption(f"Your own terms for **{md(state.source_display(spec.source))}**, one `term<TAB>concept_id` per "
                   "line: added to the clinical vocabulary when *Expand synonyms* is on, so a term of yours finds "
                   f"its concept first. At most {MAX_SYNONYMS_BYTES / 2**20:.0f} MiB; read in memory, never stored.")
        widget = uploader_key(spec)
        st.file_uploader(LABEL, type=["tsv", "txt"], key=widget, on_change=_use_upload, args=(spec, widget),
                         max_upload_size=max(1, MAX_SYNONYMS_BYTES // 2**20))
        path = st.text_input("…or a synonyms file on this server", key=PATH_KEY, placeholder="/data/synonyms.tsv",
                             help="Inside a data folder this server shares (BIOVIZ_DATA_DIRS)")
        st.button("Use this file", key="_synonyms_use_path", disabled=not path.strip(), on_click=_use_path,
                  args=(spec,))
        if error := st.session_state.get(ERRORS, {}).get(source_key(spec)):
            st.error(md(error))
        if entry is not None:
            st.caption(f"In use: **{md(entry['label'])}**: {md(entry['synonyms'].summary)}.")
            st.button("Stop using it", key="_synonyms_forget", on_click=_forget, args=(spec,))


def vocabulary(spec: LevelSpec, ontology: Ontology) -> ClinicalVocabulary:
    """The clinical vocabulary of the level's ontology with the user's synonyms, kept in memory per process.

    A first build (the bundled terms read from the packages: about 10-20 s, once per server and
    package version) shows its steps in a bar; indexing it for a new ontology, a spinner.
    """
    bar = st.empty()

    def progress(done: int, total: int) -> None:
        bar.progress(done / max(total, 1), text=f"Reading the clinical vocabulary (ICD-10-CM, HPO) once per server: "
                                                f"step {done} of {total}")

    try:
        with st.spinner("Indexing the clinical vocabulary for this ontology…", show_time=not bundled_ready()):
            return vocabulary_for(ontology, user_synonyms(spec), progress=progress)
    finally:
        bar.empty()


def senses_table(reading: QueryReading) -> pd.DataFrame:
    """Every sense of a reading: its long form, the concepts it names here, where it came from."""
    return pd.DataFrame([{"Sense": i, "Long form": sense.long_form,
                          "Concepts": "; ".join(f"{c} {n}" for c, n in zip(sense.concept_ids, sense.concept_names)),
                          "From": sense.provenance} for i, sense in enumerate(reading.senses, start=1)],
                        columns=["Sense", "Long form", "Concepts", "From"])


def rule_line(expanded: QueryExpansion, *, first_placed: bool) -> str:
    """The line above the answers: which rule placed the first answer and from where (markdown, escaped).

    ``first_placed``: whether a ranking's first row is a concept the reading placed.
    """
    reading = expanded.reading
    if reading is None or not reading.senses:
        how = "dense, with synonym expansion" if expanded.entries else "dense"
        return f"**First answer from the model's ranking ({how}):** the clinical vocabulary names nothing in the query."
    if reading.ambiguous and not reading.placed:  # senses guessed from its letters alone: none placed
        return (f"**First answer from the model's ranking:** {md(reading.text)} reads as an abbreviation no source "
                f"lists; its {len(reading.senses)} senses guessed from its letters are listed below, none placed.")
    if not first_placed:
        senses = "its senses are listed below" if reading.ambiguous else md(reading.note)
        return (f"**The clinical vocabulary read it ({md(reading.rule)})**, but none of its concepts is among the "
                f"names ranked here: {senses}")
    if reading.ambiguous:
        return (f"**First answers from the clinical vocabulary (ambiguous abbreviation):** {md(reading.text)} has "
                f"{len(reading.senses)} senses, each listed below and placed in this order (a listed abbreviation's "
                "usual reading, else the most supported first): which one is meant is yours to say.")
    return f"**First answer from the clinical vocabulary ({md(reading.rule)}):** {md(reading.note)}"


def terms_progress():
    """A progress callback for the vocabulary's terms encoded under a model, drawn only while they encode
    (the first time per model: about a minute for WHO ICD-10; later reads are the vector cache's)."""
    slot = st.empty()

    def progress(done: int, total: int) -> None:
        if done >= total:
            slot.empty()
        else:
            slot.progress(done / max(total, 1), text=f"Encoding the clinical vocabulary's listed terms once for this "
                                                     f"model: {done:,} of {total:,}")
    return progress
