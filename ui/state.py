"""The state every page shares: the level selection, the models, page values kept across visits, the URL.

The router (app.py) calls :func:`init_state` and draws :func:`selection_sidebar` and
:func:`model_pickers` once per run, before the page runs. The selection lives in
``st.session_state`` under the sidebar widgets' keys; :func:`selection` gives it as a
:class:`~bioviz.ontology.LevelSpec`, and :func:`sync_url` mirrors it (and a page's own keys)
in ``st.query_params`` so a link reopens the same view.

Streamlit forgets the value of a widget that is not drawn on a run: a page's settings after
a visit to another page, the UMLS options while another source is selected. One mechanism
brings them back: :func:`keep_form` records values under a key no widget owns,
:func:`restore_form` puts them back before the widgets are drawn, and :func:`page_params`
(URL first, then the kept value, then the default) builds on both.

Nothing from a link is trusted: every value is read by :func:`ui.url_values.read_url_value`
(bounded, checked against its choices, a warning when it had to change), a path must lie in
a data folder this server shares (:mod:`bioviz.server_paths`), and a model from a link goes
through :func:`ui.models.usable_model` before anything loads it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import streamlit as st

from bioviz import server_paths
from bioviz.errors import BiovizError
from bioviz.ontology import LevelSpec, list_sources
from bioviz.ontology.levels import SOURCE_TITLES, LevelView
from bioviz.ontology.sources import source_kind
from bioviz.ontology.umls import COMMON_SABS, DEFAULT_SAB, HIERARCHIES, SEMANTIC_GROUPS
from bioviz.models.model_spec import (BASELINE_MODEL, DEFAULT_MODEL, PRESET_MODELS, ModelSpec, link_form,
                                     policy_text)
from bioviz.models.runs import distinct_labels, list_runs
from bioviz.models.vectors_coverage import vectors_models
from bioviz.uploads import original_name
from ui import cache
from ui.markdown import md
from ui.models import trust, usable_model
from ui.navigation import NO_MODELS, ONE_OR_TWO_MODELS
from ui.url_values import read_url_value

BUNDLED = [s["name"] for s in list_sources() if s["kind"] == "bundled"]
DEFAULTS = {"source": "icd10", "root": "", "depth": 1, "synonyms": False, "keep_ambiguous": False,
            "model_a": DEFAULT_MODEL, "model_b": BASELINE_MODEL,
            "sab": DEFAULT_SAB, "semantic_group": "", "hierarchy": "parchd"}
# Loader options of a UMLS source (session key = URL parameter = load_umls argument).
UMLS_KEYS = ("sab", "semantic_group", "hierarchy")
SHARED_KEYS = ("source", "root", "depth", "synonyms", "keep_ambiguous", "model_a", "model_b", *UMLS_KEYS)
SHARED = "_shared"  # the kept-values namespace of SHARED_KEYS (pages use their URL path)
KEPT = "_bioviz_kept"  # namespace -> {key: value}: values kept across runs that do not draw their widgets
PAGE = "_bioviz_page"  # the URL path of the page this run shows
ENTERED = "_bioviz_entered"  # whether this run is the first on its page since another page ran
MODELS = "_bioviz_models"  # (model_a, model_b or None) as the sidebar chose them on this run
TWO = "compare_two"  # the "Compare two models" switch of pages that take one or two models
DEFAULT_ROOTS = {s["name"]: s["default_root"] for s in list_sources() if s["kind"] == "bundled"}
MAX_DEPTH = 12  # the sidebar's depth widget goes no deeper
# The longest text kept of a shared URL value: a path, an id, a vocabulary name.
MAX_SHARED_TEXT = {"source": 4096, "model_a": 1000, "model_b": 1000, "root": 1000, "sab": 200,
                   "semantic_group": 1000}
UPLOADS = "_bioviz_uploads"  # uploads this session stored: never removed to make room for others'
DECLARED = "_bioviz_url_params"  # page -> the URL parameters its page_params reads (for the URL fuzz test)


def _canonical_source(source: str) -> str:
    """The checked real path of a source (a bundled name as is); a refused one unchanged, refused again on load."""
    try:
        return server_paths.shared_source(source)
    except BiovizError:
        return source


def _canonical_model(spec: str) -> str:
    """The checked text of a link's or typed MODEL (a run id -> its real path); a refused one unchanged.

    Kept as text in the session (the pickers' value); :func:`model_pickers` parses it once per run.
    """
    try:
        # the path policy alone: whether the files make a model is the pickers' question (one line there)
        return policy_text(spec)
    except BiovizError:
        return spec


def _relative_form(real: str, folders, canonical: Callable[[str], str]) -> str:
    """``real`` relative to the innermost of ``folders`` holding it, if that form reads back as ``real``; else ``real``.

    A relative path is read in each folder in turn (:func:`bioviz.server_paths.shared_path`),
    so a name another folder also holds keeps its full path.
    """
    forms = []
    for folder in folders:
        try:
            forms.append(str(Path(real).relative_to(folder)))
        except ValueError:
            continue
    for relative in sorted(forms, key=len):  # the innermost folder gives the shortest form
        if relative != "." and canonical(relative) == real:
            return relative
    return real


def url_source(source: str) -> str:
    """How a link carries a source: a bundled name, or its path relative to the data folder holding it.

    An upload is its stored file name; a file in a ``BIOVIZ_DATA_DIRS`` folder its path
    inside it. Links never carry the server's absolute paths (an old link's absolute path
    still opens: the policy reads both).
    """
    if source in BUNDLED:
        return source
    return _relative_form(source, server_paths.data_dirs(), _canonical_source)


def url_model(spec: str) -> str:
    """How a link carries a picker's MODEL text (:meth:`ModelSpec.to_query`); a refused path as typed."""
    try:
        # the link form needs the path policy alone: a damaged run still links by its id
        return link_form(spec)
    except BiovizError:
        return spec


