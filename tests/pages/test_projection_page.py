"""AppTest of app_pages/2_Projection.py: aligned PCA/UMAP panels, caching, selection, separation, URL state."""

import json

import numpy as np
import pytest

PAGE = "app_pages/2_Projection.py"


@pytest.fixture
def app(app_home, data_dir, open_app):
    return open_app(PAGE, {"source": str(data_dir / "views_table.tsv"), "depth": "1", "model_a": "minilm",
                           "model_b": "char-tfidf"}, timeout=300)


def param(at, key):
    value = at.query_params[key]
    return value[0] if isinstance(value, list) else value


def charts(at):
    return [json.loads(c.proto.spec) for c in at.get("plotly_chart")]


def test_pca_panels_separation_and_url(app):
    app.query_params["method"] = "pca"
    app.query_params["cap"] = "500"
    at = app.run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    specs = charts(at)
    # the projection pair and the per-class separation; what training moved is for a run against its base
    assert len(specs) == 2
    title = specs[0]["layout"]["title"]["text"]
    assert title.startswith("PCA · minilm vs char-tfidf") and "views_table" in title
    points = [p for t in specs[0]["data"] for p in (t.get("customdata") or [])]
    assert len(points) == 2 * 70  # every name of the view, in both panels
    assert {m.label.split(" · ")[1] for m in at.metric} == {"minilm", "char-tfidf"}
    assert param(at, "method") == "pca" and param(at, "cap") == "500" and param(at, "nn") == "15"


def test_umap_is_computed_once_then_read_from_the_disk_cache(app, shared_home, open_app):
    app.query_params["nn"] = "8"
    at = app.run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert charts(at)[0]["layout"]["title"]["text"].startswith("UMAP · minilm vs char-tfidf")
    cached = set((shared_home / "projections").glob("*.npz"))
    assert len(cached) >= 4  # UMAP and the PCA preview, for both models
    # A new session (fresh app) finds the layout on disk: no PCA preview, no new files.
    again = open_app(PAGE, dict(app.query_params), timeout=300).run()
    assert not again.exception
    assert set((shared_home / "projections").glob("*.npz")) == cached
    assert "preview" not in charts(again)[0]["layout"]["title"]["text"]


def test_selected_names_are_listed_and_highlighted(app):
    app.query_params["method"] = "pca"
    at = app.run()
    at.session_state["_projection_selected"] = np.array([0, 1, 2])
    at.run()
    assert not at.exception
    assert any("3 selected names" in m.value for m in at.markdown)
    names = [t for t in charts(at)[0]["data"] if t.get("legendgroup") == "selected"]
    assert len(names) == 2 and all(len(t["customdata"]) == 3 for t in names)
    at.button[0].click().run()
    assert not any("selected names" in m.value for m in at.markdown)


def test_highlighted_classes_and_the_labelled_map_come_from_the_url_and_go_back_into_it(app):
    app.query_params.update({"method": "pca", "hl": "C1,C3,NOT-A-CLASS", "map": "1"})
    at = app.run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert at.multiselect(key="hl").value == ["C1", "C3"]  # the link's unknown class is dropped
    assert at.toggle(key="map").value is True
    assert param(at, "hl") == "C1,C3" and param(at, "map") == "True"
    spec = charts(at)[0]
    legend = [t["name"] for t in spec["data"] if t.get("showlegend")]
    assert any(name.startswith("other classes") for name in legend)  # the rest share one grey entry
    contours = [t for t in spec["data"] if t["type"] == "contour"]
    assert {t["legendgroup"] for t in contours} <= {"C1", "C3"} and contours
    assert "density peak" in spec["layout"]["annotations"][-1]["text"]  # the caption says what the lines are
    at.multiselect(key="hl").set_value([]).run()
    at.toggle(key="map").set_value(False).run()
    assert "hl" not in at.query_params  # an emptied list leaves the link
    assert not [t for t in charts(at)[0]["data"] if t["type"] == "contour"]


def test_3d_and_parameters_from_the_url(app):
    app.query_params.update({"method": "pca", "dims": "3", "cap": "40", "measure": "silhouette"})
    at = app.run()
    assert not at.exception and not at.error
    spec = charts(at)[0]
    assert any(t["type"] == "scatter3d" for t in spec["data"])
    points = [p for t in spec["data"] for p in (t.get("customdata") or [])]
    assert len(points) == 2 * 40  # the class-stratified cap
    assert "silhouette" in charts(at)[1]["layout"]["xaxis"]["title"]["text"]


def test_a_missing_model_is_a_one_line_error(app, tmp_path):
    app.query_params["model_b"] = str(tmp_path / "no-such-model")
    at = app.run()
    assert not at.exception
    assert len(at.error) == 1 and "not found" in at.error[0].value


