import dataclasses

import numpy as np
import pytest

import bioviz.figures.point_cloud as point_cloud
from bioviz.figures.point_cloud import choose_renderer, pack_point_cloud, selected_view_rows
from bioviz.figures.theme import class_colours, theme
from tests.bioviz.figures.figure_samples import hpo_view, umap_like_coords


def unpack(cloud):
    """The packed arrays back as numpy, as the browser reads them."""
    n = cloud.n_points
    names = [cloud.names[a:b].decode("utf-8") for a, b in
             zip(*(lambda o: (o[:-1], o[1:]))(np.frombuffer(cloud.name_offsets, dtype="<u4")))]
    classes = np.frombuffer(cloud.classes, dtype=np.uint8 if cloud.class_bytes == 1 else np.uint16)
    return (np.frombuffer(cloud.positions_a, dtype="<f4").reshape(n, 2),
            np.frombuffer(cloud.positions_b, dtype="<f4").reshape(n, 2), classes, names)


@pytest.fixture(scope="module")
def sample():
    view = hpo_view(names_per_class=20)
    rows = np.arange(0, len(view.names), 2)
    coords_a, coords_b = umap_like_coords(view)
    return view, rows, coords_a[rows], coords_b[rows]


def test_packed_arrays_hold_each_points_position_class_and_name_in_one_shuffled_order(sample):
    view, rows, coords_a, coords_b = sample
    cloud = pack_point_cloud(view, rows, coords_a, coords_b, model_a="minilm", model_b="run",
                             title="UMAP · minilm vs run · HPO d1")
    pos_a, pos_b, classes, names = unpack(cloud)
    assert sorted(cloud.order) == list(rows) and list(cloud.order) != list(rows)  # every row once, shuffled
    where = {r: i for i, r in enumerate(rows)}
    back = np.array([where[r] for r in cloud.order])
    np.testing.assert_allclose(pos_a, coords_a[back], rtol=1e-6)
    np.testing.assert_allclose(pos_b, coords_b[back], rtol=1e-6)
    assert list(classes) == list(view.labels[cloud.order])
    assert names == [view.names[r] for r in cloud.order]
    # 8 bytes of position per point and panel, 1 of class, 4 of name offset, plus the names
    assert cloud.nbytes == 16 * len(rows) + len(rows) + 4 * (len(rows) + 1) + len(cloud.names)
    args = cloud.args()
    assert all(isinstance(args[k], bytes) for k in ("positions_a", "positions_b", "classes", "names", "name_offsets"))
    assert args["title"] == "UMAP · minilm vs run · HPO d1" and args["panel_titles"] == ["minilm", "run"]


def test_colours_come_from_the_one_palette_and_highlighted_classes_keep_theirs(sample):
    view, rows, coords_a, coords_b = sample
    hexes = class_colours(view.classes)
    cloud = pack_point_cloud(view, rows, coords_a, coords_b, model_a="a", model_b="b", title="t")
    rgb = lambda h: [int(h[i:i + 2], 16) for i in (1, 3, 5)]  # noqa: E731
    assert cloud.settings["palette"] == [rgb(hexes[c]) for c in view.classes]
    assert len(cloud.settings["legend"]) == len(view.classes)
    picked = pack_point_cloud(view, rows, coords_a, coords_b, model_a="a", model_b="b", title="t",
                              highlight_classes=[view.classes[3]])
    palette = picked.settings["palette"]
    grey = rgb(theme()["other_classes"])
    assert palette[3] == rgb(hexes[view.classes[3]]) and all(palette[i] == grey for i in range(len(palette)) if i != 3)
    assert [e["label"] for e in picked.settings["legend"]] == [f"{view.classes[3]} {view.class_labels[3]}",
                                                               f"other classes ({len(view.classes) - 1})"]


def test_view_bounds_leave_far_outliers_out_and_the_data_id_follows_the_data(sample):
    view, rows, coords_a, coords_b = sample
    cloud = pack_point_cloud(view, rows, coords_a, coords_b, model_a="a", model_b="b", title="t")
    x0, x1, y0, y1 = cloud.settings["bounds"]
    assert x1 - x0 < 40 and y1 - y0 < 40  # the outliers sit 40-60 away; the bulk is within ~15
    moved = pack_point_cloud(view, rows, coords_a + 1, coords_b, model_a="a", model_b="b", title="t")
    assert moved.settings["data_id"] != cloud.settings["data_id"]
    again = pack_point_cloud(view, rows, coords_a, coords_b, model_a="a", model_b="b", title="t")
    assert again.settings["data_id"] == cloud.settings["data_id"]


def test_more_than_256_classes_take_two_bytes_a_point():
    view = hpo_view(names_per_class=1)
    view = dataclasses.replace(view, classes=[f"C{i}" for i in range(300)], class_labels=[f"c{i}" for i in range(300)],
                               labels=np.arange(len(view.names)) * 13 % 300)
    coords = np.random.default_rng(0).normal(size=(len(view.names), 2))
    cloud = pack_point_cloud(view, np.arange(len(view.names)), coords, coords, model_a="a", model_b="b", title="t")
    assert cloud.class_bytes == 2
    assert list(unpack(cloud)[2]) == list(view.labels[cloud.order])


def test_a_3d_layout_is_refused(sample):
    view, rows, coords_a, _ = sample
    three = np.c_[coords_a, coords_a[:, 0]]
    with pytest.raises(ValueError, match="2-D"):
        pack_point_cloud(view, rows, three, three, model_a="a", model_b="b", title="t")


def test_selected_positions_map_back_to_view_rows(sample):
    view, rows, coords_a, coords_b = sample
    cloud = pack_point_cloud(view, rows, coords_a, coords_b, model_a="a", model_b="b", title="t")
    picked = selected_view_rows({"points": [3, 0, 3, cloud.n_points + 5, -1], "seq": 2}, cloud)
    assert list(picked) == sorted({int(cloud.order[3]), int(cloud.order[0])})  # stale positions ignored
    assert len(selected_view_rows(None, cloud)) == 0 and len(selected_view_rows({"points": []}, cloud)) == 0


def test_the_renderer_is_chosen_by_point_count(monkeypatch):
    assert choose_renderer(100_000)[0] == "plotly"
    renderer, why = choose_renderer(100_001)
    assert renderer == "point cloud" and "100,001 points per panel" in why
    monkeypatch.setattr(point_cloud, "POINT_CLOUD_ABOVE", 10)
    assert choose_renderer(11)[0] == "point cloud"


def test_names_that_are_not_ascii_keep_their_utf8_byte_offsets(sample):
    view, rows, coords_a, coords_b = sample
    names = list(view.names)
    names[rows[0]] = "Sjögren syndrome – ß"
    names[rows[1]] = "淋巴瘤"
    view = dataclasses.replace(view, names=names)
    cloud = pack_point_cloud(view, rows, coords_a, coords_b, model_a="a", model_b="b", title="t")
    assert unpack(cloud)[3] == [names[r] for r in cloud.order]
