"""The point-cloud canvas as a Jupyter widget: two aligned panels, linked by selection, read back as names.

The Projection page's renderer for millions of points (``ui/point_cloud/frontend``: plain JavaScript,
no build step) runs here unchanged: the widget's ES module (anywidget) puts the frontend's
``index.html``, with ``point_cloud.js`` inlined, in an iframe and speaks to it as Streamlit does
(the component protocol, apiVersion 1): it posts ``streamlit:render`` with the packed arrays of
:func:`bioviz.figures.point_cloud.pack_point_cloud`, and turns the frame's
``streamlit:setComponentValue`` (the selected points, in the packed order) into the widget's
``selected_points``, which the notebook's comm brings back to Python; :attr:`PointCloudWidget.selected_names`
maps them to the level's names with :func:`bioviz.figures.point_cloud.selected_view_rows`, as the page
does. So there is one copy of the renderer, and this module reads it by path; it never imports
streamlit (``ui/point_cloud/__init__.py`` does, for the app).

The arrays travel as the widget's binary buffers (ipywidgets sends ``bytes`` in a synced dict as
buffers, not as JSON text), about 9 bytes a point for both panels plus the names.
"""

from __future__ import annotations

import json
from pathlib import Path

import anywidget
import numpy as np
import traitlets

from bioviz.errors import BiovizError
from bioviz.figures.point_cloud import PointCloud, pack_point_cloud, selected_view_rows
from bioviz.models.model_spec import DEFAULT_MODEL, ModelSpec
from bioviz.ontology.levels import LevelView

FRONTEND = Path(__file__).resolve().parents[1] / "ui" / "point_cloud" / "frontend"
PANEL_HEIGHT = 560  # as the Projection page draws it (ui/point_cloud.PANEL_HEIGHT)
BINARY_KEYS = ("positions_a", "positions_b", "classes", "names", "name_offsets")

# The host side of the frame: what Streamlit's page does for a component, and the widget's sync.
_BRIDGE = """
const asBytes = (v) => v instanceof DataView ? new Uint8Array(v.buffer, v.byteOffset, v.byteLength)
  : v instanceof ArrayBuffer ? new Uint8Array(v) : v;

function render({ model, el }) {
  const frame = document.createElement("iframe");
  frame.className = "bioviz-point-cloud";
  frame.style.cssText = "width: 100%; border: 0; display: block;";
  frame.style.height = (model.get("height") + 140) + "px";
  frame.srcdoc = PAGE;
  el.appendChild(frame);
  let ready = false;
  const send = () => {
    if (!ready || !frame.contentWindow) return;
    const payload = model.get("payload") || {};
    const args = {};
    for (const [key, value] of Object.entries(payload)) args[key] = asBytes(value);
    args.height = model.get("height");
    frame.contentWindow.postMessage({ type: "streamlit:render", args: args }, "*");
  };
  const onMessage = (event) => {
    if (event.source !== frame.contentWindow) return;
    const data = event.data;
    if (!data || !data.isStreamlitMessage) return;
    if (data.type === "streamlit:componentReady") { ready = true; send(); }
    else if (data.type === "streamlit:setFrameHeight") frame.style.height = data.height + "px";
    else if (data.type === "streamlit:setComponentValue") {
      // The selection, as positions in the packed order: Python maps them to names.
      model.set("selected_points", Array.from(data.value.points || []));
      model.save_changes();
    }
  };
  window.addEventListener("message", onMessage);
  const fromPython = () => {
    // A selection set in Python (widget.select): drawn in both panels, unless the frame has it already.
    const cloud = frame.contentWindow && frame.contentWindow.pointCloud;
    const wanted = model.get("selected_points") || [];
    if (!cloud) return;
    const have = Array.from(cloud.state.selected), want = [...wanted].sort((a, b) => a - b);
    if (have.length === want.length && have.every((v, k) => v === want[k])) return;
    cloud.select(want);
  };
  model.on("change:payload", send);
  model.on("change:height", send);
  model.on("change:selected_points", fromPython);
  return () => {
    window.removeEventListener("message", onMessage);
    model.off("change:payload", send);
    model.off("change:height", send);
    model.off("change:selected_points", fromPython);
  };
}

export default { render };
"""


def frontend_page() -> str:
    """The frontend's ``index.html`` with ``point_cloud.js`` inlined: one document an iframe's ``srcdoc`` holds."""
    html = (FRONTEND / "index.html").read_text(encoding="utf-8")
    script = (FRONTEND / "point_cloud.js").read_text(encoding="utf-8")
    tag = '<script src="point_cloud.js"></script>'
    if tag not in html:
        raise BiovizError(f"{FRONTEND / 'index.html'} no longer loads point_cloud.js as {tag}")
    # "</" inside the inlined script would end the script element early
    return html.replace(tag, "<script>\n" + script.replace("</", "<\\/") + "\n</script>")


