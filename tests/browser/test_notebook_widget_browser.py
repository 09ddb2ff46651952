"""The notebook widget (bioviz.notebook_widget) in real chromium: drawn, selected, read back in Python as names.

No Jupyter server runs here: a small host page plays the notebook's part. It loads the widget's ES
module (the one anywidget sends) and renders it with a model holding the widget's synced state,
its arrays as the binary buffers ipywidgets sends (DataViews); the model's ``save_changes`` records
the comm message the frontend would send (``{"method": "update", "state": ..., "buffer_paths": []}``),
and the test hands each to the Python widget's comm handler (``_handle_msg``), as the kernel does.
So the path the selection takes is the widget's own: the point-cloud frame's
``streamlit:setComponentValue`` -> the bridge -> ``selected_points`` -> Python -> ``selected_names``.
"""

from __future__ import annotations

import base64
import json

import numpy as np
import pytest

from tests.browser.support import chromium, require_browser

pytestmark = [pytest.mark.browser, pytest.mark.slow]

HOST = """<!doctype html><html><head><meta charset="utf-8"></head><body style="width: 1100px">
<div id="host"></div>
<script type="module">
const state = JSON.parse(document.getElementById("state").textContent);
const values = state.values, listeners = {};
for (const [path, data] of state.buffers) {  // ipywidgets' buffers: DataViews put back at their paths
  const bytes = Uint8Array.from(atob(data), (c) => c.charCodeAt(0));
  let target = values;
  for (const key of path.slice(0, -1)) target = target[key];
  target[path[path.length - 1]] = new DataView(bytes.buffer);
}
window.sent = [];
const model = {
  get: (key) => values[key],
  set: (key, value) => { values[key] = value; (listeners["change:" + key] || []).forEach((f) => f()); },
  save_changes: () => window.sent.push({method: "update", state: {selected_points: values.selected_points},
                                        buffer_paths: []}),
  on: (name, f) => { (listeners[name] = listeners[name] || []).push(f); },
  off: (name, f) => { listeners[name] = (listeners[name] || []).filter((g) => g !== f); },
};
window.model = model;
const url = URL.createObjectURL(new Blob([values._esm], {type: "text/javascript"}));
const widget = (await import(url)).default;
widget.render({model: model, el: document.getElementById("host")});
</script>
<script type="application/json" id="state">STATE</script>
</body></html>"""


def host_page(widget) -> str:
    """The host page holding ``widget``'s state as the notebook frontend gets it (JSON plus binary buffers)."""
    from ipywidgets.widgets.widget import _remove_buffers

    values, paths, buffers = _remove_buffers(widget.get_state())
    state = {"values": values, "buffers": [[path, base64.b64encode(bytes(buffer)).decode()]
                                           for path, buffer in zip(paths, buffers)]}
    return HOST.replace("STATE", json.dumps(state).replace("</", "<\\/"))


def to_python(widget, page) -> None:
    """Hand every comm message the page's frontend sent to the widget, as the kernel does."""
    for data in page.evaluate("window.sent.splice(0)"):
        widget._handle_msg({"content": {"data": data}, "buffers": []})


