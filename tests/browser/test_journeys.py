"""Real-browser journeys of a new user (issue 14's "Done when"), in headless Debian chromium at 1440x900.

- A clinician browses neighbours on a level with two models: types a code, which resolves to
  its concept, and reads both rankings (rank, name, code, cosine, Δ rank) without scrolling
  sideways.
- A paper figure is exported with the chart's camera button: the download is a whole PNG of
  the figure's size.
- A researcher compares two models on Evaluation: the differences carry paired intervals, and
  the LaTeX download has no table wider than a page (compiled without an overfull box where
  pdflatex is installed).

(The researcher's journey, train -> Open in views -> every page, is test_train_flow.py.)
The level is ICD-10 chapter XIX's blocks, as in test_browser.py: the session's server has its
vectors cached once.
"""

from __future__ import annotations

import io
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from bioviz.evaluation.latex import MAX_COLUMNS, numeric_columns
from bioviz.search.hybrid import DEFAULT_RANKING

from tests.browser.support import page_problems, wait_until_idle

pytestmark = [pytest.mark.browser, pytest.mark.slow]

LEVEL = "source=icd10&root=XIX&depth=1&model_a=minilm&model_b=char-tfidf"
VIEWPORT = {"width": 1440, "height": 900}
PAGE_TIMEOUT_S = 420


def open_page(browser, url: str):
    page = browser.new_page(viewport=VIEWPORT, device_scale_factor=1, accept_downloads=True)
    page.set_default_timeout(60_000)
    page.goto(url, wait_until="domcontentloaded")
    wait_until_idle(page, PAGE_TIMEOUT_S)
    return page


def test_a_clinician_types_a_code_and_reads_both_rankings_without_scrolling(server, browser):
    page = open_page(browser, f"{server}/Neighbours?{LEVEL}&two=1&k=10")
    query = page.get_by_role("combobox", name=re.compile("^Query"))
    query.click()
    query.fill("S72.0")  # a code: ranked as its concept's name, not as the text "S72.0"
    query.press("Enter")
    page.get_by_text("Download the comparison (CSV)").wait_for(timeout=PAGE_TIMEOUT_S * 1000)
    wait_until_idle(page, PAGE_TIMEOUT_S)
    assert not page_problems(page), page_problems(page)
    main = page.get_by_test_id("stMain")
    assert re.search(r"S72\.0\s*→\s*Fracture of neck of femur", main.inner_text(), re.IGNORECASE), \
        main.inner_text()[:1500]
    # Both models' rankings are on the page, and none of their cells is cut off to the right:
    # every table fits its own width (no horizontal scroll) inside the 1440 px window.
    tables = page.locator('[data-testid="stMain"] [data-testid="stDataFrame"], '
                          '[data-testid="stMain"] [data-testid="stTable"]')
    assert tables.count() >= 1
    for i in range(tables.count()):
        box = tables.nth(i).bounding_box()
        assert box["x"] >= 0 and box["x"] + box["width"] <= VIEWPORT["width"] + 1, box
        overflow = tables.nth(i).evaluate(
            "el => Array.from(el.querySelectorAll('*')).some(e => e.scrollWidth > e.clientWidth + 2"
            " && getComputedStyle(e).overflowX.match(/auto|scroll/))")
        assert not overflow, f"table {i} scrolls sideways"
    text = main.inner_text()
    # the default ranking is hybrid (bioviz.search.hybrid.DEFAULT_RANKING): its column is a score, not a cosine
    for header in ("Rank", "Score" if DEFAULT_RANKING.hybrid else "Cosine", "Δ rank"):
        assert header in text, header
    assert "S72.0" in text  # the code column is in view
    page.close()


def test_a_figure_exported_with_the_camera_button_is_a_whole_png(server, browser):
    from PIL import Image

    page = open_page(browser, f"{server}/Projection?{LEVEL}")
    chart = page.get_by_test_id("stPlotlyChart").first
    chart.locator(".main-svg").first.wait_for(state="attached")
    chart.hover()
    camera = chart.locator('.modebar-btn[data-title^="Download plot"]').first
    camera.wait_for()
    with page.expect_download(timeout=120_000) as download:
        camera.click()
    path = download.value.path()
    assert download.value.suggested_filename.endswith(".png"), download.value.suggested_filename
    image = Image.open(io.BytesIO(open(path, "rb").read()))
    image.load()  # a truncated file fails here
    assert image.format == "PNG" and image.width >= 800 and image.height >= 400, image.size
    # Not a blank canvas: a figure has many colours.
    assert len(image.convert("RGB").getcolors(maxcolors=1 << 16) or range(1 << 16)) > 20
    page.close()


def test_a_researcher_reads_paired_differences_and_downloads_a_latex_table_that_fits_a_page(server, browser):
    """Issue 27: an Evaluation comparison with paired intervals, and a LaTeX export within a page's width."""
    page = open_page(browser, f"{server}/Evaluation?{LEVEL}&eval_tasks=ranking&eval_bench=mayosrs&eval_boot=200")
    page.get_by_role("button", name="Run evaluation").click()
    page.get_by_role("heading", name="Difference from a baseline").wait_for(timeout=PAGE_TIMEOUT_S * 1000)
    wait_until_idle(page, PAGE_TIMEOUT_S)
    assert not page_problems(page), page_problems(page)
    assert page.get_by_text("95% paired bootstrap intervals", exact=False).count() == 1
    cells = [c.strip() for frame in page.get_by_test_id("stDataFrame").all()
             for c in frame.locator("[role=gridcell]").all_text_contents()]
    # a signed difference with its paired interval, e.g. "+0.123 [+0.080, +0.170]"
    assert any(re.fullmatch(r"[+-]\d\.\d+ \[[+-]\d\.\d+, [+-]\d\.\d+\]", c) for c in cells), cells
    with page.expect_download() as download:
        page.get_by_role("button", name="Download LaTeX (booktabs)").click()
    tex = Path(download.value.path()).read_text()
    widths = numeric_columns(tex)  # one tabular per task family, each within the page-width bound
    assert widths and max(widths) <= MAX_COLUMNS, (widths, tex[:500])
    if shutil.which("pdflatex"):  # where it is installed: each table compiles within the text width
        with tempfile.TemporaryDirectory() as work:
            doc = Path(work) / "t.tex"
            doc.write_text("\\documentclass{article}\\usepackage{booktabs}\\begin{document}\n" + tex
                           + "\n\\end{document}\n")
            log = subprocess.run(["pdflatex", "-interaction=nonstopmode", doc.name], cwd=work,
                                 capture_output=True, text=True, timeout=120).stdout
            assert "Overfull \\hbox" not in log, log[-2000:]
    page.close()