def model_from_url(spec: str) -> str:
    """The MODEL text a link's model value names (a run id -> its run directory; a refused one unchanged)."""
    return _canonical_model(spec)


def source_display(source: str) -> str:
    """A source as the sidebar shows it: an upload by the user's file name, a shared file by its relative path."""
    if source in BUNDLED:  # a reader's name (ICD-10-CM), not the id the URL keeps (icd10cm)
        return SOURCE_TITLES.get(source, source)
    return original_name(source) or url_source(source)


def _from_url(warn: bool = False) -> dict:
    """The shared selection as the URL (or the defaults) gives it: session key -> value.

    Every value is bounded and cut to a sane length; with ``warn``, a changed one is said
    in a warning. Paths are replaced by the real paths the policy checked.
    """
    params = st.query_params
    values = {}
    for key, limit in MAX_SHARED_TEXT.items():
        if key in params:
            values[key], note = read_url_value(key, params[key], "", max_chars=limit)
            if note and warn:
                st.warning(md(note))
    depth, note = read_url_value("depth", params.get("depth", "1"), 1, bounds=(1, MAX_DEPTH))
    if note and warn:
        st.warning(md(note))
    spec = LevelSpec.from_query({**params.to_dict(), **values, "depth": str(depth)},
                                default_source=DEFAULTS["source"])
    options = spec.source_options
    hierarchy = options.get("hierarchy", DEFAULTS["hierarchy"])
    return {
        "source": _canonical_source(spec.source), "root": spec.root or "", "depth": spec.depth,
        "synonyms": spec.synonyms, "keep_ambiguous": spec.keep_ambiguous,
        "model_a": _canonical_model(values.get("model_a") or DEFAULTS["model_a"]),
        "model_b": _canonical_model(values.get("model_b") or DEFAULTS["model_b"]),
        "sab": options.get("sab", "").strip() or DEFAULTS["sab"],
        "semantic_group": options.get("semantic_group", DEFAULTS["semantic_group"]),
        "hierarchy": hierarchy if hierarchy in HIERARCHIES else DEFAULTS["hierarchy"],
    }


