"""Real-browser journey of issue 34: a researcher uploads a vectors file on Home, compares it with med-minilm on
Projection, reads its coverage and downloads the figure (headless Debian chromium at 1440x900).

The level is the tiny views table (tests/data, shared with the server); the vectors file holds its
names but one, as hashed character trigrams (no model computes them here).
"""

from __future__ import annotations

import io
import re

import pytest

from bioviz.models.vectors_export import write_vectors
from bioviz.models.vectors_file import VectorsCard
from bioviz.ontology import LevelSpec
from tests.browser.support import ROOT, page_problems, wait_until_idle
from tests.pages.test_vectors_pages import trigram_vectors

pytestmark = [pytest.mark.browser, pytest.mark.slow]

SOURCE = ROOT / "tests" / "data" / "views_table.tsv"
VIEWPORT = {"width": 1440, "height": 900}
PAGE_TIMEOUT_S = 420


def test_upload_vectors_on_home_compare_with_med_minilm_on_projection_and_download(server, browser, tmp_path):
    from PIL import Image

    spec = LevelSpec(str(SOURCE))
    level = spec.load().names
    names = [n for n in level if n != level[3]]
    path = tmp_path / "trigram.parquet"
    write_vectors(names, trigram_vectors(names), path, VectorsCard("trigram"))
    (tmp_path / "trigram.json").unlink()  # an upload is one file: its label is the file's name

    page = browser.new_page(viewport=VIEWPORT, device_scale_factor=1, accept_downloads=True)
    page.set_default_timeout(60_000)
    page.goto(f"{server}/?source={SOURCE}&depth=1", wait_until="domcontentloaded")
    wait_until_idle(page, PAGE_TIMEOUT_S)
    expander = page.get_by_test_id("stExpander").filter(has_text="Bring your own vectors")
    expander.get_by_text("Bring your own vectors").click()
    expander.locator("input[type=file]").set_input_files(str(path))
    page.get_by_text(re.compile(r"Loaded trigram: \d+ names, 64 dimensions")).wait_for(timeout=120_000)
    assert not page_problems(page), page_problems(page)

    page.get_by_test_id("stSidebarNav").get_by_text("Projection").click()
    page.get_by_text(f"Vectors file trigram: {len(names)} of {len(level)} names; 1 without a vector are "
                     "left out.").wait_for(timeout=PAGE_TIMEOUT_S * 1000)
    chart = page.get_by_test_id("stPlotlyChart").first
    chart.locator(".main-svg").first.wait_for(state="attached", timeout=PAGE_TIMEOUT_S * 1000)
    wait_until_idle(page, PAGE_TIMEOUT_S)
    assert not page_problems(page), page_problems(page)
    assert "model_b=" in page.url and "trigram" in page.url and "model_a=med-minilm" in page.url, page.url
    main = page.get_by_test_id("stMain").inner_text()
    assert "med-minilm" in main and "trigram" in main

    chart.hover()
    camera = chart.locator('.modebar-btn[data-title^="Download plot"]').first
    camera.wait_for()
    with page.expect_download(timeout=120_000) as download:
        camera.click()
    assert download.value.suggested_filename.endswith(".png"), download.value.suggested_filename
    image = Image.open(io.BytesIO(open(download.value.path(), "rb").read()))
    image.load()
    assert image.format == "PNG" and image.width >= 800 and image.height >= 400, image.size
    page.close()
