"""AppTest of the Neighbours page's first-hour fixes: codes resolve, waits are announced, runs by their names."""

from __future__ import annotations

import json

import pytest

from bioviz.errors import BiovizError

PAGE = "app_pages/4_Neighbours.py"


@pytest.fixture
def app(app_home, data_dir, open_app):
    return open_app(PAGE, {"source": str(data_dir / "mini.obo"), "depth": "1", "model_a": "minilm",
                           "model_b": "char-tfidf"}, timeout=240)


def markdown_of(at) -> str:
    return " ".join(m.value for m in at.markdown)


@pytest.mark.parametrize("typed", ["MINI:0000011", "mini:0000011"])
def test_an_exact_code_ranks_its_concepts_name_and_says_so(app, typed):
    app.query_params.update({"query": typed, "k": "3"})
    at = app.run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    text = markdown_of(at)
    assert f"{typed} → **myocardial infarction**" in text  # what was typed, and what was ranked
    assert "class **heart disease**" in text
    for table in at.table:  # the concept's name was ranked (its synonym ranks first), not the code as text
        frame = table.value
        assert "myocardial infarction" not in set(frame["Name"])
        assert frame.loc[frame["Name"] == "heart attack", "Match"].tolist() in ([], ["synonym"])
    assert at.table[0].value["Name"].iloc[0] == "heart attack"


def test_an_exact_name_in_another_case_is_the_levels_name(app):
    app.query_params["query"] = "ASTHMA"
    at = app.run()
    assert not at.exception and not at.error
    assert "ASTHMA → **asthma**" in markdown_of(at) and "free text" not in markdown_of(at)


def test_a_first_encoding_is_announced_before_it_starts(app, monkeypatch):
    from bioviz.models.encoding_estimate import EncodingEstimate

    asked = []

    def estimate(view, model, among):  # the library's estimate (tested in tests/bioviz): its line is shown
        asked.append((model.spec, among))  # the page hands over the ModelSpec it parsed once
        return EncodingEstimate(model.label, 24_461, 24_461, 360.0, 68.0)

    def encoding_stops_here(*args, **kwargs):  # the page must have spoken before this point
        raise BiovizError("stopped where the encoding would start")

    monkeypatch.setattr("bioviz.search.neighbours.first_encoding_estimate", estimate)
    monkeypatch.setattr("ui.cache.candidate_index", encoding_stops_here)
    app.query_params.update({"query": "asthma", "among": "hypernyms"})
    at = app.run()
    assert "stopped where" in at.error[0].value
    note = " ".join(i.value for i in at.info)
    assert "First use of minilm on this level: about 6 min to encode 24,461 names (measured rate 68 names/s)" in note
    assert "First use of char-tfidf" in note and asked == [("minilm", "hypernyms"), ("char-tfidf", "hypernyms")]


def test_an_index_this_session_built_is_not_estimated_again(app, monkeypatch):
    from bioviz.search import neighbours

    asked = []
    real = neighbours.first_encoding_estimate

    def estimate(view, model, among):
        asked.append(model.spec)
        return real(view, model, among)

    monkeypatch.setattr(neighbours, "first_encoding_estimate", estimate)
    app.query_params["query"] = "asthma"
    at = app.run()
    assert sorted(asked) == ["char-tfidf", "minilm"]  # said before the first use of each model here
    at.selectbox(key="nb_query").set_value("bronchitis").run()
    assert not at.exception and sorted(asked) == ["char-tfidf", "minilm"]  # a rerun asks nothing
    assert not [i for i in at.info if "First use" in i.value]


def save_head_run(path, run_id: str):
    """A head run on minilm as a training job writes it (small random head), under BIOVIZ_HOME/runs."""
    import torch

    from bioviz.models.model_spec import ModelSpec
    from bioviz.models.registry import load_encoder
    from trainer.encoders import BaseMix, ResidualEncoder
    from trainer.export import save_head_model

    torch.manual_seed(0)
    save_head_model(BaseMix(ResidualEncoder(384, 16, 0.5), 0.3, 1.0).eval(), ModelSpec.parse("minilm"), path)
    config = {"encoder": "residual", "source": "hpo", "depth": 1, "shots": 15, "input_model": "minilm",
              "base": "minilm", "base_fingerprint": load_encoder("minilm").fingerprint}
    (path / "run.json").write_text(json.dumps({"run_id": run_id, "config": config}), encoding="utf-8")
    return path


def test_runs_are_named_by_distinct_readable_labels_never_by_path(app_home, data_dir, open_app):
    from bioviz.models.runs import runs_dir

    # two runs of the same name whose short ids collide: the tables must still tell them apart
    first = save_head_run(runs_dir() / "nb-label-a", "20261122-192803-ecd5")
    second = save_head_run(runs_dir() / "nb-label-b", "20261123-101010-ecd5")
    at = open_app(PAGE, {"source": str(data_dir / "mini.obo"), "depth": "1", "model_a": str(first),
                         "model_b": str(second), "query": "asthma"}).run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    headers = " ".join(m.value for m in at.markdown).replace("\\", "")
    assert "**residual · HPO d1 · 15-shot (20261122-192803-ecd5)**" in headers
    assert "**residual · HPO d1 · 15-shot (20261123-101010-ecd5)**" in headers
    assert str(app_home) not in headers and "nb-label" not in headers


def test_the_image_ready_table_is_built_only_when_open_at_its_own_width(app, monkeypatch):
    import streamlit

    widths = []
    draw = streamlit.plotly_chart

    def spy(fig, *args, **kwargs):
        widths.append(kwargs.get("width"))
        return draw(fig, *args, **kwargs)

    monkeypatch.setattr(streamlit, "plotly_chart", spy)
    app.query_params["query"] = "asthma"
    at = app.run()
    assert not at.exception and not at.get("plotly_chart")  # closed: no figure built on every rerun
    at.session_state["nb_image_open"] = True
    at.run()
    assert len(at.get("plotly_chart")) == 1
    assert widths[-1] == "content"  # laid out for its own width: never stretched past it