def init_state(page: str = "") -> None:
    """Set the shared keys: from the URL on a session's first run, afterwards as kept.

    The router calls it once per run, before any widget is drawn; ``page`` is the URL path
    of the page the run shows (the namespace of :func:`page_params`).
    """
    st.session_state[ENTERED] = st.session_state.get(PAGE) != page
    st.session_state[PAGE] = page
    if not st.session_state.get("_bioviz_init"):
        st.session_state.update(_from_url(warn=True))
        st.session_state["_bioviz_init"] = True
    # Keys of widgets not drawn on the last run (the UMLS options of another source; all of
    # them when a fragment with run_every reruns as the user leaves its page, streamlit#10805).
    restore_form(SHARED)
    if missing := [key for key in SHARED_KEYS if key not in st.session_state]:
        initial = _from_url()
        st.session_state.update({key: initial[key] for key in missing})
    keep_form(SHARED, SHARED_KEYS)


def current_page() -> str:
    """The URL path of the page this run shows (``""`` for the home page)."""
    return st.session_state.get(PAGE, "")


# --- values kept across runs that do not draw their widgets ---------------------------------


def restore_form(page: str) -> None:
    """Put back the values :func:`keep_form` recorded for ``page`` whose keys Streamlit dropped.

    Call before the widgets are created (Streamlit forgets the state of widgets not drawn on
    a run, so a form would otherwise come back with its defaults after a visit elsewhere).
    """
    for key, value in (st.session_state.get(KEPT) or {}).get(page, {}).items():
        if key not in st.session_state:
            st.session_state[key] = value


def keep_form(page: str, keys: tuple[str, ...] = (), prefixes: tuple[str, ...] = ()) -> None:
    """Record the current values of ``page``'s widget keys (value widgets only, never buttons).

    A named key (or one with a named prefix) missing from the session is forgotten: its
    widget is gone (another encoder's options, say) and should come back with its default.
    """
    kept = st.session_state.setdefault(KEPT, {}).setdefault(page, {})
    prefixes = tuple(prefixes)
    for key in [k for k in kept if k in keys or (prefixes and k.startswith(prefixes))]:
        kept.pop(key)
    kept.update({k: v for k, v in st.session_state.items()
                 if isinstance(k, str) and (k in keys or (prefixes and k.startswith(prefixes)))})


def keep(keys) -> None:
    """Record the current values of the current page's keys (see :func:`page_params`)."""
    keep_form(current_page(), tuple(keys))


def page_params(defaults: dict, *, casts: dict[str, Callable] | None = None, choices: dict[str, list] | None = None,
                url_names: dict[str, str] | None = None, bounds: dict[str, tuple] | None = None) -> None:
    """Set each missing page key: from the URL when it has a valid value, else as kept, else the default.

    A key already in the session (its widget drawn on the last run) keeps its value, except
    on the first run after another page (Streamlit may have reset a widget that was not
    drawn meanwhile, so the kept value is the user's) and except a value outside the key's
    ``choices`` (left by another page's widget of the same name). Pages
    write their keys back with ``sync_url`` and :func:`keep` (``ui.compare.url_values``), so
    a view's settings survive a trip to another page and a link reopens them.

    Parameters
    ----------
    defaults : dict
        ``session key -> default`` (the key is also the URL parameter name).
    casts : dict, optional
        ``key -> callable`` turning the URL string into the value (default: the default's
        type; ``1``/``true`` for a bool).
    choices : dict, optional
        ``key -> allowed values``; a URL value outside them falls back to the default.
    url_names : dict, optional
        ``key -> URL parameter`` where the two differ (e.g. ``nb_k`` is ``k`` in the URL).
    bounds : dict, optional
        ``key -> (min, max)`` of a number: the bounds of its widget. A URL value outside
        is clamped; one that is not a finite number gives the default. Either way the
        page shows a one-line warning (:func:`ui.url_values.read_url_value`).
    """
    casts, choices, url_names, bounds = casts or {}, choices or {}, url_names or {}, bounds or {}
    st.session_state.setdefault(DECLARED, {}).setdefault(current_page(), {}).update({
        url_names.get(key, key): {"default": default, "bounds": bounds.get(key), "choices": choices.get(key)}
        for key, default in defaults.items()})
    kept = (st.session_state.get(KEPT) or {}).get(current_page(), {})
    entering = st.session_state.get(ENTERED, True)
    for key, default in defaults.items():
        # a value outside the choices was left by another page's widget of the same name
        held_elsewhere = key in choices and st.session_state.get(key) not in choices[key]
        if key in st.session_state and not (entering and key in kept) and not held_elsewhere:
            continue
        value = kept.get(key, default)
        name = url_names.get(key, key)
        raw = st.query_params.get(name)
        if raw is not None:
            value, note = read_url_value(name, raw, default, cast=casts.get(key), choices=choices.get(key),
                                         bounds=bounds.get(key))
            if note:
                st.warning(md(note))
        st.session_state[key] = value


