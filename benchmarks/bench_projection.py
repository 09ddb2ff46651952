"""Projection speed: PCA vs UMAP vs a cached revisit, for 5k / 20k / 100k names; browser-side scattergl.

For each size the script measures, side by side in one run:

- ``pca``: the instant preview (scikit-learn PCA to 2-D);
- ``umap``: UMAP (cosine, n_neighbors 15, min_dist 0.1, fixed seed) of one space;
- ``revisit``: what the Projection page does on a second visit to the same view: both
  spaces' coordinates read from the disk cache, the Procrustes alignment, and the figure
  built and serialised to JSON (what Streamlit sends to the browser);

and prints the ratios ``umap / pca`` and ``umap / revisit``. numba compiles UMAP's kernels
on the first call of each process; that one-off cost is measured on 500 points first and
reported apart (the app pays it once per server process). The warm-up uses 4,500 points
because umap-learn switches from exact neighbours to NN-descent above 4,096 points, and
both paths compile on first use.

``--browser`` also opens each figure in headless Debian chromium (Playwright) and reports
the time until plotly has drawn it and the size of the figure JSON: the browser-side
behaviour of ``Scattergl`` with up to 100k points.

Vectors: the names of ICD-10-CM's chapters encoded with ``char-tfidf`` (no neural model, so
100k names encode in seconds); ``--vectors synthetic`` uses clustered Gaussian vectors.

Usage::

    BIOVIZ_HOME=/tmp/bench-home python benchmarks/bench_projection.py --sizes 5000 20000 100000 --browser
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bioviz.views.projection import ProjectionParams, align_pair, project, stratified_sample  # noqa: E402
from bioviz.space import Space, l2_normalise  # noqa: E402


def real_vectors(n: int):
    """``(Space a, Space b, view)``: ICD-10-CM chapter names under char-tfidf and a perturbed copy."""
    from bioviz.models.registry import embed
    from bioviz.ontology import level_view, load_source

    view = level_view(load_source("icd10cm"), 1)
    rows = stratified_sample(view.labels, n, seed=0)
    names = [view.names[r] for r in rows]
    space_a = embed(names, "char-tfidf")
    # A second space over the same names: the first with noise, standing in for a trained run.
    rng = np.random.default_rng(1)
    space_b = Space(space_a.names, l2_normalise(space_a.vectors + rng.normal(0, 0.02, space_a.vectors.shape)), "b")
    return space_a, space_b, view, rows


def synthetic_vectors(n: int, dim: int = 384, classes: int = 22):
    rng = np.random.default_rng(0)
    centres = rng.normal(size=(classes, dim))
    labels = rng.integers(0, classes, n)
    a = l2_normalise(centres[labels] + rng.normal(size=(n, dim)) * 0.9)
    b = l2_normalise(a + rng.normal(size=(n, dim)) * 0.05)
    names = tuple(f"name {i}" for i in range(n))
    return Space(names, a, "synthetic-a"), Space(names, b, "synthetic-b"), labels


def timed(fn):
    started = time.perf_counter()
    value = fn()
    return value, time.perf_counter() - started


def figure_json(view, rows, pair):
    from bioviz.figures import projection_pair_figure

    fig = projection_pair_figure(view, rows, pair.coords_a, pair.coords_b, model_a="a", model_b="b",
                                 caption=pair.params.caption())
    return fig, fig.to_json()


def browser_render_seconds(figs: dict) -> dict:
    """Seconds from opening the page until ``Plotly.newPlot`` has drawn the figure, in headless chromium."""
    from playwright.sync_api import sync_playwright

    args = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
            "--disable-background-networking", "--disable-component-update", "--disable-sync"]
    import plotly.graph_objects as go

    # A 10-point figure first, twice (the first page also warms the browser up): the time to
    # load and parse plotly.js itself, to subtract.
    tiny = go.Figure(go.Scattergl(x=list(range(10)), y=list(range(10)), mode="markers"))
    figs = {-10: tiny, 10: tiny, **figs}
    out = {}
    with tempfile.TemporaryDirectory() as tmp, sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path="/usr/bin/chromium", args=args)
        page = browser.new_page(viewport={"width": 1500, "height": 900})
        for n, fig in figs.items():
            path = Path(tmp) / f"fig-{n}.html"
            # plotly.py runs post_script once Plotly.newPlot has resolved, i.e. once drawn.
            fig.write_html(str(path), include_plotlyjs=True, post_script="window.__drawn = performance.now();")
            started = time.perf_counter()
            page.goto(path.as_uri())
            page.wait_for_function("window.__drawn !== undefined", timeout=300_000)
            drawn = time.perf_counter() - started
            webgl = page.evaluate("!!document.createElement('canvas').getContext('webgl')")
            out[n] = {"seconds": round(drawn, 2), "webgl": webgl}
        browser.close()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[5_000, 20_000])
    parser.add_argument("--vectors", choices=["char-tfidf", "synthetic"], default="char-tfidf")
    parser.add_argument("--browser", action="store_true", help="also time drawing each figure in chromium")
    args = parser.parse_args()
    os.environ.setdefault("BIOVIZ_HOME", tempfile.mkdtemp(prefix="bench-projection-"))
    import torch

    torch.set_num_threads(1)

    warm, _ = synthetic_vectors(4_500, dim=64)[:2]
    _, compile_s = timed(lambda: project(warm, ProjectionParams(max_points=4_500), use_cache=False))
    _, warm_s = timed(lambda: project(warm, ProjectionParams(max_points=4_500, seed=1), use_cache=False))
    print(f"UMAP of 4,500 points: first call in a process {compile_s:.1f} s (numba compiles), "
          f"second call {warm_s:.1f} s", flush=True)

    results, figs = [], {}
    for n in args.sizes:
        if args.vectors == "synthetic":
            space_a, space_b, labels = synthetic_vectors(n)
            view = None
        else:
            space_a, space_b, view, view_rows = real_vectors(n)
            labels = view.labels[view_rows]
        n = len(space_a)
        params = ProjectionParams(max_points=max(n, 10))
        _, pca_s = timed(lambda: project(space_a, ProjectionParams(method="pca", max_points=n), use_cache=False))
        rows = np.arange(n)
        coords_a, umap_s = timed(lambda: project(space_a, params, rows=rows))
        project(space_b, params, rows=rows)  # the second space, so a revisit finds both on disk

        def revisit():
            pair = align_pair(rows, project(space_a, params, rows=rows), project(space_b, params, rows=rows), params)
            if view is not None:
                return figure_json(_SubView(view, view_rows), rows, pair)
            return None, json.dumps(pair.coords_a.tolist())

        (fig, payload), revisit_s = timed(revisit)
        if fig is not None:
            figs[n] = fig
        row = {"names": n, "pca_s": round(pca_s, 2), "umap_s": round(umap_s, 1), "revisit_s": round(revisit_s, 2),
               "umap_over_pca": round(umap_s / pca_s, 1), "umap_over_revisit": round(umap_s / revisit_s, 1),
               "figure_json_mb": round(len(payload) / 2**20, 1)}
        results.append(row)
        print(json.dumps(row), flush=True)
    browser_rows = []
    if args.browser and figs:
        drawn = browser_render_seconds(figs)
        drawn.pop(-10)
        base = drawn.pop(10)["seconds"]
        print(f"browser: a 10-point page draws in {base} s (loading plotly.js); minus that:", flush=True)
        for n, info in drawn.items():
            browser_rows.append({"names": n, "browser_open_s": info["seconds"],
                                 "browser_draw_s": round(info["seconds"] - base, 2), "webgl": info["webgl"]})
            print(json.dumps(browser_rows[-1]), flush=True)
    print(f"\nload average {' '.join(f'{x:.1f}' for x in os.getloadavg())} on {os.cpu_count()} CPUs\n")
    print("| names | PCA s | UMAP s | revisit s | UMAP / PCA | UMAP / revisit | figure JSON |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for r in results:
        print(f"| {r['names']:,} | {r['pca_s']} | {r['umap_s']} | {r['revisit_s']} | {r['umap_over_pca']:.0f} | "
              f"{r['umap_over_revisit']:.0f} | {r['figure_json_mb']} MB |")
    if browser_rows:
        print("\n| points per panel | open page s | draw s (minus plotly.js) | WebGL |")
        print("|---:|---:|---:|---|")
        for r in browser_rows:
            webgl = "yes" if r["webgl"] else "no"
            print(f"| {r['names']:,} | {r['browser_open_s']} | {r['browser_draw_s']} | {webgl} |")


class _SubView:
    """The few LevelView fields the figure reads, restricted to the benchmark's rows."""

    def __init__(self, view, rows):
        self.names = [view.names[r] for r in rows]
        self.name_concepts = [view.name_concepts[r] for r in rows]
        self.labels = view.labels[rows]
        self.classes = view.classes
        self.class_labels = view.class_labels
        self.title = f"{view.title} (sample)"


if __name__ == "__main__":
    main()
