"""Issue 27: at 1440 x 900 no page scrolls sideways, no table scrolls sideways, no metric tile is cut.

Opens Home, Train, Evaluation (after a run) and Code terms (after a coding) in headless chromium
at 1440 x 900 with the sidebar open and reads, in the browser,

- the document's and the main area's ``scrollWidth`` against their ``clientWidth`` (a page wider
  than the window scrolls sideways),
- each ``st.dataframe``'s scroller (a table whose columns are wider than its frame scrolls
  sideways inside it, hiding its last columns),
- each metric tile's label and value (Streamlit cuts a long value with an ellipsis: ``1636 ± ...``).

The models are char-tfidf (no transformer to load) on ICD-10 chapter XIX's blocks: long names,
thousands of them, coded and evaluated in seconds.
"""

from __future__ import annotations

import pytest

from tests.browser.support import MEASURE_JS, page_problems, wait_until_idle

pytestmark = [pytest.mark.browser, pytest.mark.slow]

VIEWPORT = {"width": 1440, "height": 900}
LEVEL = "source=icd10&root=XIX&depth=1&model_a=char-tfidf&model_b=char-tfidf"
# Rounding of sub-pixel layout: a box 1 px wider than its frame scrolls nothing a reader sees.
SLACK_PX = 1



def code_terms(page) -> None:
    page.locator('[data-testid="stTextArea"] textarea').first.fill("fracture of neck of femur\nS72.0\nbent fifth finger\nburn of hand")
    page.get_by_role("button", name="Code the terms").click()


def run_evaluation(page) -> None:
    page.get_by_role("button", name="Run evaluation").click()


# (page path, extra query, action once idle, the fewest tables and tiles the page must show)
PAGES = {
    "Home": ("", None, 2, 6),
    "Train": ("Train", None, 0, 1),
    "Evaluation": ("Evaluation", run_evaluation, 1, 0),
    "Code terms": ("Code_terms", code_terms, 1, 5),
}


@pytest.mark.parametrize("name", list(PAGES))
def test_nothing_scrolls_sideways_or_is_cut_at_1440(server, browser, name):
    path, action, tables, tiles = PAGES[name]
    extra = ""  # every page with its defaults: Evaluation runs its default tasks and benchmarks
    page = browser.new_page(viewport=VIEWPORT, device_scale_factor=1)
    try:
        page.goto(f"{server}/{path}?{LEVEL}{extra}", wait_until="domcontentloaded")
        wait_until_idle(page)
        if action is not None:
            action(page)
            wait_until_idle(page)
        assert not page_problems(page), page_problems(page)
        page.wait_for_timeout(1000)  # the grids size their columns after the first frame
        measured = page.evaluate(MEASURE_JS, SLACK_PX)
    finally:
        page.close()
    assert not measured["problems"], "\n".join(measured["problems"])
    assert measured["tables"] >= tables and measured["tiles"] >= tiles, measured  # what was checked was drawn
