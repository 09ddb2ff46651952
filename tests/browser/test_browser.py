"""Real-browser test: the running app in headless Debian chromium, every page, with screenshots.

Starts ``streamlit run app.py`` on a free localhost port with a temporary BIOVIZ_HOME, opens
the home page and every page found in ``pages/`` (pages added later are picked up), waits
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
import socket
import subprocess
import sys
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
QUERY = os.environ.get("BIOVIZ_SCREENSHOT_QUERY", "source=icd10&root=XIX&depth=1&model_a=minilm&model_b=char-tfidf")
# Page-specific parameters that make a screenshot show something (pages not listed get none).
PAGE_QUERY = {"Neighbours": "query=fracture of neck of femur&k=8"}
# A button to press once a page is idle: the Evaluation page computes only on request, and
# its screenshot should show (and the test check) the results.
PAGE_BUTTON = {"Evaluation": "Run evaluation"}
PAGE_TIMEOUT_S = 420  # first visit embeds the level and compiles UMAP (numba) on a busy CPU
VIEWPORT = {"width": 1500, "height": 1250}
# Streamlit 1.67 draws st.error, st.exception and a failed element (ErrorElement) inside an
# alert container whose content carries the kind in its test id: stAlertContentError,
# stAlertContentWarning, stAlertContentInfo, stAlertContentSuccess. Only the first is a failure.
ERROR_ALERT = '[data-testid="stAlertContentError"]'

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def page_paths() -> list[tuple[str, str]]:
    """``(name, url path)`` of the home page and of every page file in ``pages/``, in nav order."""
    from streamlit.source_util import page_icon_and_name, page_sort_key

    pages = [("Home", "")]
    for script in sorted((ROOT / "pages").glob("*.py"), key=page_sort_key):
        _, name = page_icon_and_name(script)
        if name:
            pages.append((name, name))
    return pages


@contextmanager
def streamlit_app(script: str, home: str, log_dir: Path):
    """Run ``streamlit run <script>`` from the project root on a free port; yields its URL."""
    port = _free_port()
    env = {**os.environ, "BIOVIZ_HOME": home, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    log = open(log_dir / "streamlit.log", "w+")
    process = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", script, "--server.headless", "true",
         "--server.port", str(port), "--server.address", "127.0.0.1", "--browser.gatherUsageStats", "false",
         "--server.fileWatcherType", "none", "--client.toolbarMode", "viewer"],
        cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 120
        while time.time() < deadline:
            try:
                with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as reply:
                    if reply.status == 200:
                        break
            except OSError:
                time.sleep(0.5)
            if process.poll() is not None:
                break
        else:
            pytest.fail("streamlit did not start within 120 s")
        if process.poll() is not None:
            log.seek(0)
            pytest.fail(f"streamlit exited: {log.read()[-2000:]}")
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
        log.close()


def _require_browser() -> None:
    if not CHROMIUM.exists():
        pytest.skip("Debian chromium is not installed at /usr/bin/chromium (apt-get install -y chromium)")
    pytest.importorskip("playwright.sync_api", reason="playwright (python) is not installed")


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    _require_browser()
    home = os.environ.get("BIOVIZ_SCREENSHOT_HOME") or str(tmp_path_factory.mktemp("browser-home"))
    with streamlit_app("app.py", home, tmp_path_factory.mktemp("browser-log")) as url:
        yield url


@pytest.fixture(scope="module")
def shots(tmp_path_factory) -> Path:
    """Where screenshots go: ``BIOVIZ_SCREENSHOT_DIR`` (relative to the project) or a temp dir."""
    chosen = os.environ.get("BIOVIZ_SCREENSHOT_DIR")
    return (ROOT / chosen) if chosen else tmp_path_factory.mktemp("screenshots")


@pytest.fixture(scope="module")
def browser():
    _require_browser()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


def wait_until_idle(page, timeout_s: float = PAGE_TIMEOUT_S) -> None:
    """Wait until the script has finished: no running indicator, spinner or progress bar for 3 s."""
    page.wait_for_selector('[data-testid="stApp"]', timeout=60_000)
    busy = ('[data-testid="stStatusWidget"], [data-testid="stSpinner"], '
            '[data-testid="stProgress"], [data-testid="stSkeleton"]')
    deadline = time.time() + timeout_s
    quiet_since = None
    page.wait_for_timeout(1500)  # let the first script run start
    while time.time() < deadline:
        if page.locator(busy).count():
            quiet_since = None
        elif quiet_since is None:
            quiet_since = time.time()
        elif time.time() - quiet_since > 3:
            return
        page.wait_for_timeout(500)
    raise AssertionError(f"page still running after {timeout_s:.0f} s")


def page_problems(page) -> list[str]:
    """What on the page says the script failed: exceptions, tracebacks and error boxes (not warnings)."""
    problems = []
    exceptions = page.locator('[data-testid="stException"]')
    for i in range(exceptions.count()):
        problems.append(f"exception: {exceptions.nth(i).inner_text()[:500]}")
    if not exceptions.count() and "Traceback (most recent call last)" in page.inner_text("body"):
        problems.append("traceback")
    # An exception is drawn in an error alert too: count only the error boxes outside one.
    errors = page.locator(f'{ERROR_ALERT}:not([data-testid="stException"] *)')
    for i in range(errors.count()):
        problems.append(f"error: {errors.nth(i).inner_text()[:500]}")
    return problems


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
    with streamlit_app(str(script), str(tmp_path / "home"), tmp_path) as url:
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
        wait_until_idle(page)
        if name in PAGE_BUTTON:
            page.get_by_role("button", name=PAGE_BUTTON[name]).click()
            wait_until_idle(page)
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
