"""A second visit to the Projection page in the running app: how long, and where the time goes.

Starts ``streamlit run app.py`` on a BIOVIZ_HOME whose vectors and UMAP layouts are already
cached (run it once to fill them: the first visit embeds and projects), opens the page with
``--query`` in headless Debian chromium, then ``--visits`` times clicks *Home* in the sidebar
navigation and back on *Projection*, and measures from the click:

- ``script_s``: until the server says the page script finished (``script_finished``);
- ``chart_msg_s``: until the websocket message with the projection figure arrived, and its
  size (a reference hash of a few bytes when the browser still holds the identical figure
  from the previous visit: Streamlit caches large messages by content);
- ``drawn_s``: until plotly.js has drawn the UMAP figure (the first animation frame in which
  the figure's WebGL canvas exists with all traces; what a person sees);
- ``runs``: page-script runs the visit caused (``new_session`` messages).

Then it opens the page in a new tab (the frontend boots first) and takes a Chrome CPU
profile of one more revisit, reporting the browser's busy time by script (plotly.js vs
Streamlit's own frontend).

Usage::

    BIOVIZ_HOME=/tmp/home python benchmarks/bench_revisit.py \\
        --query "source=hpo&root=HP:0000118&depth=1&model_a=minilm&model_b=/tmp/home/runs/hpo-residual&cap=20000"
"""

from __future__ import annotations

import argparse
import json
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
FIND_NAV = ("p => [...document.querySelectorAll('[data-testid=\"stSidebarNav\"] a')]"
            ".find(a => new URL(a.href).pathname === '/' + p)")
# Polls every animation frame for the UMAP figure: title, every trace laid out, WebGL canvas.
WATCH = """
window.__drawn = [];
(function watch() {
  for (const gd of document.querySelectorAll('.js-plotly-plot')) {
    const title = String(gd.layout?.title?.text ?? '').replace(/<[^>]*>/g, '');
    const ready = title.startsWith('UMAP') && gd._fullData && gd.data && gd._fullData.length === gd.data.length
      && gd.querySelector('.gl-container canvas');
    if (ready && !gd.__seen) { gd.__seen = true; window.__drawn.push(performance.now()); }
  }
  requestAnimationFrame(watch);
})();
"""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_app(port: int, log) -> subprocess.Popen:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    process = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", "app.py", "--server.headless", "true", "--server.port", str(port),
         "--server.address", "127.0.0.1", "--browser.gatherUsageStats", "false", "--server.fileWatcherType", "none"],
        cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    for _ in range(240):
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=2):
                return process
        except OSError:
            time.sleep(0.5)
    process.kill()
    raise SystemExit("streamlit did not start")


class Frames:
    """ForwardMsgs received by the page, with arrival times (perf_counter)."""

    def __init__(self, page):
        from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

        self.msgs = []
        self._parse = ForwardMsg.FromString
        page.on("websocket", lambda ws: ws.on("framereceived", self._frame))

    def _frame(self, payload) -> None:
        if isinstance(payload, str):
            return
        msg = self._parse(payload)
        kind = msg.WhichOneof("type")
        chart = kind == "delta" and msg.delta.WhichOneof("type") == "new_element" \
            and msg.delta.new_element.WhichOneof("type") == "plotly_chart" \
            and re.search(r'"text":\s*"UMAP', msg.delta.new_element.plotly_chart.spec) is not None
        self.msgs.append((time.perf_counter(), kind, len(payload), chart))

    def since(self, t0: float) -> list:
        return [m for m in self.msgs if m[0] >= t0]


def wait_idle(page, timeout_s: float) -> None:
    """Until no running indicator, spinner or progress bar has shown for 2 s."""
    busy = '[data-testid="stStatusWidget"], [data-testid="stSpinner"], [data-testid="stProgress"]'
    deadline, quiet = time.time() + timeout_s, None
    page.wait_for_timeout(800)
    while time.time() < deadline:
        if page.locator(busy).count():
            quiet = None
        elif quiet is None:
            quiet = time.time()
        elif time.time() - quiet > 2:
            return
        page.wait_for_timeout(200)
    raise SystemExit(f"page still busy after {timeout_s:.0f} s")


def nav(page, path: str) -> None:
    """Click the sidebar navigation link to ``path`` ("" = the home page): pages switch in place."""
    page.wait_for_function(f"p => ({FIND_NAV})(p) !== undefined", arg=path, timeout=60_000)
    page.evaluate(f"p => ({FIND_NAV})(p).click()", path)


