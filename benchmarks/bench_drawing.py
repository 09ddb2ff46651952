"""Drawing speed in headless chromium: the point-cloud renderer at 1M and 110k points vs plotly at 20k.

Everything runs side by side in one process, in Debian chromium under Playwright with the
project's flags (``--headless --no-sandbox --disable-gpu``: no GPU, so WebGL would run on
SwiftShader, in software). Measured:

1. **Renderer alone** (``ui/point_cloud/frontend`` served over localhost HTTP, fed the packed
   arrays by a ``streamlit:render`` message, as Streamlit's page does): milliseconds from the
   message's arrival in the frame to the first frame drawn, frames per second during a
   programmatic pan and zoom (a new view every ``requestAnimationFrame``, counted in the page),
   and the exact redraw once the view rests. For 1M points per panel and for ICD-10-CM's
   110,233 names.
2. **Today's plotly path** at 20k points per panel (``projection_pair_figure``, Scattergl):
   seconds from the figure's script (its data) to ``Plotly.newPlot`` resolved, seconds from
   opening the page (plotly.js included), and frames per second of ``Plotly.relayout`` pans
   and zooms.
3. **Through Streamlit** (``--server``): a real ``streamlit run`` of
   ``tests/browser/point_cloud_app.py`` with 1M synthetic points: seconds from opening the page
   to the first frame, and the frame's own arrival-to-first-frame time.

Names are ICD-10-CM's (the 1M case repeats them with a numbered suffix, so the hover blob has
a real length); layouts are synthetic class blobs (the drawing cost does not depend on where
points lie). The load average is printed before and after.

Usage::

    nice -n 5 python benchmarks/bench_drawing.py [--server] [--screenshot docs/screenshots/projection_1m.png]
"""

from __future__ import annotations

import argparse
import functools
import http.server
import os
import sys
import tempfile
import threading
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bioviz.figures.point_cloud import pack_point_cloud  # noqa: E402

FRONTEND = ROOT / "ui" / "point_cloud" / "frontend"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]
BINARY = ("positions_a", "positions_b", "classes", "names", "name_offsets")
VIEWPORT = {"width": 1400, "height": 900}


def load() -> str:
    return " ".join(f"{v:.1f}" for v in os.getloadavg())


def icd10cm_view():
    from bioviz.ontology import level_view, load_source

    return level_view(load_source("icd10cm"), 1)


