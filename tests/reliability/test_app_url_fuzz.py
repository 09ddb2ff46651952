"""A link can carry anything: every URL parameter of every page, at hostile values, never crashes a page.

Each parameter a page reads is set below its minimum, above its maximum, huge, NaN,
unicode (RTL override, zero-width, NUL, CJK, digits of other scripts) and markdown/HTML; a
page must answer with its view or one-line messages: no exception, no traceback. One
session per bad value, all of a page's parameters bad at once, on a tiny ontology with the
bundled model; UMAP is replaced by PCA (the URL handling is under test, not UMAP's first
compilation).
"""

from __future__ import annotations

import pytest

from test_app_support import DATA, no_traceback, open_app, share
from ui.navigation import PAGES

# Longer than any text the app keeps (ui.url_values.MAX_URL_TEXT), yet all of a page's parameters
# together stay under the 512K characters of a query string Streamlit reads at all.
HUGE_TEXT = "x" * 20_000
UNICODE = "\u202eevil\u200b 🧬 中文 \x00 é"
MARKDOWN = "![x](http://127.0.0.1:9/x.png) [link](http://127.0.0.1:9) <script>alert(1)</script> **b** :red[r] $x$ # h"


def number_values(low, high) -> list[str]:
    """Below the minimum, above the maximum, huge, NaN, unicode, markdown: for a number in ``[low, high]``."""
    return [str(low - 1), str(high + 1), "9" * 40, "nan", "\u0663\u0663 " + UNICODE, MARKDOWN]


# Six bad values of each kind of parameter, in the order above (huge, NaN, unicode, markdown...).
CHOICE = ["-1", "", HUGE_TEXT, "nan", UNICODE, MARKDOWN]
TEXT = ["-1", "", HUGE_TEXT, "nan", UNICODE, MARKDOWN]
BOOL = ["-1", "2", HUGE_TEXT, "nan", UNICODE, MARKDOWN]

# The parameters each page reads (page_params, and what it reads from st.query_params itself),
# with the bad values each meets. Lists of valid values steer a page into a branch.
PAGE_PARAMETERS = {
    "app_pages/0_Home.py": {},
    "app_pages/1_Train.py": {"job": TEXT},
    "app_pages/2_Projection.py": {
        "method": CHOICE, "dims": CHOICE, "nn": number_values(2, 100),
        "md": number_values(0.0, 0.99), "cap": number_values(10, 5_000_000), "shots": number_values(1, 500),
        "measure": CHOICE, "hl": TEXT, "map": BOOL, "mv_class": TEXT, "mv_n": number_values(10, 400), "one": BOOL},
    "app_pages/3_Similarity_matrix.py": {
        "from": ["class"] * 6 + ["typed", "concept", MARKDOWN], "example": CHOICE, "terms": TEXT, "cls": TEXT,
        "limit": number_values(2, 60), "concept": TEXT, "order": CHOICE, "colour": CHOICE},
    "app_pages/4_Neighbours.py": {
        "query": ["heart attack", *TEXT], "among": CHOICE, "k": number_values(1, 100), "restrict": BOOL,
        "image": CHOICE, "two": BOOL, "concept": TEXT, "ranking": CHOICE, "expand": BOOL},
    "app_pages/5_Hierarchy.py": {
        "kind": CHOICE, "colour": ["none", *CHOICE], "levels": number_values(1, 100), "node": TEXT, "mention": TEXT},
    "app_pages/6_Evaluation.py": {
        "eval_tasks": ["ranking", "ranking", *TEXT], "eval_bench": ["mayosrs", "mayosrs", *TEXT],
        "eval_shots": number_values(1, 1000), "eval_seed": number_values(0, 10_000), "eval_tpc": number_values(1, 50),
        "eval_zero": number_values(0.0, 10_000.0), "eval_own": BOOL, "eval_cross": ["1", "", *TEXT],
        "eval_boot": number_values(0, 10_000), "eval_models": TEXT},
    "app_pages/7_Code_terms.py": {"k": number_values(1, 50), "input": CHOICE, "two": BOOL, "ranking": CHOICE,
                                 "expand": BOOL},
}
# The level selection and the models: read by every page.
SHARED_PARAMETERS = {
    "source": TEXT + ["/etc/passwd", "../../etc/passwd"], "root": TEXT, "depth": number_values(1, 12),
    "synonyms": BOOL, "keep_ambiguous": BOOL, "sab": TEXT, "semantic_group": TEXT, "hierarchy": CHOICE,
    "model_a": TEXT + ["/etc", "someone/huge-repo"], "model_b": TEXT + ["/proc/self", "../x"],
}
LEVEL = {"source": str(DATA / "mini.obo"), "depth": "1", "model_a": "minilm", "model_b": "minilm"}