def widget_module() -> str:
    """The widget's ES module: the frontend page as a constant, then the bridge."""
    return f"const PAGE = {json.dumps(frontend_page())};\n{_BRIDGE}"


class PointCloudWidget(anywidget.AnyWidget):
    """Two aligned panels of a level's names, linked by selection; the selection read back as names.

    Select in either panel (click a point, shift + drag a box, alt + drag a lasso; Esc clears) and
    :attr:`selected_names` gives the names; :meth:`select` sets the selection from Python.

    Parameters
    ----------
    cloud : PointCloud
        The packed panels (:func:`bioviz.figures.point_cloud.pack_point_cloud`).
    names : list of str
        The level view's names (``cloud.order`` indexes them).
    height : int
        Pixels of each panel.
    """

    _esm = traitlets.Unicode("").tag(sync=True)
    payload = traitlets.Dict().tag(sync=True)
    height = traitlets.Int(PANEL_HEIGHT).tag(sync=True)
    selected_points = traitlets.List(traitlets.Int()).tag(sync=True)

    def __init__(self, cloud: PointCloud, names: list[str], height: int = PANEL_HEIGHT, **kwargs) -> None:
        if len(names) <= int(np.max(cloud.order, initial=-1)):
            raise BiovizError(f"the point cloud draws rows up to {int(np.max(cloud.order))} of {len(names)} names")
        super().__init__(_esm=widget_module(), payload=cloud.args(), height=height, **kwargs)
        self._cloud, self._names = cloud, list(names)

    @property
    def cloud(self) -> PointCloud:
        """The packed panels drawn."""
        return self._cloud

    @property
    def selected_rows(self) -> np.ndarray:
        """Level view rows of the selected points, sorted."""
        return selected_view_rows({"points": list(self.selected_points)}, self._cloud)

    @property
    def selected_names(self) -> list[str]:
        """The selected names, in the level's order."""
        return [self._names[row] for row in self.selected_rows.tolist()]

    def select(self, names) -> None:
        """Select ``names`` (those drawn; others are ignored) in both panels."""
        wanted = set(names)
        position = {int(row): k for k, row in enumerate(self._cloud.order.tolist())}
        self.selected_points = sorted(position[row] for row, name in enumerate(self._names)
                                      if name in wanted and row in position)


def point_cloud(level, model: ModelSpec | str = "minilm", compare: ModelSpec | str = DEFAULT_MODEL, *,
                method: str = "umap", max_points: int = 20_000, n_neighbors: int = 15, min_dist: float = 0.1,
                seed: int = 0, highlight_classes: list[str] | None = None, height: int = PANEL_HEIGHT,
                progress: bool = True) -> PointCloudWidget:
    """The Projection page's point-cloud canvas of a level under two models, as a notebook widget.

    Parameters
    ----------
    level : Level
        From :func:`bioviz.open_level`.
    model, compare : str or ModelSpec
        The baseline and the compared model (aligned to the baseline's layout).
    method, max_points, n_neighbors, min_dist, seed
        As :func:`bioviz.projection` (2-D only); raise ``max_points`` for the whole of a large level.
    highlight_classes : list of str, optional
        Classes drawn in colour; the others grey.
    height : int
        Pixels of each panel.
    progress : bool
        Progress bars while names are encoded.

    Returns
    -------
    PointCloudWidget
        Display it (last in a cell); ``.selected_names`` is what is selected in it.
    """
    from bioviz import api  # the notebook API's model and level handling, shared (it imports this module lazily)
    from bioviz.views.projection import ProjectionParams, project_pair  # scipy, umap

    level = api._level(level)
    params = ProjectionParams(method, 2, n_neighbors, min_dist, max_points, seed)  # checks them
    models = [api._model(model), api._model(compare)]
    view: LevelView = api._covered(level, models)
    spaces = [api._space(view, spec, progress=progress) for spec in models]
    labels = api._labels(models)
    pair = project_pair(spaces[0], spaces[1], view.labels, params)
    title = f"{params.method.upper()} · {labels[0]} vs {labels[1]} · {view.title}"
    caption = f"{params.caption()} · Procrustes disparity {pair.disparity:.3f}"
    cloud = pack_point_cloud(view, pair.rows, pair.coords_a, pair.coords_b, model_a=labels[0], model_b=labels[1],
                             title=title, caption=caption, highlight_classes=highlight_classes,
                             filename=f"{params.method}-{labels[0]}-vs-{labels[1]}")
    return PointCloudWidget(cloud, view.names, height=height)
