"""Every figure family at its export size in headless chromium: no text leaves the canvas or overlaps.

Each figure is built with its real function from realistic inputs (23 HPO classes with codes,
ICD-10 chapter names of up to 100 characters, ten ranked neighbours, a UMAP cloud with far
outliers; ``tests/bioviz/figures/figure_samples.py``), drawn by the installed plotly.js (inline,
no network) at the width it has on its page, all in one page of one browser session. The test
then reads the bounding box of every visible SVG text element (titles, axis titles, tick
labels, annotations, legend entries, table cells, treemap labels, cell values) and fails when

- a text box leaves the figure's canvas (what the camera button saves),
- two text boxes overlap,
- an axis tick label reaches into another subplot's plot area (labels over a neighbour's bars),
- a table cell's text is wider or taller than its cell (clipped codes, a half-cut last row).

Set ``BIOVIZ_FIGURE_SHOTS=<dir>`` to also save a PNG of every figure (for a look by eye).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import plotly.io as pio
import pytest
from plotly.offline import get_plotlyjs

from tests.browser.support import chromium, require_browser

pytestmark = [pytest.mark.browser, pytest.mark.slow]

# Widths of a figure on its page in the wide layout at 1440 px with the sidebar open: a
# full-width figure, and one in the 3/4 column beside a table or metrics (Projection's
# separation, Hierarchy); each is also drawn at the full width of a 1440 px window with the
# sidebar closed.
FULL, COLUMN, WIDE = 1000, 730, 1340
# Text boxes may touch: fonts' line boxes include ascent and descent that draw nothing.
TOLERANCE_PX = 2.0
# The smallest text a reader of a 1x screenshot or a printed 2x export can read.
MIN_FONT_PX = 10

MEASURE_JS = """
(div) => {
  const box = div.getBoundingClientRect();
  const rel = (r) => ({left: r.left - box.left, top: r.top - box.top, right: r.right - box.left,
                       bottom: r.bottom - box.top});
  const hidden = (el) => {
    for (let n = el; n && n !== div; n = n.parentElement) {
      const s = getComputedStyle(n);
      if (s.display === 'none' || s.visibility === 'hidden' || parseFloat(s.opacity) === 0) return true;
    }
    return false;
  };
  const KINDS = ['gtitle', 'annotation', 'legendtext', 'xtick', 'ytick', 'xtitle', 'ytitle', 'cbtitle',
                 'cell-text', 'slicetext', 'bartext', 'pathbar'];  // x2tick, y3tick ... count as xtick, ytick
  const kindOf = (el) => {
    for (let n = el; n && n !== div; n = n.parentElement) {
      if (!n.classList) continue;
      for (const k of KINDS) if (n.classList.contains(k)) return k;
      const tick = [...n.classList].find((c) => /^[xy]\\d*tick$/.test(c));
      if (tick) return tick[0] + 'tick';
      if ([...n.classList].some((c) => c.startsWith('cb'))) return 'colorbar';
      if (n.classList.contains('hm')) return 'heatmap-value';
    }
    return el.getAttribute('class') || 'text';
  };
  const subplotOf = (el) => {
    for (let n = el; n && n !== div; n = n.parentElement) {
      if (n.classList && n.classList.contains('subplot')) return [...n.classList].find((c) => c !== 'subplot');
    }
    return null;
  };
  const texts = [];
  for (const el of div.querySelectorAll('svg text')) {
    const content = el.textContent.trim();
    if (!content || hidden(el)) continue;
    const r = el.getBoundingClientRect();
    if (r.width < 0.5 || r.height < 0.5) continue;
    // The text's own box in screen space: four corners, so rotated labels are not taken
    // for their (much larger) axis-aligned bounding box.
    const bb = el.getBBox();
    const m = el.getScreenCTM();
    const corners = [[bb.x, bb.y], [bb.x + bb.width, bb.y], [bb.x + bb.width, bb.y + bb.height],
                     [bb.x, bb.y + bb.height]].map(([x, y]) => [m.a * x + m.c * y + m.e - box.left,
                                                               m.b * x + m.d * y + m.f - box.top]);
    const scale = Math.sqrt(Math.abs(m.a * m.d - m.b * m.c));
    const item = {text: content, kind: kindOf(el), subplot: subplotOf(el), corners,
                  font_px: parseFloat(getComputedStyle(el).fontSize) * scale, ...rel(r)};
    const cell = el.closest('.column-cell');
    if (cell) {
      const rect = cell.querySelector('rect.cell-rect');
      if (rect) item.cell = rel(rect.getBoundingClientRect());
      const view = el.closest('.table-control-view');
      if (view) item.viewport = rel(view.getBoundingClientRect());
    }
    texts.push(item);
  }
  const plots = {};
  for (const rect of div.querySelectorAll('.draglayer .nsewdrag')) {
    const group = rect.parentElement;
    const id = [...group.classList].find((c) => /^x\\d*y\\d*$/.test(c));
    if (id) plots[id] = rel(rect.getBoundingClientRect());
  }
  return {width: box.width, height: box.height, texts, plots};
}
"""


def figure_cases() -> list[tuple[str, object, int]]:
    """``(case name, figure, width)`` for every figure family."""
    from tests.bioviz.figures.figure_samples import figure_cases as cases

    return cases(FULL, COLUMN, WIDE)


def page_html(cases) -> str:
    """One HTML page with plotly.js inline and one sized div per figure."""
    divs, specs = [], []
    for index, (name, fig, width) in enumerate(cases):
        spec = json.loads(pio.to_json(fig, validate=False))
        # None: the figure's own width (a table sized from its content), else the page's.
        width = spec["layout"]["width"] = width or spec["layout"].get("width") or FULL
        spec["layout"].setdefault("height", 450)
        divs.append(f'<div id="fig{index}" style="width:{width}px;height:{spec["layout"]["height"]}px;'
                    'margin-bottom:20px"></div>')
        specs.append(spec)
    return (
        "<!DOCTYPE html><html><head><meta charset='utf-8'>"
        f"<script>{get_plotlyjs()}</script></head><body style='margin:0'>{''.join(divs)}"
        f"<script>const specs = {json.dumps(specs)};"
        "window.drawn = Promise.all(specs.map((s, i) => Plotly.newPlot('fig' + i, s.data, s.layout,"
        " {displayModeBar: false})));</script></body></html>"
    )


def boxes_overlap(a: dict, b: dict, tolerance: float = TOLERANCE_PX) -> bool:
    """Whether two axis-aligned boxes share more than ``tolerance`` pixels in both directions."""
    return (min(a["right"], b["right"]) - max(a["left"], b["left"]) > tolerance
            and min(a["bottom"], b["bottom"]) - max(a["top"], b["top"]) > tolerance)


def texts_overlap(a: dict, b: dict, tolerance: float = TOLERANCE_PX) -> bool:
    """Whether two (possibly rotated) text boxes overlap by more than ``tolerance`` pixels.

    Separating-axis test on the two quadrilaterals: they are apart when their projections on
    one of the four edge normals overlap by ``tolerance`` or less.
    """
    if not boxes_overlap(a, b, tolerance):
        return False
    pa, pb = np.asarray(a["corners"]), np.asarray(b["corners"])
    for quad in (pa, pb):
        for i in range(2):
            edge = quad[i + 1] - quad[i]
            normal = np.array([-edge[1], edge[0]])
            length = float(np.hypot(*normal))
            if length < 1e-9:
                continue
            normal /= length
            ra, rb = pa @ normal, pb @ normal
            if min(ra.max(), rb.max()) - max(ra.min(), rb.min()) <= tolerance:
                return False
    return True


def inside(inner: dict, outer: dict, tolerance: float = TOLERANCE_PX) -> bool:
    return (inner["left"] >= outer["left"] - tolerance and inner["top"] >= outer["top"] - tolerance
            and inner["right"] <= outer["right"] + tolerance and inner["bottom"] <= outer["bottom"] + tolerance)


def problems(measured: dict) -> list[str]:
    """What is wrong with one figure's text layout, one line per problem."""
    canvas = {"left": 0, "top": 0, "right": measured["width"], "bottom": measured["height"]}
    texts = measured["texts"]
    out = []

    def show(t):
        return f"{t['kind']} {t['text'][:50]!r}"

    for t in texts:
        if not inside(t, canvas):
            out.append(f"{show(t)} leaves the canvas: {[round(t[k]) for k in ('left', 'top', 'right', 'bottom')]}")
        if t["font_px"] < MIN_FONT_PX:
            out.append(f"{show(t)} is drawn at {t['font_px']:.1f} px, below {MIN_FONT_PX} px")
        if "cell" in t and not inside(t, t["cell"]):
            out.append(f"{show(t)} does not fit its table cell")
        if "viewport" in t and not inside(t, t["viewport"]):
            out.append(f"{show(t)} is cut by the table's edge")
        if t["kind"] in ("xtick", "ytick"):
            for plot_id, area in measured["plots"].items():
                if plot_id != t["subplot"] and boxes_overlap(t, area):
                    out.append(f"{show(t)} of {t['subplot']} reaches into the plot area of {plot_id}")
    for i, a in enumerate(texts):
        for b in texts[i + 1:]:
            if texts_overlap(a, b):
                out.append(f"{show(a)} overlaps {show(b)}")
    return out