def link(parameters: dict, round_: int) -> dict[str, str]:
    """Round ``round_``'s value of each parameter (lists shorter than the rounds start again)."""
    return {name: values[round_ % len(values)] for name, values in parameters.items()}


def rounds(parameters: dict) -> int:
    """Sessions a page needs so that every parameter meets each of its values."""
    return max((len(values) for values in parameters.values()), default=1)


@pytest.fixture(scope="module")
def fuzz_home(tmp_path_factory):
    """One BIOVIZ_HOME for the module: the tiny source is parsed and its names encoded once."""
    return tmp_path_factory.mktemp("fuzz-home")


@pytest.fixture
def app_env(fuzz_home, monkeypatch, fake_eval_models):
    """The fuzz home, tests/data shared, PCA standing in for UMAP, trigram models in evaluations."""
    from bioviz.views import projection

    monkeypatch.setenv("BIOVIZ_HOME", str(fuzz_home))
    share(monkeypatch, DATA)
    monkeypatch.setattr(projection, "umap_coordinates",
                        lambda vectors, params: projection.pca_coordinates(vectors, params.n_components, params.seed))


def assert_calm(at, where) -> None:
    """No exception and no traceback; every message one line."""
    no_traceback(at)
    messages = [m.value for kind in ("error", "warning", "info") for m in getattr(at, kind)]
    assert all("\n" not in m and "Traceback" not in m for m in messages), (where, messages)


@pytest.mark.parametrize("page", list(PAGE_PARAMETERS))
def test_every_page_parameter_at_hostile_values(app_env, page):
    parameters = PAGE_PARAMETERS[page]
    url_path = next(p.url_path for p in PAGES if p.script == page)
    evaluated = 0
    for round_ in range(rounds(parameters)):
        at = open_app(page, {**LEVEL, **link(parameters, round_)}, timeout=180).run()
        assert_calm(at, (page, round_))
        run_button = [b for b in at.button if b.label == "Run evaluation" and not b.disabled]
        if run_button:  # the evaluation itself, with the clamped settings (trigram models: quick)
            run_button[0].click().run()
            assert_calm(at, (page, round_, "evaluated"))
            evaluated += bool(at.dataframe)
        declared = set(at.session_state["_bioviz_url_params"].get(url_path, {})) \
            if "_bioviz_url_params" in at.session_state else set()
        assert declared <= set(parameters), f"{page} reads {declared - set(parameters)}: add them to the fuzz"
    assert evaluated or page != "app_pages/6_Evaluation.py", "the clamped settings were evaluated at least once"


@pytest.mark.parametrize("page", ["app_pages/0_Home.py", "app_pages/4_Neighbours.py"])
def test_the_shared_selection_and_models_at_hostile_values(app_env, page):
    for round_ in range(rounds(SHARED_PARAMETERS)):
        at = open_app(page, link(SHARED_PARAMETERS, round_), timeout=180).run()
        assert_calm(at, (page, round_))


def test_the_reported_crashes_are_clamped_with_a_warning(app_env):
    at = open_app("app_pages/2_Projection.py", {**LEVEL, "method": "pca", "nn": "100000", "md": "5"}).run()
    assert_calm(at, "projection")
    assert (at.slider(key="nn").value, at.slider(key="md").value) == (100, 0.99)
    assert any("nn='100000' is above 100" in w.value for w in at.warning)
    at = open_app("app_pages/2_Projection.py", {**LEVEL, "method": "pca", "nn": "1", "md": "inf"}).run()
    assert_calm(at, "projection nn=1")
    assert (at.slider(key="nn").value, at.slider(key="md").value) == (2, 0.1)
    at = open_app("app_pages/3_Similarity_matrix.py", {**LEVEL, "from": "class", "limit": "1000"}).run()
    assert_calm(at, "similarity")
    assert at.slider(key="limit").value == 60 and at.get("plotly_chart")
