"""AppTest of app_pages/3_Similarity_matrix.py: example sets, typed terms, classes, concepts, orders, URL."""

import json

import pytest

PAGE = "app_pages/3_Similarity_matrix.py"


@pytest.fixture
def app(app_home, data_dir, open_app):
    return open_app(PAGE, {"source": str(data_dir / "views_table.tsv"), "depth": "1", "model_a": "minilm",
                           "model_b": "char-tfidf"}, timeout=240)


def heatmaps(at):
    return [json.loads(c.proto.spec) for c in at.get("plotly_chart")]


def ticks(spec):
    return [t.split("</span> ")[-1] for t in spec["layout"]["yaxis"]["ticktext"]]


def test_biolord_appendix_b_by_default_with_one_scale_per_pair(app):
    at = app.run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    pair, diff = heatmaps(at)
    assert ticks(pair)[0] == "cat fur" and ticks(pair)[-1] == "disease caused by reoviridae"
    assert len(ticks(pair)) == 12
    # one scale for both panels (the other traces are the class-square legend's entries)
    assert [t["coloraxis"] for t in pair["data"] if t["type"] == "heatmap"] == ["coloraxis", "coloraxis"]
    assert diff["data"][0]["zmin"] == -diff["data"][0]["zmax"]
    assert "minilm vs char-tfidf" in pair["layout"]["title"]["text"]
    assert "biolord_appendix_b" in pair["layout"]["title"]["text"]
    assert pair["data"][0]["texttemplate"] == "%{text}"  # values printed in the cells (never "-0.00")
    assert all(cell != "-0.00" for row in pair["data"][0]["text"] for cell in row)
    changes = at.dataframe[0].value
    assert len(changes) == 15 and changes["difference"].abs().is_monotonic_decreasing


def test_typed_terms_clustered_and_kept_in_the_url(app):
    app.query_params.update({"from": "typed", "order": "cluster",
                             "terms": "heart attack\nmyocardial infarction\nbroken hip\nhip fracture"})
    at = app.run()
    assert not at.exception and not at.error
    order = ticks(heatmaps(at)[0])
    assert sorted(order) == sorted(["heart attack", "myocardial infarction", "broken hip", "hip fracture"])
    assert abs(order.index("broken hip") - order.index("hip fracture")) == 1
    value = at.query_params["terms"]
    assert "broken hip" in (value[0] if isinstance(value, list) else value)
    assert "example" not in at.query_params


def test_class_names_coloured_by_class(app):
    app.query_params.update({"from": "class", "cls": "C3", "limit": "6", "colour": "class", "order": "group"})
    at = app.run()
    assert not at.exception and not at.error
    assert len(ticks(heatmaps(at)[0])) == 6
    assert "C3" in heatmaps(at)[0]["layout"]["title"]["text"]


def test_typed_terms_coloured_by_class_name_the_classes_and_the_level(app):
    app.query_params.update({"from": "typed", "colour": "class",
                             "terms": "influenza\nheart attack\nangina pectoris\nviral infection"})
    at = app.run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    pair = heatmaps(at)[0]
    legend = [t["name"] for t in pair["data"] if t.get("showlegend")]
    assert "C1 infection" in legend and "C2 cardiovascular disease" in legend  # the squares' legend has names
    title = pair["layout"]["title"]["text"]
    assert title.startswith("Cosine similarity of 4 typed terms") and "views_table · R depth 1" in title


def test_concept_with_siblings_and_bad_input_errors(app):
    app.query_params.update({"from": "concept", "concept": "C211"})
    at = app.run()
    assert not at.exception and not at.error
    assert {"heart attack", "angina pectoris"} <= set(ticks(heatmaps(at)[0]))
    at.text_input(key="concept").set_value("no such concept anywhere").run()
    assert not at.exception and "no concept" in at.error[0].value
    at.radio(key="from").set_value("typed").run()
    at.text_area(key="terms").set_value("only one term").run()
    assert not at.exception and "at least two terms" in at.error[0].value


def test_a_level_with_many_classes_lists_a_bounded_number_and_finds_the_others(app, monkeypatch):
    """Issue 16: a deep level has tens of thousands of classes; the picker sends at most MAX_CLASS_OPTIONS."""
    from bioviz.views import similarity

    monkeypatch.setattr(similarity, "MAX_CLASS_OPTIONS", 2)  # this level has 4 classes
    app.query_params.update({"from": "class", "limit": "6"})
    at = app.run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert at.selectbox(key="cls").options == ["C1 · infection", "C2 · cardiovascular disease"]
    assert any("4 classes: the list shows 2 first ones" in c.value for c in at.caption)
    at.text_input(key="_cls_find").set_value("injur").run()
    assert not at.exception and at.selectbox(key="cls").value == "C3"
    assert at.selectbox(key="cls").options == ["C3 · injury"]