def measure(cases, folder: Path) -> dict:
    """Draw ``cases`` in one chromium page and read every figure's text boxes (:data:`MEASURE_JS`)."""
    require_browser()
    page_file = folder / "figures.html"
    page_file.write_text(page_html(cases), encoding="utf-8")
    shots = os.environ.get("BIOVIZ_FIGURE_SHOTS")
    with chromium() as browser:
        page = browser.new_page(viewport={"width": WIDE + 40, "height": 900})
        # Generous: the page runs plotly.js and draws every figure before "load", and the
        # machine may be shared (35 s at load 2, twice that at load 7).
        page.goto(page_file.as_uri(), timeout=240_000)
        page.wait_for_function("window.Plotly !== undefined", timeout=60_000)
        page.evaluate("() => window.drawn")
        # Treemap and table text, and axis automargins, settle after the first frames; on a loaded
        # machine that takes longer, so measure until two readings agree (at most ~10 s).
        out: dict = {}
        for _ in range(20):
            page.wait_for_timeout(500)
            reading = {name: page.locator(f"#fig{index}").evaluate(MEASURE_JS)
                       for index, (name, _, _) in enumerate(cases)}
            if reading == out:
                break
            out = reading
        for index, (name, _, _) in enumerate(cases):
            div = page.locator(f"#fig{index}")
            if shots:
                Path(shots).mkdir(parents=True, exist_ok=True)
                div.screenshot(path=str(Path(shots) / f"{name}.png"))
    return out


