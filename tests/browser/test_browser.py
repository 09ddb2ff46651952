"""Real-browser test: the running app in headless Debian chromium, every page, with screenshots.

Starts ``streamlit run app.py`` on a free localhost port with a temporary BIOVIZ_HOME, opens
every page the router lists (``ui.navigation.PAGES``: pages added later are picked up), waits
until each has finished running, checks it shows no exception, traceback or error box
(``st.error``; warnings and infos are fine), and saves a screenshot ``<page>.png`` and its
first figure ``<page>-figure.png``. They go to a temporary directory, so a test run never
touches the repository; ``BIOVIZ_SCREENSHOT_DIR=docs/screenshots`` refreshes the ones the
README shows.

The level shown is small enough to embed and project in a few minutes on two cores:
ICD-10 chapter XIX (injuries), its 21 blocks as classes. Set ``BIOVIZ_SCREENSHOT_QUERY``
(e.g. ``source=icd10&depth=1``) to take the screenshots of another view, and
``BIOVIZ_SCREENSHOT_HOME`` to reuse a home whose vectors are already cached.
"""

from __future__ import annotations

import os

import pytest

from tests.browser.support import page_problems, streamlit_app, wait_until_idle

QUERY = os.environ.get("BIOVIZ_SCREENSHOT_QUERY", "source=icd10&root=XIX&depth=1&model_a=minilm&model_b=char-tfidf")
# Page-specific parameters that make a screenshot show something (pages not listed get none).
PAGE_QUERY = {"Neighbours": "query=fracture of neck of femur&k=8"}
# A button to press once a page is idle: the Evaluation page computes only on request, and
# its screenshot should show (and the test check) the results.
PAGE_BUTTON = {"Evaluation": "Run evaluation"}
PAGE_TIMEOUT_S = 420  # first visit embeds the level and compiles UMAP (numba) on a busy CPU
VIEWPORT = {"width": 1500, "height": 1250}

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def page_paths() -> list[tuple[str, str]]:
    """``(name, url path)`` of every page the router lists (``ui.navigation.PAGES``), in nav order."""
    from ui.navigation import PAGES

    return [(page.title, page.url_path) for page in PAGES]


ALERTS_APP = """
import streamlit as st
st.title("alerts")
st.warning("a warning")
st.info("an info")
st.success("a success")
st.toast("a toast")
if st.query_params.get("fail") == "error":
    st.error("an error box")
if st.query_params.get("fail") == "exception":
    st.exception(ValueError("an exception"))
"""


def test_page_problems_are_errors_and_exceptions_but_not_warnings(browser, tmp_path):
    script = tmp_path / "alerts_app.py"
    script.write_text(ALERTS_APP)
    with streamlit_app(tmp_path / "home", tmp_path / "alerts.log", script=str(script)) as url:
        page = browser.new_page(viewport=VIEWPORT)
        found = {}
        for fail in ("none", "error", "exception"):
            page.goto(f"{url}/?fail={fail}", wait_until="domcontentloaded")
            wait_until_idle(page, 60)
            assert page.locator('[data-testid="stAlertContentWarning"]').count() == 1  # the page did render
            found[fail] = page_problems(page)
        page.close()
    assert found["none"] == []
    assert found["error"] == ["error: an error box"]
    assert len(found["exception"]) == 1 and found["exception"][0].startswith("exception:")
    assert "an exception" in found["exception"][0]


def test_every_page_renders_without_exception_and_is_screenshotted(server, browser, shots):
    shots.mkdir(parents=True, exist_ok=True)
    page = browser.new_page(viewport=VIEWPORT, device_scale_factor=1)
    problems = []
    visited = []
    for name, path in page_paths():
        extra = f"&{PAGE_QUERY[name]}" if name in PAGE_QUERY else ""
        page.goto(f"{server}/{path}?{QUERY}{extra}", wait_until="domcontentloaded")
        wait_until_idle(page, PAGE_TIMEOUT_S)
        if name in PAGE_BUTTON:
            page.get_by_role("button", name=PAGE_BUTTON[name]).click()
            wait_until_idle(page, PAGE_TIMEOUT_S)
        # Plotly draws after the script finishes; give every chart its SVG before the shot
        # (charts in a closed tab or expander are attached but hidden).
        charts = page.locator('[data-testid="stPlotlyChart"]')
        for i in range(charts.count()):
            charts.nth(i).locator(".main-svg").first.wait_for(state="attached", timeout=60_000)  # may sit in a closed tab
        page.wait_for_timeout(1000)
        problems += [f"{name}: {problem}" for problem in page_problems(page)]
        page.screenshot(path=str(shots / f"{(path or 'home').lower()}.png"))
        if charts.count() and charts.first.is_visible():
            # The page's main figure on its own, whole even where it runs below the fold.
            charts.first.screenshot(path=str(shots / f"{(path or 'home').lower()}-figure.png"))
        visited.append(name)
    page.close()
    assert not problems, problems
    assert len(visited) == len(page_paths()) >= 4
    for name, path in page_paths():
        assert (shots / f"{(path or 'home').lower()}.png").stat().st_size > 10_000