def test_page_settings_survive_a_trip_to_another_page(app_home, data_dir, open_app):
    at = open_app(None, {"source": str(data_dir / "views_table.tsv"), "depth": "1"}, timeout=300)
    at.run()
    at.switch_page("app_pages/2_Projection.py").run()
    at.radio(key="method").set_value("pca").run()
    at.number_input(key="cap").set_value(40).run()
    at.switch_page("app_pages/3_Similarity_matrix.py").run()
    at.query_params.clear()  # a link in the page list opens the page without parameters
    at.switch_page("app_pages/2_Projection.py").run()
    assert not at.exception
    assert at.number_input(key="cap").value == 40 and at.radio(key="method").value == "pca"


@pytest.fixture
def zero_shot_run(shared_home, monkeypatch, data_dir):
    """A real residual run on the view's level, trained with 1 zero-shot class (trained once per session)."""
    monkeypatch.setenv("BIOVIZ_HOME", str(shared_home))
    out = shared_home / "runs" / "zero-shot-run"
    if not (out / "run.json").is_file():
        from trainer.config import TrainConfig, validate
        from trainer.runs import train_run

        train_run(validate(TrainConfig(source=str(data_dir / "views_table.tsv"), depth=1, shots=2, seed=5,
                                       zero_shot_classes=1, hidden=32, epochs=2, device="cpu")), out)
    return out


def test_markers_show_the_compared_runs_own_split(app, zero_shot_run):
    app.query_params.update({"method": "pca", "model_b": str(zero_shot_run)})
    at = app.run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    spec = charts(at)[0]
    caption = spec["layout"]["annotations"][-1]["text"]
    assert ("markers: residual · views_table d1 · 2-shot (zero-shot-run)'s own split "
            "(2 shots, seed 5, 1 zero-shot classes)") in caption  # the run's readable label (issue 14)
    split = json.loads((zero_shot_run / "split.json").read_text())
    by_part = {}
    for trace in spec["data"]:
        part = (trace.get("hovertemplate") or "").rsplit("<br>", 1)[-1].replace("<extra></extra>", "")
        by_part.setdefault(part, set()).update(p[1] for p in trace.get("customdata") or [])
    assert by_part["zero-shot"] == set(split["zero_shot"]) and by_part["train"] == set(split["train"])
    assert at.number_input(key="shots").disabled
    assert spec["layout"]["title"]["text"].startswith(
        "PCA · minilm vs residual · views_table d1 · 2-shot (zero-shot-run) · views_table")


def test_what_training_moved_with_a_runs_split(app, zero_shot_run):
    app.query_params.update({"method": "pca", "model_b": str(zero_shot_run), "mv_class": "C2", "mv_n": "20"})
    at = app.run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    run = "residual · views_table d1 · 2-shot (zero-shot-run)"
    moved = next(s for s in charts(at) if s["layout"]["title"]["text"].startswith("What training moved"))
    assert f"minilm → {run}" in moved["layout"]["title"]["text"]
    heads = [t for t in moved["data"] if t.get("customdata")]
    assert heads and {row[3] for t in heads for row in t["customdata"]} == {"cardiovascular disease"}  # C2's names
    split = json.loads((zero_shot_run / "split.json").read_text())
    summary, movers = at.dataframe[0].value, at.dataframe[1].value
    assert "zero-shot" in set(summary["part"]) and summary["names"].sum() == 70
    assert list(movers.columns[5:7]) == ["p@10 minilm", f"p@10 {run}"]
    zero = set(movers.loc[movers["part"] == "zero-shot", "name"])
    assert zero and zero <= set(split["zero_shot"])
    assert movers["change"].abs().is_monotonic_decreasing
    assert any(b.label == "Download numbers (CSV, 70 rows)" for b in at.get("download_button"))
    assert param(at, "mv_class") == "C2" and param(at, "mv_n") == "20"


def test_a_run_of_another_level_falls_back_to_the_pages_split(app, zero_shot_run):
    app.query_params.update({"method": "pca", "depth": "2", "model_b": str(zero_shot_run)})
    at = app.run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    caption = charts(at)[0]["layout"]["annotations"][-1]["text"]
    assert "markers: split with 15 shots, seed 0, no zero-shot classes (zero-shot-run was trained on another level)" \
        in caption
    assert not at.number_input(key="shots").disabled


def test_a_second_visit_reuses_the_built_figure(app, monkeypatch, open_app):
    import bioviz.figures as figures

    built = []
    real = figures.projection_pair_figure
    monkeypatch.setattr(figures, "projection_pair_figure", lambda *a, **k: built.append(1) or real(*a, **k))
    app.query_params.update({"method": "pca", "cap": "33"})
    at = app.run()
    assert not at.exception and len(built) == 1
    again = open_app(PAGE, {k: (v[0] if isinstance(v, list) else v) for k, v in app.query_params.items()},
                     timeout=300).run()
    assert not again.exception and len(built) == 1  # a new session, the same figure
    assert charts(again)[0] == charts(at)[0]
    # The CSV is built only when its button is clicked.
    assert [b.label for b in again.get("download_button")][0] == "Download numbers (CSV, 33 rows)"
    again.session_state["_projection_selected"] = np.array([0])
    again.run()
    assert len(built) == 2  # a selection changes what is drawn