@pytest.fixture(scope="module")
def measured(tmp_path_factory):
    return measure(figure_cases(), tmp_path_factory.mktemp("figures"))


@pytest.fixture(scope="module")
def measured_movement(tmp_path_factory):
    """Only the movement figures (``-k movement`` draws these alone)."""
    cases = [case for case in figure_cases() if case[0].startswith("movement")]
    return measure(cases, tmp_path_factory.mktemp("movement"))


def test_movement_figure_text_stays_on_the_canvas_and_apart(measured_movement):
    assert {name.split("@")[0] for name in measured_movement} == {"movement", "movement-class", "movement-classes"}
    report = {name: problems(m) for name, m in measured_movement.items()}
    bad = {name: lines for name, lines in report.items() if lines}
    assert not bad, "\n".join(f"{name}:\n  " + "\n  ".join(lines[:12]) for name, lines in bad.items())
    legend = " ".join(t["text"] for t in measured_movement["movement"]["texts"] if t["kind"] == "legendtext")
    assert "train (" in legend and "measured names (" in legend
    # outside a split: by class, never one grey "not in the split"
    legend = " ".join(t["text"] for t in measured_movement["movement-classes"]["texts"] if t["kind"] == "legendtext")
    assert "Abnormality of" in legend and "not in the split" not in legend


def test_no_text_leaves_the_canvas_or_overlaps(measured):
    report = {name: problems(m) for name, m in measured.items()}
    bad = {name: lines for name, lines in report.items() if lines}
    assert not bad, "\n".join(f"{name}:\n  " + "\n  ".join(lines[:12]) for name, lines in bad.items())


def test_treemap_labels_most_classes_and_every_large_box(measured):
    """Plotly hides a label it would have to shrink below 10 px: the fitted ones are shown."""
    for name in ("treemap-classes", "treemap"):
        labels = [t["text"] for t in measured[name]["texts"] if t["kind"] == "slicetext"]
        gains = [x for x in labels if any(c.isdigit() for c in x)]
        assert len(gains) >= 20, f"{name}: only {len(gains)} boxes show their gain: {labels}"
    whole = " ".join(t["text"] for t in measured["treemap-classes"]["texts"] if t["kind"] == "slicetext")
    for name in ("Abnormality of the thoracic cavity", "Growth abnormality", "Abnormality of the eye"):
        assert name.replace(" ", "") in whole.replace(" ", ""), f"{name!r} has no label"


def test_disparate_pair_and_small_gains_stay_legible(measured):
    """Issue 27: class names apart on both panels of an unrelated pair, the largest gain named."""
    for name in ("projection-disparate", "projection-one"):
        names = [t for t in measured[name]["texts"] if t["kind"] == "annotation" and "Abnormal" in t["text"]]
        assert len(names) >= 10, f"{name}: only {len(names)} class names drawn"
    caption = " ".join(t["text"] for t in measured["treemap-small-gains"]["texts"])
    assert "largest gains" in caption and "+0.180" in caption


def test_every_neighbour_row_is_drawn_whole(measured):
    for name in ("neighbours-two", "neighbours-one"):
        texts = measured[name]["texts"]
        ranks = [t["text"] for t in texts if t["kind"] == "cell-text" and t["text"].isdigit()]
        assert ranks == [str(r) for r in range(1, 11)], f"{name}: rows drawn: {ranks}"
    codes = [t["text"] for t in measured["neighbours-two"]["texts"]
             if t["kind"] == "cell-text" and t["text"].startswith("HP:")]
    assert len(codes) == 20 and all(len(code) == 10 for code in codes)  # every HPO code with its last digit