def blobs(labels: np.ndarray, n_classes: int, seed: int) -> np.ndarray:
    """A UMAP-like layout: one blob per class, three sub-blobs each."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(scale=6.0, size=(n_classes, 3, 2))
    sub = rng.integers(0, 3, len(labels))
    return centres[labels, sub] + rng.normal(scale=0.7, size=(len(labels), 2))


def scaled_view(view, n: int):
    """``view`` with ``n`` names: its own names repeated with a numbered suffix (the same classes)."""
    if n <= len(view.names):
        return view, np.arange(n)
    reps = -(-n // len(view.names))
    names = [f"{name} #{k}" if k else name for k in range(reps) for name in view.names][:n]
    labels = np.tile(view.labels, reps)[:n]
    concepts = np.tile(np.asarray(view.name_concepts, dtype=object), reps)[:n].tolist()
    return replace(view, names=names, labels=labels, name_concepts=concepts), np.arange(n)


def packed(view, n: int, title: str):
    big, rows = scaled_view(view, n)
    coords_a = blobs(big.labels[rows], len(big.classes), 0)
    coords_b = coords_a + np.random.default_rng(1).normal(scale=0.4, size=coords_a.shape)
    started = time.perf_counter()
    cloud = pack_point_cloud(big, rows, coords_a, coords_b, model_a="minilm", model_b="minilm fine-tuned", title=title,
                             caption=f"synthetic UMAP-like layout · {n:,} ICD-10-CM names "
                                     "(repeated with a suffix above 110k)")
    return cloud, time.perf_counter() - started


class Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


def serve(folder: Path):
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(folder)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


FEED = """async (names) => {
  const args = Object.assign({}, await (await fetch('settings.json')).json());
  for (const k of names) args[k] = new Uint8Array(await (await fetch(k + '.bin')).arrayBuffer());
  window.__sent = performance.now();
  window.postMessage({type: 'streamlit:render', args: args}, '*');
}"""


def renderer_alone(page, base: str, folder: Path, cloud, name: str, screenshot: Path | None = None) -> dict:
    import json

    for key in BINARY:
        (folder / f"{key}.bin").write_bytes(getattr(cloud, key))
    settings = {k: v for k, v in cloud.args().items() if k not in BINARY}
    (folder / "settings.json").write_text(json.dumps(settings))
    started = time.perf_counter()
    page.goto(f"{base}/index.html?{name}")
    page.wait_for_function("window.pointCloud")
    page.evaluate(FEED, list(BINARY))
    page.wait_for_function("window.pointCloud.metrics.firstFrameMs !== null || window.pointCloud.metrics.error",
                           timeout=300_000)
    open_to_frame = time.perf_counter() - started
    metrics = page.evaluate("window.pointCloud.metrics")
    if metrics["error"]:
        raise RuntimeError(metrics["error"])
    if screenshot:
        screenshot.parent.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(screenshot))
    fps = page.evaluate("window.pointCloud.measureFps(3)")
    return {"first_frame_ms": metrics["firstFrameMs"], "open_s": open_to_frame, "fps": fps["fps"],
            "rest_ms": fps["fullDrawMs"]}


def plotly_page(page, folder: Path, fig, name: str) -> tuple[float, float]:
    """``(page open -> drawn, in-page draw)`` seconds of a plotly figure page.

    The in-page time runs from a marker placed just before the script that holds the figure
    (so parsing its data and ``Plotly.newPlot`` count, loading plotly.js does not) until
    ``newPlot`` resolved.
    """
    path = folder / f"{name}.html"
    fig.write_html(str(path), include_plotlyjs=True, post_script="window.__drawn = performance.now();")
    html = path.read_text()
    cut = html.rfind("<script", 0, html.index("Plotly.newPlot"))
    path.write_text(html[:cut] + "<script>window.__start = performance.now();</script>" + html[cut:])
    started = time.perf_counter()
    page.goto(path.as_uri())
    page.wait_for_function("window.__drawn !== undefined", timeout=300_000)
    return time.perf_counter() - started, page.evaluate("(window.__drawn - window.__start) / 1000")


PLOTLY_FPS = """async (seconds) => {
  const gd = document.querySelector('.js-plotly-plot');
  const x = gd.layout.xaxis.range.slice(), y = gd.layout.yaxis.range.slice();
  const start = performance.now(); let frames = 0;
  while ((performance.now() - start) / 1000 < seconds) {
    const t = (performance.now() - start) / 1000, k = Math.exp(0.6 * Math.sin(t * 1.3));
    const dx = Math.sin(t * 2) * (x[1] - x[0]) * 0.1, dy = Math.cos(t * 2) * (y[1] - y[0]) * 0.1;
    const cx = (x[0] + x[1]) / 2 + dx, cy = (y[0] + y[1]) / 2 + dy;
    const hx = (x[1] - x[0]) / 2 / k, hy = (y[1] - y[0]) / 2 / k;
    await Plotly.relayout(gd, {'xaxis.range': [cx - hx, cx + hx], 'yaxis.range': [cy - hy, cy + hy],
                               'xaxis2.range': [cx - hx, cx + hx], 'yaxis2.range': [cy - hy, cy + hy]});
    await new Promise(requestAnimationFrame);
    frames++;
  }
  return frames / ((performance.now() - start) / 1000);
}"""


def plotly_case(page, folder: Path, view, n: int) -> dict:
    import plotly.graph_objects as go

    from bioviz.figures import projection_pair_figure
    from bioviz.views.projection import stratified_sample

    rows = stratified_sample(view.labels, n, seed=0)
    coords_a = blobs(view.labels[rows], len(view.classes), 0)
    coords_b = coords_a + np.random.default_rng(1).normal(scale=0.4, size=coords_a.shape)
    fig = projection_pair_figure(view, rows, coords_a, coords_b, model_a="minilm", model_b="minilm fine-tuned")
    tiny = go.Figure(go.Scattergl(x=list(range(10)), y=list(range(10)), mode="markers"))
    plotly_page(page, folder, tiny, "tiny-warm")  # the browser's first plotly page warms it up
    open_s, draw_s = plotly_page(page, folder, fig, f"plotly-{n}")
    fps = page.evaluate(PLOTLY_FPS, 3)
    return {"draw_s": draw_s, "open_s": open_s, "fps": fps, "json_mb": len(fig.to_json()) / 1e6}


def through_streamlit(browser, n: int) -> dict:
    from tests.browser.support import streamlit_app

    with tempfile.TemporaryDirectory() as home:
        with streamlit_app(home, Path(home) / "streamlit.log", script="tests/browser/point_cloud_app.py",
                           env={"BIOVIZ_HOME": home}) as url:
            page = browser.new_page(viewport=VIEWPORT)
            started = time.perf_counter()
            page.goto(f"{url}/?n={n}")
            page.wait_for_selector("iframe", timeout=300_000)
            frame = page.frames[1]
            frame.wait_for_function("window.pointCloud && window.pointCloud.metrics.firstFrameMs !== null",
                                    timeout=300_000)
            out = {"open_s": time.perf_counter() - started,
                   "first_frame_ms": frame.evaluate("window.pointCloud.metrics.firstFrameMs")}
            page.close()
    return out


def main() -> None:
    from playwright.sync_api import sync_playwright

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--million", type=int, default=1_000_000, help="points per panel of the large case")
    parser.add_argument("--plotly", type=int, default=20_000, help="points per panel of today's plotly path")
    parser.add_argument("--server", action="store_true", help="also time the large case through streamlit run")
    parser.add_argument("--screenshot", type=Path, help="save the large case's first frame here")
    args = parser.parse_args()
    print(f"load average at start: {load()}", flush=True)
    view = icd10cm_view()
    title = "UMAP · minilm vs minilm fine-tuned · ICD-10-CM chapters (d1)"
    big, big_pack_s = packed(view, args.million, title + f" · {args.million:,} points")
    icd, icd_pack_s = packed(view, len(view.names), title)
    print(f"packed {big.n_points:,} points in {big_pack_s:.1f} s: {big.nbytes / 1e6:.1f} MB binary "
          f"(positions {2 * 8 * big.n_points / 1e6:.0f} MB, names {len(big.names) / 1e6:.0f} MB); "
          f"{icd.n_points:,} points: {icd.nbytes / 1e6:.1f} MB in {icd_pack_s:.1f} s", flush=True)
    rows = []
    with tempfile.TemporaryDirectory() as tmp, sync_playwright() as playwright:
        folder = Path(tmp)
        for item in FRONTEND.iterdir():
            (folder / item.name).symlink_to(item)
        server, base = serve(folder)
        browser = playwright.chromium.launch(executable_path="/usr/bin/chromium", args=ARGS)
        page = browser.new_page(viewport=VIEWPORT)
        large = renderer_alone(page, base, folder, big, "large", args.screenshot)
        print(f"point cloud {big.n_points:,}: {large}", flush=True)
        small = renderer_alone(page, base, folder, icd, "icd")
        print(f"point cloud {icd.n_points:,}: {small}", flush=True)
        plotly = plotly_case(page, folder, view, args.plotly)
        print(f"plotly {args.plotly:,}: {plotly}", flush=True)
        served = through_streamlit(browser, args.million) if args.server else None
        if served:
            print(f"through streamlit, {args.million:,} synthetic points: {served}", flush=True)
        browser.close()
        server.shutdown()
    rows.append((f"point cloud, {big.n_points:,} per panel", f"{large['first_frame_ms'] / 1000:.2f}",
                 f"{large['open_s']:.2f}", f"{large['fps']:.0f}", f"{large['rest_ms']:.0f}"))
    rows.append((f"point cloud, {icd.n_points:,} per panel (ICD-10-CM)", f"{small['first_frame_ms'] / 1000:.2f}",
                 f"{small['open_s']:.2f}", f"{small['fps']:.0f}", f"{small['rest_ms']:.0f}"))
    rows.append((f"plotly Scattergl, {args.plotly:,} per panel (today)", f"{plotly['draw_s']:.2f}",
                 f"{plotly['open_s']:.2f}", f"{plotly['fps']:.1f}", ""))
    print("\n| renderer | data arrival -> first frame s | page open -> drawn s | pan/zoom fps | redraw at rest ms |")
    print("| --- | --- | --- | --- | --- |")
    for row in rows:
        print("| " + " | ".join(row) + " |")
    print(f"\nratios, {icd.n_points:,}-point cloud vs {args.plotly:,}-point plotly (plotly / point cloud): "
          f"data -> drawn {plotly['draw_s'] / (small['first_frame_ms'] / 1000):.0f}x, page open -> drawn "
          f"{plotly['open_s'] / small['open_s']:.1f}x; pan/zoom fps (point cloud / plotly) "
          f"{small['fps'] / plotly['fps']:.0f}x")
    print(f"1M point cloud: first frame {large['first_frame_ms'] / 1000:.2f} s (target < 5 s), "
          f"pan/zoom {large['fps']:.0f} fps (target >= 20)")
    if served:
        print(f"through streamlit: page open -> first frame {served['open_s']:.1f} s, "
              f"arrival -> first frame {served['first_frame_ms'] / 1000:.2f} s")
    print(f"plotly figure JSON at {args.plotly:,}: {plotly['json_mb']:.1f} MB; "
          f"point cloud binary at {icd.n_points:,}: {icd.nbytes / 1e6:.1f} MB")
    print(f"load average at end: {load()}")


if __name__ == "__main__":
    main()