def forget_stale_choice(key: str, options) -> None:
    """Drop a kept select-box value that is no longer among its options (e.g. a deleted run)."""
    if key in st.session_state and st.session_state[key] not in list(options):
        del st.session_state[key]


# --- the URL ----------------------------------------------------------------------------------


def sync_url(**extra: str) -> None:
    """Write the shared selection (and a page's own ``extra`` keys) into the URL."""
    spec = selection()
    values = {**spec.to_query(), "source": url_source(spec.source)}
    chosen = dict(zip(("model_a", "model_b"), st.session_state.get(MODELS) or (None, None)))
    for key in ("model_a", "model_b"):
        if chosen.get(key) is not None:  # parsed by the pickers on this run
            values[key] = chosen[key].to_query()
        elif st.session_state.get(key):  # kept for pages that take no model (or one)
            values[key] = url_model(st.session_state[key])
    options = spec.source_options
    values.update({k: v for k, v in extra.items() if v not in (None, "")})
    for key in UMLS_KEYS:  # UMLS options left over from an earlier source would only confuse a link
        if key not in options and key not in extra and key in st.query_params:
            del st.query_params[key]
    for key, value in values.items():
        if st.query_params.get(key) != value:
            st.query_params[key] = value


def set_url_param(key: str, value: str | None) -> None:
    """Write one page key into the URL, or take it out when ``value`` is empty.

    For keys whose absence means something (a cleared query, no concept chosen), where
    :func:`sync_url` would leave the last value behind.
    """
    if value:
        if st.query_params.get(key) != value:
            st.query_params[key] = value
    elif key in st.query_params:
        del st.query_params[key]



# --- the level selection ------------------------------------------------------------------------


def is_umls(source: str) -> bool:
    """Whether ``source`` names a UMLS release directory (so it takes the UMLS loader options).

    A path outside the data folders is not looked at (False): the policy comes before the disk.
    """
    try:
        return source_kind(server_paths.shared_source(source)) == "umls"
    except BiovizError:
        return False


def source_options() -> tuple:
    """Loader options of the selected source as sorted ``(name, value)`` pairs.

    Empty unless the source is a UMLS directory; then ``sab`` and ``hierarchy``, and
    ``semantic_group`` when one is chosen, exactly as ``load_source(**options)`` and a
    training job's ``source_options`` take them.
    """
    s = st.session_state
    if not is_umls(s["source"]):
        return ()
    options = {"sab": (s.get("sab") or "").strip() or DEFAULTS["sab"],
               "hierarchy": s.get("hierarchy") or DEFAULTS["hierarchy"]}
    if (s.get("semantic_group") or "").strip():
        options["semantic_group"] = s["semantic_group"].strip()
    return tuple(sorted(options.items()))


def selection() -> LevelSpec:
    """The shared level selection (hashable: ``ui.cache`` functions take it as their key).

    ``ui.cache.view(selection())`` is the level view :func:`current_view` shows.
    """
    s = st.session_state
    # A vectors file among the chosen models keeps only the names it covers, for both models.
    return LevelSpec(_canonical_source(s["source"]), root=s["root"], depth=int(s["depth"]),
                     synonyms=bool(s["synonyms"]), keep_ambiguous=bool(s["keep_ambiguous"]), options=source_options(),
                     covered_by=tuple(m.spec for m in vectors_models(s.get(MODELS) or ())))


