"""A tiny Streamlit script for the point-cloud browser test: ``?n=`` synthetic points in 5 classes."""

from types import SimpleNamespace

import numpy as np
import streamlit as st

from bioviz.figures.point_cloud import pack_point_cloud, selected_view_rows
from ui.point_cloud import point_cloud_chart

n = int(st.query_params.get("n", "3000"))
rng = np.random.default_rng(0)
labels = rng.integers(0, 5, n)
view = SimpleNamespace(names=[f"name {i}" for i in range(n)], labels=labels, classes=[f"C{i}" for i in range(5)],
                       class_labels=[f"class {i}" for i in range(5)])
coords = rng.normal(size=(n, 2)) + np.c_[labels * 3.0, labels % 2 * 3.0]
cloud = pack_point_cloud(view, np.arange(n), coords, coords[:, ::-1] * 0.8, model_a="model A", model_b="model B",
                         title=f"UMAP · model A vs model B · synthetic, {n:,} points", caption="synthetic clusters")
value = point_cloud_chart(cloud, key="cloud")
rows = selected_view_rows(value, cloud)
st.markdown(f"selected {len(rows)}: " + ", ".join(view.names[r] for r in rows[:5]))
