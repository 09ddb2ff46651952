"""The point-cloud component in real chromium, on a tiny Streamlit script (tests/browser/point_cloud_app.py).

Checks what AppTest cannot: the frame draws both panels from the binary arrays, a click and a
shift + drag box select in the browser come back to Python as the same names, and 200k
points per panel are drawn without error.
"""

from __future__ import annotations

import re

import pytest

from tests.browser.support import chromium, page_problems, streamlit_app

pytestmark = [pytest.mark.browser, pytest.mark.slow]

APP = "tests/browser/point_cloud_app.py"
FIRST_FRAME = "window.pointCloud && window.pointCloud.metrics.firstFrameMs !== null"
INKED = """panel => { const c = document.getElementById('panel-' + panel);
  const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data; let n = 0;
  for (let i = 0; i < d.length; i += 4) if (d[i] < 250 || d[i + 1] < 250 || d[i + 2] < 250) n++; return n; }"""


@pytest.fixture(scope="module")
def cloud_url(tmp_path_factory):
    with streamlit_app(tmp_path_factory.mktemp("cloud-home"), tmp_path_factory.mktemp("cloud-log") / "st.log",
                       script=APP) as url:
        yield url


@pytest.fixture(scope="module")
def browser(cloud_url):
    with chromium() as browser:
        yield browser


def open_cloud(browser, url, n):
    page = browser.new_page(viewport={"width": 1200, "height": 900})
    page.goto(f"{url}/?n={n}")
    page.wait_for_selector("iframe", timeout=60_000)
    frame = page.frames[1]
    frame.wait_for_function(FIRST_FRAME, timeout=60_000)
    return page, frame


def panel_origin(page, frame, panel: str) -> tuple[float, float, dict]:
    """Page coordinates of panel ``a`` or ``b``'s top-left corner, and the panel's box inside the frame."""
    iframe = page.locator("iframe").bounding_box()
    canvas = frame.evaluate(f"document.getElementById('panel-{panel}').getBoundingClientRect().toJSON()")
    return iframe["x"] + canvas["x"], iframe["y"] + canvas["y"], canvas


def panel_centre(page, frame, panel: str) -> tuple[float, float]:
    """Page coordinates of the centre of panel ``a`` or ``b``."""
    x, y, canvas = panel_origin(page, frame, panel)
    return x + canvas["width"] / 2, y + canvas["height"] / 2


def name_at(frame, index: int) -> str:
    """The name the frame holds for packed point ``index`` (decoded from the UTF-8 blob)."""
    return frame.evaluate("i => { const s = window.pointCloud.state; "
                          "return new TextDecoder().decode(s.names.subarray(s.offsets[i], s.offsets[i + 1])); }", index)


def selected_line(page):
    page.wait_for_function("[...document.querySelectorAll('[data-testid=stMarkdown]')]"
                           ".some(e => /selected [1-9]/.test(e.innerText))", timeout=30_000)
    text = " ".join(page.locator('[data-testid="stMarkdown"]').all_inner_texts())
    return re.search(r"selected (\d+): (.*)", text)


def test_a_few_thousand_points_are_drawn_in_two_panels_and_a_click_comes_back(browser, cloud_url):
    page, frame = open_cloud(browser, cloud_url, 3000)
    assert frame.evaluate("window.pointCloud.metrics.error") is None
    assert frame.evaluate(INKED, "a") > 1000 and frame.evaluate(INKED, "b") > 1000  # both panels drawn
    assert "synthetic, 3,000 points" in frame.inner_text("#title")
    # Click the pixel of one point in the baseline panel.
    pixel, width = frame.evaluate("""(() => { const p = window.pointCloud.state.pick.a;
        for (let k = 0; k < p.length; k += 101) if (p[k] >= 0) return [k, window.pointCloud.state.width]; })()""")
    index = frame.evaluate(f"window.pointCloud.state.pick.a[{pixel}]")
    left, top, canvas = panel_origin(page, frame, "a")
    page.mouse.click(left + pixel % width, top + pixel // width)
    found = selected_line(page)
    assert found.group(1) == "1" and found.group(2).strip() == name_at(frame, index)
    # The same point is ringed in the compared panel: its pick buffer now holds it on several pixels.
    assert frame.evaluate(f"window.pointCloud.state.pick.b.filter(i => i === {index}).length") > 4
    with page.expect_download() as download:  # the PNG button: title, both panels, legend, caption at 2x
        frame.click("#png")
    assert download.value.suggested_filename == "projection.png"
    png = download.value.path().read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and int.from_bytes(png[16:20], "big") > 2 * 2 * canvas["width"] - 40
    assert not page_problems(page)
    page.close()


def test_a_box_selected_with_shift_drag_returns_the_same_count(browser, cloud_url):
    page, frame = open_cloud(browser, cloud_url, 3000)
    x, y = panel_centre(page, frame, "b")
    page.keyboard.down("Shift")
    page.mouse.move(x - 80, y - 80)
    page.mouse.down()
    page.mouse.move(x, y, steps=5)
    page.mouse.move(x + 80, y + 80, steps=5)
    page.mouse.up()
    page.keyboard.up("Shift")
    chosen = frame.evaluate("window.pointCloud.state.selected.length")
    assert chosen > 1
    assert selected_line(page).group(1) == str(chosen)
    page.close()


def test_a_lasso_drawn_with_alt_drag_selects_the_points_inside_it(browser, cloud_url):
    page, frame = open_cloud(browser, cloud_url, 3000)
    x, y = panel_centre(page, frame, "a")
    page.keyboard.down("Alt")
    page.mouse.move(x - 100, y + 60)
    page.mouse.down()
    for px, py in ((x, y - 120), (x + 100, y + 60), (x - 100, y + 60)):  # a triangle
        page.mouse.move(px, py, steps=8)
    page.mouse.up()
    page.keyboard.up("Alt")
    chosen = frame.evaluate("window.pointCloud.state.selected.length")
    # Fewer than the triangle's bounding box holds: the lasso, not its box, decides.
    box = frame.evaluate("""(() => { const s = window.pointCloud.state, v = s.view, p = s.pos.a; let n = 0;
        const r = document.getElementById('panel-a').getBoundingClientRect();
        for (let i = 0; i < s.n; i++) {
          const x = (p[2 * i] - v.cx) * v.scale + s.width / 2, y = s.height / 2 - (p[2 * i + 1] - v.cy) * v.scale;
          if (Math.abs(x - r.width / 2) < 100 && y > r.height / 2 - 120 && y < r.height / 2 + 60) n++;
        } return n; })()""")
    assert 1 < chosen < box
    assert selected_line(page).group(1) == str(chosen)
    page.close()


def test_200k_points_per_panel_are_drawn_without_error(browser, cloud_url):
    page, frame = open_cloud(browser, cloud_url, 200_000)
    metrics = frame.evaluate("window.pointCloud.metrics")
    assert metrics["error"] is None and frame.evaluate("window.pointCloud.state.n") == 200_000
    assert frame.evaluate(INKED, "a") > 20_000 and frame.evaluate(INKED, "b") > 20_000
    assert not page_problems(page)
    page.close()