def choose_source(source: str) -> None:
    """Make ``source`` (an uploaded file, a server path) the selected source, at its default root.

    A path is kept as the real path the policy checked (a refused one as typed: the page then
    shows the refusal). For widget callbacks: the sidebar's source widget already exists
    when a page's body runs.
    """
    st.session_state["source"] = _canonical_source(source)
    st.session_state["root"] = ""


def uploads_in_use() -> list[str]:
    """Uploads this session still uses (the selected source, files it stored): never removed to make room."""
    in_use = set(st.session_state.get(UPLOADS, ()))
    if st.session_state.get("source"):  # a source outside the uploads folder is never among them: harmless
        in_use.add(str(st.session_state["source"]))
    return sorted(in_use)


def remember_upload(path) -> None:
    """Record an upload this session stored (see :func:`uploads_in_use`)."""
    st.session_state.setdefault(UPLOADS, set()).add(str(path))


def _umls_options_widgets() -> None:
    """Vocabulary, semantic group and IS-A relations of a UMLS source (shown only for one)."""
    s = st.session_state
    sabs = list(COMMON_SABS) + ([s["sab"]] if s["sab"] not in COMMON_SABS else [])
    st.selectbox("UMLS vocabulary (SAB)", sabs, key="sab", accept_new_options=True,
                 help="Source vocabulary whose English names and relations are read; type any other SAB")
    groups = ["", *SEMANTIC_GROUPS] + ([s["semantic_group"]] if s["semantic_group"] not in ("", *SEMANTIC_GROUPS)
                                       else [])
    st.selectbox("Semantic group", groups, key="semantic_group", accept_new_options=True,
                 format_func=lambda g: g or "all concepts",
                 help="Keep only concepts of a semantic group (DISO = disorders, as in the papers) "
                      "or of a comma list of semantic types (T047,T191); needs MRSTY.RRF")
    st.radio("IS-A relations", list(HIERARCHIES), key="hierarchy", format_func=HIERARCHIES.get, horizontal=True,
             help="Take the hierarchy from MRREL's PAR/CHD relations, or from RELA = isa / inverse_isa")


def selection_sidebar() -> None:
    """Sidebar widgets for source, root and depth, bound to the shared session keys."""
    with st.sidebar:
        st.header("Ontology")
        choices = BUNDLED + ([st.session_state["source"]] if st.session_state["source"] not in BUNDLED else [])
        st.selectbox("Source", choices, key="source", format_func=source_display,
                     help="Bundled ontologies, or a file loaded on the home page")
        if is_umls(st.session_state["source"]):
            _umls_options_widgets()
        default_root = DEFAULT_ROOTS.get(st.session_state["source"], "")
        st.text_input("Root concept id", key="root", placeholder=default_root or "default root",
                      help="Classes are the concepts `depth` levels below this root; empty = the source's default")
        st.number_input("Depth", min_value=1, max_value=MAX_DEPTH, step=1, key="depth",
                        help="1 = the root's children are the classes (e.g. ICD-10 chapters)")
        st.toggle("Synonym sets (each concept its own class)", key="synonyms")
        st.toggle("Keep ambiguous names", key="keep_ambiguous",
                  help="Names found under several classes are dropped unless this is on")
    keep_form(SHARED, SHARED_KEYS)


def current_view() -> LevelView | None:
    """The level view for the shared selection, or None after showing a one-line error.

    The path policy is checked on every run, before the cached view is looked up, so a
    view cached while a folder was shared is not served once it is not.
    """
    spec = selection()
    try:
        server_paths.shared_source(spec.source)
        view = cache.view(spec)
        for found in cache.level_coverage(spec):  # every page that takes a vectors file says what it left out
            st.info(md(f"Vectors file {found.label}: {found.message()}."), icon=":material/scatter_plot:")
        return view
    except BiovizError as error:
        st.error(md(error))
        return None