@pytest.fixture(scope="module")
def widget(tmp_path_factory):
    """A widget of two synthetic layouts of a small level (no model: the packing is the library's)."""
    from bioviz.figures.point_cloud import pack_point_cloud
    from bioviz.notebook_widget import PointCloudWidget
    from bioviz.ontology.levels import LevelView

    rng = np.random.default_rng(0)
    n = 400
    labels = np.repeat(np.arange(4), n // 4)
    view = LevelView(source="synthetic", root="R", depth=1, mode="level", classes=["A", "B", "C", "D"],
                     class_labels=["alpha", "beta", "gamma", "delta"], names=[f"name {i}" for i in range(n)],
                     labels=labels, name_concepts=[f"C{i}" for i in range(n)], hypernym_names={})
    centres = np.array([[-3, -3], [3, -3], [-3, 3], [3, 3]], dtype=float)
    coords_a = centres[labels] + 0.5 * rng.normal(size=(n, 2))
    coords_b = centres[labels] * 0.8 + 0.5 * rng.normal(size=(n, 2))
    cloud = pack_point_cloud(view, np.arange(n), coords_a, coords_b, model_a="model A", model_b="model B",
                             title="synthetic, 400 points", caption="a test")
    return PointCloudWidget(cloud, view.names, height=400)


@pytest.fixture(scope="module")
def page(widget, tmp_path_factory):
    require_browser()
    path = tmp_path_factory.mktemp("widget") / "host.html"
    path.write_text(host_page(widget), encoding="utf-8")
    with chromium() as browser:
        page = browser.new_page(viewport={"width": 1200, "height": 900})
        errors = []
        page.on("pageerror", lambda error: errors.append(str(error)))
        page.goto(path.as_uri())
        page.wait_for_selector("iframe.bioviz-point-cloud", timeout=30_000)
        frame = page.frames[1]
        frame.wait_for_function("window.pointCloud && window.pointCloud.metrics.firstFrameMs !== null",
                                timeout=30_000)
        yield page
        assert not errors, errors


def cloud_frame(page):
    return page.frames[1]


def test_the_widget_draws_both_panels_from_the_binary_buffers(page, widget):
    frame = cloud_frame(page)
    assert frame.evaluate("window.pointCloud.metrics.error") is None
    assert frame.evaluate("window.pointCloud.state.n") == 400
    assert frame.inner_text("#title") == "synthetic, 400 points"
    inked = frame.evaluate("""() => ['a', 'b'].map(p => { const c = document.getElementById('panel-' + p);
        const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data; let n = 0;
        for (let i = 0; i < d.length; i += 4) if (d[i] < 250 || d[i + 1] < 250 || d[i + 2] < 250) n++;
        return n; })""")
    assert min(inked) > 500


def test_a_box_selected_in_the_browser_is_read_back_in_python_as_names(page, widget):
    frame = cloud_frame(page)
    iframe = page.locator("iframe.bioviz-point-cloud").bounding_box()
    canvas = frame.evaluate("document.getElementById('panel-b').getBoundingClientRect().toJSON()")
    x, y = iframe["x"] + canvas["x"] + canvas["width"] / 2, iframe["y"] + canvas["y"] + canvas["height"] / 2
    page.keyboard.down("Shift")  # shift + drag: a box over the compared panel's upper-left quarter
    page.mouse.move(x - canvas["width"] / 2 + 2, y - canvas["height"] / 2 + 2)
    page.mouse.down()
    page.mouse.move(x - 5, y - 5, steps=8)
    page.mouse.up()
    page.keyboard.up("Shift")
    chosen = frame.evaluate("Array.from(window.pointCloud.state.selected)")
    assert len(chosen) > 20
    to_python(widget, page)
    expected = sorted({int(widget.cloud.order[i]) for i in chosen})
    assert widget.selected_rows.tolist() == expected
    assert widget.selected_names == [f"name {row}" for row in expected]
    # the upper-left cluster is class C (its names are rows 200-299): the box holds it, not the others
    assert all(200 <= row < 300 for row in expected)


def test_a_click_and_a_python_selection_go_both_ways(page, widget):
    frame = cloud_frame(page)
    frame.evaluate("window.pointCloud.select([3])")  # what a click on point 3 calls
    to_python(widget, page)
    assert widget.selected_names == [f"name {int(widget.cloud.order[3])}"]
    widget.select(["name 5", "name 7"])  # Python -> the frame: the comm sets the model's value
    page.evaluate("points => window.model.set('selected_points', points)", list(widget.selected_points))
    drawn = frame.evaluate("Array.from(window.pointCloud.state.selected)")
    assert sorted(int(widget.cloud.order[i]) for i in drawn) == [5, 7]
    to_python(widget, page)  # the frame's answer agrees: nothing changes
    assert widget.selected_names == ["name 5", "name 7"]
