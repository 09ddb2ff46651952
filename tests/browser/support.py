"""What the real-browser tests share: start the app with ``streamlit run``, drive Debian chromium.

``streamlit_app(home, log_path)`` runs ``streamlit run app.py`` on a free localhost port with
``BIOVIZ_HOME=home`` and yields its URL; ``chromium()`` launches the headless browser with
the project's flags; ``wait_until_idle(page)`` waits until a page's script has finished;
``page_problems(page)`` lists its exceptions and error boxes.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
BUSY = ('[data-testid="stStatusWidget"], [data-testid="stSpinner"], '
        '[data-testid="stProgress"], [data-testid="stSkeleton"]')
# Streamlit 1.67 draws st.error, st.exception and a failed element (ErrorElement) inside an
# alert container whose content carries the kind in its test id: stAlertContentError,
# stAlertContentWarning, stAlertContentInfo, stAlertContentSuccess. Only the first is a failure.
ERROR_ALERT = '[data-testid="stAlertContentError"]'


def require_browser() -> None:
    """Skip the calling test when Debian chromium or playwright is missing."""
    if not CHROMIUM.exists():
        pytest.skip("Debian chromium is not installed at /usr/bin/chromium (apt-get install -y chromium)")
    pytest.importorskip("playwright.sync_api", reason="playwright (python) is not installed")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextlib.contextmanager
def streamlit_app(home: str | Path, log_path: Path, env: dict[str, str] | None = None,
                  start_timeout_s: float = 120, script: str = "app.py") -> Iterator[str]:
    """Run ``streamlit run <script>`` (the app by default) on a free localhost port; yield its URL.

    ``BIOVIZ_HOME=home``; the server's output goes to ``log_path``; the test fails with its
    tail if it does not start.
    """
    port = free_port()
    # tests/data is shared with the app (BIOVIZ_DATA_DIRS): the flows open its files as server paths.
    full_env = {**os.environ, "BIOVIZ_HOME": str(home), "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false",
                "BIOVIZ_DATA_DIRS": str(ROOT / "tests" / "data"), **(env or {})}
    with open(log_path, "w+") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "streamlit", "run", script, "--server.headless", "true",
             "--server.port", str(port), "--server.address", "127.0.0.1", "--browser.gatherUsageStats", "false",
             "--server.fileWatcherType", "none", "--client.toolbarMode", "viewer"],
            cwd=ROOT, env=full_env, stdout=log, stderr=subprocess.STDOUT,
        )
        url = f"http://127.0.0.1:{port}"
        try:
            deadline = time.time() + start_timeout_s
            while time.time() < deadline and process.poll() is None:
                try:
                    with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as reply:
                        if reply.status == 200:
                            break
                except OSError:
                    time.sleep(0.5)
            else:
                log.seek(0)
                pytest.fail(f"streamlit did not start within {start_timeout_s:.0f} s: {log.read()[-2000:]}")
            yield url
        finally:
            process.terminate()
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()


@contextlib.contextmanager
def chromium():
    """Headless Debian chromium under playwright (a ``Browser``)."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


def wait_until_idle(page, timeout_s: float = 420, quiet_s: float = 3) -> float:
    """Wait until the script has finished: no running indicator, spinner or progress bar for ``quiet_s``.

    Returns
    -------
    float
        Seconds from the call until the page was last seen busy (its render time, when
        called right after a navigation or an input).
    """
    start = time.time()
    page.wait_for_selector('[data-testid="stApp"]', timeout=60_000)
    deadline = start + timeout_s
    quiet_since = None
    last_busy = start
    page.wait_for_timeout(1500)  # let the first script run start
    while time.time() < deadline:
        if page.locator(BUSY).count():
            quiet_since = None
            last_busy = time.time()
        elif quiet_since is None:
            quiet_since = time.time()
        elif time.time() - quiet_since > quiet_s:
            return last_busy - start
        page.wait_for_timeout(250)
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


# What scrolls sideways or is cut in the page (issue 27): the document and main frames, each
# st.dataframe's scroller and each metric tile; ``page.evaluate(MEASURE_JS, slack_px)``.
MEASURE_JS = """
(slack) => {
  const over = (el) => el.scrollWidth - el.clientWidth > slack;
  const out = [];
  const frames = [['document', document.scrollingElement || document.documentElement],
                  ...['stApp', 'stAppViewContainer', 'stMain', 'stMainBlockContainer'].map(
                    (id) => [id, document.querySelector(`[data-testid="${id}"]`)])];
  for (const [name, el] of frames) {
    if (el && over(el)) out.push(`${name} scrolls sideways: ${el.scrollWidth} > ${el.clientWidth} px`);
  }
  document.querySelectorAll('[data-testid="stDataFrame"]').forEach((table, i) => {
    const scroller = table.querySelector('.dvn-scroller');
    if (scroller && over(scroller)) {
      out.push(`table ${i + 1} scrolls sideways: ${scroller.scrollWidth} > ${scroller.clientWidth} px`);
    }
  });
  document.querySelectorAll('[data-testid="stMetric"]').forEach((metric) => {
    for (const part of metric.querySelectorAll('[data-testid="stMetricValue"], [data-testid="stMetricValue"] *, '
                                               + '[data-testid="stMetricLabel"] p, [data-testid="stMetricLabel"] div')) {
      if (over(part) && part.textContent.trim()) {
        out.push(`tile "${metric.innerText.replace(/\\s+/g, ' ').trim()}" is cut: ${part.scrollWidth} > ${part.clientWidth} px`);
        break;
      }
    }
  });
  return {problems: out, tables: document.querySelectorAll('[data-testid="stDataFrame"]').length,
          tiles: document.querySelectorAll('[data-testid="stMetric"]').length};
}
"""
