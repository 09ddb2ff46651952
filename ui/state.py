"""The selection shared by every page (source, root, depth, UMLS options, models) and its URL form.

The selection lives in ``st.session_state`` (initialised once) and is mirrored in
``st.query_params`` so a link reopens the same view. Pages call :func:`selection_sidebar`
to show and edit it, then :func:`current_view` to get the level view.
"""

from __future__ import annotations

import streamlit as st

from bioviz.errors import BiovizError
from bioviz.ontology import LevelSpec, list_sources
from bioviz.ontology.levels import LevelView
from bioviz.ontology.sources import source_kind
from bioviz.ontology.umls import COMMON_SABS, DEFAULT_SAB, HIERARCHIES, SEMANTIC_GROUPS
from bioviz.models.runs import list_runs
from ui import cache

BUNDLED = [s["name"] for s in list_sources() if s["kind"] == "bundled"]
DEFAULTS = {"source": "icd10", "root": "", "depth": 1, "synonyms": False, "keep_ambiguous": False,
            "model_a": "minilm", "model_b": "char-tfidf",
            "sab": DEFAULT_SAB, "semantic_group": "", "hierarchy": "parchd"}
PRESET_MODELS = ["minilm", "char-tfidf"]
# Loader options of a UMLS source (session key = URL parameter = load_umls argument).
UMLS_KEYS = ("sab", "semantic_group", "hierarchy")
SHARED_KEYS = ("source", "root", "depth", "synonyms", "keep_ambiguous", "model_a", "model_b", *UMLS_KEYS)
SAVED = "_bioviz_selection"  # a copy of SHARED_KEYS under a key no widget is bound to
FORMS = "_bioviz_forms"  # page -> {widget key: value}: form values kept across page visits
DEFAULT_ROOTS = {s["name"]: s["default_root"] for s in list_sources() if s["kind"] == "bundled"}


PAGE, ENTERED = "_bioviz_page", "_bioviz_entered_page"  # the page of the last run; whether this run changed it

def _from_url() -> dict:
    """The shared selection as the URL (or the defaults) gives it: session key -> value."""
    params = st.query_params
    spec = LevelSpec.from_query(params.to_dict(), default_source=DEFAULTS["source"])
    options = spec.source_options
    hierarchy = options.get("hierarchy", DEFAULTS["hierarchy"])
    return {
        "source": spec.source, "root": spec.root or "", "depth": spec.depth, "synonyms": spec.synonyms,
        "keep_ambiguous": spec.keep_ambiguous,
        "model_a": params.get("model_a", DEFAULTS["model_a"]),
        "model_b": params.get("model_b", DEFAULTS["model_b"]),
        "sab": options.get("sab", "").strip() or DEFAULTS["sab"],
        "semantic_group": options.get("semantic_group", DEFAULTS["semantic_group"]),
        "hierarchy": hierarchy if hierarchy in HIERARCHIES else DEFAULTS["hierarchy"],
    }


def _save() -> None:
    """Keep a plain copy of the shared keys that no widget owns (see :func:`init_state`)."""
    st.session_state[SAVED] = {key: st.session_state[key] for key in SHARED_KEYS if key in st.session_state}


def init_state() -> None:
    """Initialise the shared keys once per session, from the URL when it has them.

    Call it first thing on every page, before any widget is created.
    """
    _note_page()
    if st.session_state.get("_bioviz_init"):
        # Re-assigning detaches the keys from the previous page's widgets, which Streamlit
        # would otherwise forget on a page switch. A key may be gone already: when a
        # fragment with run_every (the Train page's job table) reruns as the user leaves
        # its page, Streamlit drops the widget-bound keys of the page being left
        # (streamlit#10805). Those come back from the copy saved on the last run.
        saved = st.session_state.get(SAVED) or {}
        initial = None
        for key in SHARED_KEYS:
            if key in st.session_state:
                st.session_state[key] = st.session_state[key]
            elif key in saved:
                st.session_state[key] = saved[key]
            else:
                initial = initial or _from_url()
                st.session_state[key] = initial[key]
        _save()
        return
    st.session_state.update(_from_url())
    st.session_state["_bioviz_init"] = True
    _save()


def _note_page() -> None:
    """Record whether this run is the first on its page since another page ran."""
    from streamlit.runtime.scriptrunner import get_script_run_ctx

    ctx = get_script_run_ctx()
    page = getattr(ctx, "page_script_hash", None)
    st.session_state[ENTERED] = st.session_state.get(PAGE) != page
    st.session_state[PAGE] = page


def entered_page() -> bool:
    """True on the first run of a page after another page (or at the start of the session).

    Streamlit resets a widget that was not drawn while the user was on another page; values
    kept from the last visit (:func:`ui.compare.init_params`) take over on such a run.
    """
    return bool(st.session_state.get(ENTERED, True))


def restore_form(page: str) -> None:
    """Put back a page's form values that Streamlit dropped when the user left the page.

    Streamlit forgets the state of widgets not drawn on a run, so a form would come back
    with its defaults after a visit to another page. Call before the form's widgets are
    created; :func:`keep_form` records them.
    """
    for key, value in (st.session_state.get(FORMS) or {}).get(page, {}).items():
        if key not in st.session_state:
            st.session_state[key] = value


