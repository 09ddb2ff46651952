"""The point-cloud component: two aligned panels of up to millions of points in the browser.

A Streamlit custom component (``components.v1``) whose frontend is the static folder
``frontend/`` (plain JavaScript, no build step, no third-party code). The packed arrays of
:func:`bioviz.figures.point_cloud.pack_point_cloud` are passed as ``bytes`` arguments, which
Streamlit sends in the element's protobuf as binary and hands to the frame as ``Uint8Array``;
a rerun with the same arrays is sent as a reference to the cached message, not again.
"""

from __future__ import annotations

from pathlib import Path

import streamlit.components.v1 as components

from bioviz.figures.point_cloud import PointCloud

FRONTEND = Path(__file__).resolve().parent / "frontend"
PANEL_HEIGHT = 560

_component = components.declare_component("point_cloud", path=str(FRONTEND))


def point_cloud_chart(cloud: PointCloud, key: str, height: int = PANEL_HEIGHT, on_change=None) -> dict | None:
    """Draw ``cloud``; returns the component's last answer or None.

    The answer is ``{"points": [...], "seq": n, "id": "<frame>:<n>"}``; ``points`` are positions
    in the packed order (:func:`bioviz.figures.point_cloud.selected_view_rows` maps them to rows).
    """
    return _component(**cloud.args(), height=height, key=key, default=None, on_change=on_change)