def test_a_run_renamed_after_its_vectors_were_cached_is_titled_by_its_new_name(app, zero_shot_run, open_app):
    from bioviz.models.runs import set_run_name

    app.query_params.update({"method": "pca", "model_b": str(zero_shot_run)})
    first = app.run()
    assert not first.exception
    set_run_name(zero_shot_run, "Lizard bites")
    try:
        at = open_app(PAGE, {k: (v[0] if isinstance(v, list) else v) for k, v in app.query_params.items()},
                      timeout=300).run()
        assert not at.exception and not at.error, [e.value for e in at.error]
        titles = [spec["layout"]["title"]["text"] for spec in charts(at)]
        assert len(titles) == 3 and all("Lizard bites (zero-shot-run)" in t for t in titles)
        assert "Lizard bites (zero-shot-run)" in at.metric[1].label
    finally:
        set_run_name(zero_shot_run, None)


def test_what_training_moved_is_offered_only_for_a_run_against_its_base(app):
    """minilm vs minilm (or vs char-tfidf): nothing was trained, so no arrows and no movers table."""
    app.query_params.update({"method": "pca", "model_b": "minilm"})
    at = app.run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert not [s for s in charts(at) if s["layout"]["title"]["text"].startswith("What training moved")]
    assert "shown when one model is a run trained from the other" in " ".join(c.value for c in at.caption)
    assert not any("p@10" in " ".join(map(str, d.value.columns)) for d in at.dataframe)


def test_one_model_draws_a_single_panel(app):
    app.query_params.update({"method": "pca", "one": "True"})
    at = app.run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    spec = charts(at)[0]
    assert "xaxis2" not in spec["layout"] and " vs " not in spec["layout"]["title"]["text"]


def cloud_payload(at):
    """The point-cloud component's arguments: JSON settings and the binary arrays as bytes."""
    (element,) = at.get("component_instance")
    proto = element.proto
    assert proto.component_name == "ui.point_cloud.point_cloud"
    return json.loads(proto.json_args), {arg.key: arg.bytes for arg in proto.special_args}


@pytest.fixture
def cloud_app(app, monkeypatch):
    """The page with the point-cloud renderer taking over above 50 points (the test level has 70)."""
    import bioviz.figures.point_cloud as point_cloud

    monkeypatch.setattr(point_cloud, "POINT_CLOUD_ABOVE", 50)
    app.query_params["method"] = "pca"
    return app


def test_above_the_threshold_the_point_cloud_component_gets_binary_arrays(cloud_app):
    at = cloud_app.run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert len(charts(at)) == 1  # no plotly projection: the separation remains (nothing trained: no arrows)
    settings, binary = cloud_payload(at)
    n = settings["points"]
    assert n == 70 and settings["title"].startswith("PCA · minilm vs char-tfidf")
    assert "views_table" in settings["title"]
    assert settings["panel_titles"] == ["minilm", "char-tfidf"]
    assert len(binary["positions_a"]) == len(binary["positions_b"]) == 8 * n and len(binary["classes"]) == n
    offsets = np.frombuffer(binary["name_offsets"], dtype="<u4")
    names = [binary["names"][a:b].decode() for a, b in zip(offsets[:-1], offsets[1:])]
    # the numbers behind the panels
    assert [b.label for b in at.get("download_button")].count("Download numbers (CSV, 70 rows)") == 1
    assert len(set(names)) == 70 and np.isfinite(np.frombuffer(binary["positions_a"], dtype="<f4")).all()
    assert any("Renderer: 70 points per panel: drawn by the point-cloud renderer" in c.value for c in at.caption)


def test_a_selection_made_in_the_point_cloud_is_listed(cloud_app):
    at = cloud_app.run()
    _, binary = cloud_payload(at)
    offsets = np.frombuffer(binary["name_offsets"], dtype="<u4")
    picked = {binary["names"][offsets[i]:offsets[i + 1]].decode() for i in (0, 5, 9)}
    at.session_state["projection_cloud"] = {"points": [0, 5, 9], "seq": 1, "id": "frame:1"}  # what the browser answers
    at.run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert any("3 selected names" in m.value for m in at.markdown)
    assert set(at.dataframe[0].value["name"]) == picked
    assert not [b for b in at.button if b.label == "Clear selection"]  # Esc clears it in the component


def test_the_plotly_path_says_which_renderer_and_why(app):
    app.query_params.update({"method": "pca", "cap": "40"})
    at = app.run()
    assert not at.exception and not at.get("component_instance")
    assert any("Renderer: 40 points per panel: drawn with plotly" in c.value for c in at.caption)