def wait_drawn(page, seen: int) -> None:
    """Until the UMAP figure has been drawn once more than ``seen`` times; says what it sees if not."""
    try:
        page.wait_for_function(f"window.__drawn.length > {seen}", timeout=120_000, polling=50)
    except Exception:
        state = page.evaluate("""[...document.querySelectorAll('.js-plotly-plot')].map(gd => ({
            title: String(gd.layout?.title?.text ?? ''), data: gd.data?.length, full: gd._fullData?.length,
            canvas: !!gd.querySelector('.gl-container canvas'), canvases: gd.querySelectorAll('canvas').length}))""")
        raise SystemExit(f"no UMAP figure drawn at {page.url}: {state}")


def revisit(page, frames: Frames) -> dict:
    """Home, then back to Projection; times from the click on Projection."""
    nav(page, "")
    wait_idle(page, 120)
    seen = page.evaluate("window.__drawn.length")
    t0_js = page.evaluate("performance.now()")
    t0 = time.perf_counter()
    nav(page, "Projection")
    wait_drawn(page, seen)
    drawn_s = (page.evaluate("window.__drawn[window.__drawn.length - 1]") - t0_js) / 1000
    wait_idle(page, 120)
    msgs = frames.since(t0)
    finished = [t for t, kind, _, _ in msgs if kind == "script_finished"]
    chart = [(t, size) for t, _, size, is_chart in msgs if is_chart]
    # A figure identical to the last visit's comes as a reference to the browser's copy.
    refs = [(t, size) for t, kind, size, _ in msgs if kind == "ref_hash"]
    first_chart = chart[0] if chart else (refs[0] if refs else (float("nan"), 0))
    return {"script_s": round(finished[0] - t0, 2) if finished else None,
            "chart_msg_s": round(first_chart[0] - t0, 2), "chart_msg_bytes": first_chart[1],
            "chart_as_reference": not chart and bool(refs),
            "drawn_s": round(drawn_s, 2), "runs": sum(kind == "new_session" for _, kind, _, _ in msgs)}


def profile_revisit(page) -> dict:
    """Self time of the browser's main thread during one revisit, by script file."""
    nav(page, "")
    wait_idle(page, 120)
    cdp = page.context.new_cdp_session(page)
    cdp.send("Profiler.enable")
    cdp.send("Profiler.setSamplingInterval", {"interval": 500})
    seen = page.evaluate("window.__drawn.length")
    cdp.send("Profiler.start")
    nav(page, "Projection")
    wait_drawn(page, seen)
    profile = cdp.send("Profiler.stop")["profile"]
    nodes = {n["id"]: n for n in profile["nodes"]}
    by_file, by_function = Counter(), Counter()
    for node_id, delta in zip(profile["samples"], profile["timeDeltas"]):
        frame = nodes[node_id]["callFrame"]
        name = Path(frame["url"].split("?")[0]).name or frame["functionName"] or "(native)"
        by_file[name] += delta / 1e6
        by_function[f"{frame['functionName'] or '(anonymous)'} @ {name}"] += delta / 1e6
    return {"by_file_s": {k: round(v, 2) for k, v in by_file.most_common(8)},
            "top_functions_s": {k: round(v, 2) for k, v in by_function.most_common(12)}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--query", required=True, help="URL query of the Projection page")
    parser.add_argument("--visits", type=int, default=5)
    parser.add_argument("--first-timeout", type=float, default=3600, help="seconds for the first visit")
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with tempfile.TemporaryFile("w+") as log, sync_playwright() as playwright:
        app = start_app(port, log)
        try:
            browser = playwright.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
            page = browser.new_page(viewport={"width": 1500, "height": 1250})
            page.add_init_script(WATCH)
            frames = Frames(page)
            started = time.perf_counter()
            page.goto(f"{url}/Projection?{args.query}", wait_until="domcontentloaded")
            wait_idle(page, args.first_timeout)
            wait_drawn(page, 0)
            print(f"first visit (in this server process): {time.perf_counter() - started:.1f} s", flush=True)
            visits = []
            for i in range(args.visits):
                visits.append(revisit(page, frames))
                print(json.dumps({"visit": i + 2, **visits[-1]}), flush=True)
            tab = browser.new_page(viewport={"width": 1500, "height": 1250})
            tab.add_init_script(WATCH)
            started = time.perf_counter()
            tab.goto(f"{url}/Projection?{args.query}", wait_until="domcontentloaded")
            tab.wait_for_function("window.__drawn.length > 0", timeout=300_000, polling=50)
            print(f"new tab: figure drawn {time.perf_counter() - started:.2f} s after opening the URL", flush=True)
            tab.close()
            print(json.dumps({"profile_of_a_revisit": profile_revisit(page)}, indent=1), flush=True)
            browser.close()
        finally:
            app.terminate()
            app.wait(timeout=30)
    for key in ("script_s", "chart_msg_s", "drawn_s"):
        values = [v[key] for v in visits if v[key] is not None]
        if values:
            print(f"{key:>12}: median {statistics.median(values):.2f} s "
                  f"(min {min(values):.2f}, max {max(values):.2f})")


if __name__ == "__main__":
    main()