# --- the models ----------------------------------------------------------------------------------


def model_choices() -> dict[str, str]:
    """``label -> MODEL string`` for the pickers: presets, then trained runs (newest first).

    Runs are offered by their readable labels (``residual · HPO d1 · 15-shot (ecd5)``), the
    whole run id where two would be equal (:func:`bioviz.models.runs.distinct_labels`).
    """
    choices = {name: name for name in PRESET_MODELS}
    for path, label in distinct_labels(list_runs()).items():
        choices[label] = str(path)
    for key in ("model_a", "model_b"):  # a model from the URL or typed earlier stays selectable
        value = st.session_state.get(key)
        if value and value not in choices.values():
            choices[url_model(value)] = value  # a path shown as the link carries it, never the server's path
    return choices


def _use_custom_model() -> None:
    """Make the model typed under "Other model…" the baseline or compared one (a button callback).

    The picker's own state is dropped too: it would otherwise choose its old label again.
    """
    custom = st.session_state.get("_custom_model", "").strip()
    key = "model_a" if st.session_state.get("_custom_slot") == "Baseline" else "model_b"
    trust(custom)  # the user's own choice: a hub id loads (and downloads) as they asked
    st.session_state[key] = _canonical_model(custom)
    st.session_state.pop(f"_{key}_label", None)


def model_pickers(models: str) -> tuple[ModelSpec | None, ModelSpec | None]:
    """Sidebar pickers for the baseline model (``model_a``) and the compared one (``model_b``).

    Parameters
    ----------
    models : str
        What the page takes (``ui.navigation``): ``NO_MODELS`` draws nothing,
        ``ONE_OR_TWO_MODELS`` a "Compare two models" switch (URL ``two``) first.

    Returns
    -------
    (model_a, model_b)
        The models, parsed once here (:func:`ui.models.usable_model`); ``model_b`` is None
        when the page takes one model. Pages read them back with :func:`chosen_models`.
    """
    if models == NO_MODELS:
        st.session_state[MODELS] = (None, None)
        return None, None
    two = True
    if models == ONE_OR_TWO_MODELS:
        page_params({TWO: True}, casts={TWO: lambda v: v != "0"}, url_names={TWO: "two"})
        two = st.sidebar.toggle("Compare two models", key=TWO)
        keep([TWO])
    choices = model_choices()
    labels = list(choices)
    by_value = {v: k for k, v in choices.items()}
    with st.sidebar:
        st.header("Models")
        for key, title in (("model_a", "Baseline model"), ("model_b", "Compared model (e.g. a trained run)"))[: 2 if two else 1]:
            current = by_value.get(st.session_state.get(key), labels[0])
            picked = st.selectbox(title, labels, index=labels.index(current), key=f"_{key}_label")
            st.session_state[key] = choices[picked]
        with st.popover("Other model…"):
            custom = st.text_input("Sentence-transformers directory, hub id or vectors file", key="_custom_model",
                                   placeholder="FremyCompany/BioLORD-2023")
            st.radio("Use as", ["Baseline", "Compared"], horizontal=True, key="_custom_slot")
            st.button("Use model", disabled=not custom.strip(), on_click=_use_custom_model)
        if two and st.session_state["model_a"] == st.session_state["model_b"]:
            st.warning("Baseline and compared model are the same: the two sides will not differ.")
    keep_form(SHARED, SHARED_KEYS)
    # Nothing loads a model before it passes the path policy and, for a hub id from a link,
    # the user's go-ahead to download it.
    chosen = (usable_model(st.session_state["model_a"], "model_a"),
              usable_model(st.session_state["model_b"], "model_b") if two else None)
    st.session_state[MODELS] = chosen
    return chosen


def chosen_models() -> tuple[ModelSpec, ModelSpec | None]:
    """``(model_a, model_b)`` as the sidebar's pickers chose them on this run (``model_b`` None: one model).

    :class:`ModelSpec` values, hashable: ``ui.cache`` functions take them as their key.
    """
    return st.session_state[MODELS]
