"""``python -m bioviz project``: JSON contract, the projection cache, one-line errors."""

import json

import numpy as np
import pytest

from bioviz.cli import main
from bioviz.models.registry import embed
from bioviz.ontology import LevelSpec
from bioviz.views.projection import ProjectionParams, project, stratified_sample


def run_cli(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.slow  # over 5 s in a full run (CI lists the times)
def test_project_computes_then_reads_the_cache(capsys, data_dir, tmp_home):
    argv = ["project", str(data_dir / "mini.obo"), "--model", "char-tfidf", "--depth", "1", "--method", "umap",
            "--n-neighbors", "5", "--quiet", "--json"]
    code, out, _ = run_cli(capsys, *argv)
    first = json.loads(out)
    assert code == 0 and first["from_cache"] is False and first["method"] == "umap"
    assert first["points"] == first["names"] > 5 and first["n_components"] == 2 and first["seconds"] > 0
    code, out, _ = run_cli(capsys, *argv)
    second = json.loads(out)
    assert code == 0 and second["from_cache"] is True and second["points"] == first["points"]
    # the very coordinates the app's projection (same params, same sample) reads back
    view = LevelSpec(str(data_dir / "mini.obo"), depth=1).load()
    params = ProjectionParams(method="umap", n_neighbors=5)
    rows = stratified_sample(view.labels, params.max_points, params.seed)
    coords = project(embed(view.names, "char-tfidf"), params, rows=rows)
    assert coords.shape == (first["points"], 2) and np.isfinite(coords).all()
    assert len(list((tmp_home / "projections").glob("*.npz"))) == 1


def test_project_caps_points_per_class_with_pca(capsys, data_dir, tmp_home):
    code, out, _ = run_cli(capsys, "project", str(data_dir / "mini.obo"), "--model", "char-tfidf", "--depth", "1",
                           "--method", "pca", "--max-points", "10", "--quiet", "--json")
    result = json.loads(out)
    assert code == 0 and result["points"] == 10 < result["names"] and result["method"] == "pca"


def test_bad_settings_are_one_line_errors(capsys, data_dir, tmp_home):
    code, out, err = run_cli(capsys, "project", str(data_dir / "mini.obo"), "--max-points", "3", "--json")
    assert code == 2 and not out and err.startswith("error: ") and err.count("\n") == 1


def test_a_large_view_takes_the_landmark_path_with_progress_on_stderr(capsys, data_dir, tmp_home, monkeypatch):
    from bioviz.views import fast_umap

    monkeypatch.setattr(fast_umap, "LANDMARK_THRESHOLD", 5)  # mini.obo's level counts as large
    monkeypatch.setattr(fast_umap, "LANDMARKS", 8)
    monkeypatch.setattr(fast_umap, "_cuml_present", lambda: False)
    argv = ["project", str(data_dir / "mini.obo"), "--model", "char-tfidf", "--depth", "1", "--method", "umap",
            "--n-neighbors", "4", "--json"]
    code, out, err = run_cli(capsys, *argv)
    result = json.loads(out)
    assert code == 0 and result["from_cache"] is False and result["points"] == result["names"] > 8
    assert "umap of" in err and "1000/1000" in err  # the landmark path's steps, drawn with tqdm's time left
    code, out, _ = run_cli(capsys, *argv)
    assert code == 0 and json.loads(out)["from_cache"] is True
    monkeypatch.setattr(fast_umap, "LANDMARK_THRESHOLD", 10_000)  # plain umap-learn: not the landmark layout
    code, out, _ = run_cli(capsys, *argv + ["--quiet"])
    assert code == 0 and json.loads(out)["from_cache"] is False