def forget_stale_choice(key: str, options) -> None:
    """Drop a kept select-box value that is no longer among its options (e.g. a deleted run)."""
    if key in st.session_state and st.session_state[key] not in list(options):
        del st.session_state[key]


def keep_form(page: str, keys: tuple[str, ...] = (), prefixes: tuple[str, ...] = ()) -> None:
    """Record the current values of a page's form widgets (value widgets only, never buttons)."""
    forms = st.session_state.setdefault(FORMS, {})
    forms[page] = {k: v for k, v in st.session_state.items()
                   if isinstance(k, str) and (k in keys or k.startswith(prefixes))}


def _ensure_init() -> None:
    """Initialise if a page forgot to; never re-binds keys (widgets may exist already)."""
    if not st.session_state.get("_bioviz_init"):
        init_state()


def sync_url(**extra: str) -> None:
    """Write the shared selection (and a page's own ``extra`` keys) into the URL."""
    spec = selection()
    values = spec.to_query()
    for key in ("model_a", "model_b"):
        if st.session_state.get(key):
            values[key] = st.session_state[key]
    options = spec.source_options
    _save()
    values.update({k: v for k, v in extra.items() if v not in (None, "")})
    for key in UMLS_KEYS:  # UMLS options left over from an earlier source would only confuse a link
        if key not in options and key not in extra and key in st.query_params:
            del st.query_params[key]
    for key, value in values.items():
        if st.query_params.get(key) != value:
            st.query_params[key] = value


def is_umls(source: str) -> bool:
    """Whether ``source`` names a UMLS release directory (so it takes the UMLS loader options)."""
    try:
        return source_kind(source) == "umls"
    except BiovizError:
        return False


def source_options() -> tuple:
    """Loader options of the selected source as sorted ``(name, value)`` pairs (hashable, for ``ui.cache``).

    Empty unless the source is a UMLS directory; then ``sab`` and ``hierarchy``, and
    ``semantic_group`` when one is chosen, exactly as ``load_source(**options)`` and a
    training job's ``source_options`` take them.
    """
    _ensure_init()
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
    _ensure_init()
    s = st.session_state
    return LevelSpec(s["source"], root=s["root"], depth=int(s["depth"]), synonyms=bool(s["synonyms"]),
                     keep_ambiguous=bool(s["keep_ambiguous"]), options=source_options())


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


def selection_sidebar() -> None:
    """Sidebar widgets for source, root and depth, bound to the shared session keys."""
    _ensure_init()
    with st.sidebar:
        st.header("Ontology")
        choices = BUNDLED + ([st.session_state["source"]] if st.session_state["source"] not in BUNDLED else [])
        st.selectbox("Source", choices, key="source", help="Bundled ontologies, or a file loaded on the home page")
        if is_umls(st.session_state["source"]):
            _umls_options_widgets()
        default_root = DEFAULT_ROOTS.get(st.session_state["source"], "")
        st.text_input("Root concept id", key="root", placeholder=default_root or "default root",
                      help="Classes are the concepts `depth` levels below this root; empty = the source's default")
        st.number_input("Depth", min_value=1, max_value=12, step=1, key="depth",
                        help="1 = the root's children are the classes (e.g. ICD-10 chapters)")
        st.toggle("Synonym sets (each concept its own class)", key="synonyms")
        st.toggle("Keep ambiguous names", key="keep_ambiguous",
                  help="Names found under several classes are dropped unless this is on")
    _save()


def current_view() -> LevelView | None:
    """The level view for the shared selection, or None after showing a one-line error."""
    try:
        return cache.view(selection())
    except BiovizError as error:
        st.error(str(error))
        return None


def model_choices() -> dict[str, str]:
    """``label -> MODEL string`` for the pickers: presets, then trained runs (newest first)."""
    choices = {name: name for name in PRESET_MODELS}
    for run in list_runs():
        choices[run.label] = str(run.path)
    for key in ("model_a", "model_b"):  # a model from the URL or typed earlier stays selectable
        value = st.session_state.get(key)
        if value and value not in choices.values():
            choices[value] = value
    return choices


def model_pickers(two: bool = True) -> tuple[str, str | None]:
    """Sidebar pickers for the baseline model (``model_a``) and the compared one (``model_b``).

    Returns
    -------
    (model_a, model_b)
        MODEL strings; ``model_b`` is None when ``two`` is False.
    """
    _ensure_init()
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
            custom = st.text_input("Sentence-transformers directory or hub id", key="_custom_model",
                                   placeholder="FremyCompany/BioLORD-2023")
            slot = st.radio("Use as", ["Baseline", "Compared"], horizontal=True, key="_custom_slot")
            if st.button("Use model", disabled=not custom.strip()):
                st.session_state["model_a" if slot == "Baseline" else "model_b"] = custom.strip()
                st.rerun()
        if two and st.session_state["model_a"] == st.session_state["model_b"]:
            st.warning("Baseline and compared model are the same: the two sides will not differ.")
    _save()
    return st.session_state["model_a"], (st.session_state["model_b"] if two else None)
