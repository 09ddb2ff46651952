"""AppTest of app_pages/4_Neighbours.py: two models, a query, highlighting, concept card, URL state."""

import pytest

from bioviz.search.hybrid import DEFAULT_RANKING

PAGE = "app_pages/4_Neighbours.py"
SCORE = "Score" if DEFAULT_RANKING.hybrid else "Cosine"  # the default ranking's score column


@pytest.fixture
def app(app_home, data_dir, open_app):
    return open_app(PAGE, {"source": str(data_dir / "mini.obo"), "depth": "1", "model_a": "minilm",
                           "model_b": "char-tfidf"}, timeout=240)


def test_without_a_query_the_page_asks_for_one(app):
    at = app.run()
    assert not at.exception and not at.error
    assert any("Type a name" in info.value for info in at.info)


def test_two_models_rank_neighbours_with_highlighting_and_a_concept_card(app):
    app.query_params["query"] = "heart attack"
    app.query_params["k"] = "4"
    at = app.run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    tables = at.table
    assert len(tables) == 2  # one ranking per model
    frames = [t.value for t in tables]
    for frame in frames:
        assert len(frame) == 4 and list(frame["Rank"]) == [1, 2, 3, 4]
        assert "heart attack" not in set(frame["Name"])  # the query itself is not its own neighbour
        # what a reader compares, in view side by side at 1440 px (the class is in the CSV and the image)
        assert list(frame.columns) == ["Rank", "Name", "Code", "Match", SCORE, "Δ rank"]
    # names of the query's synonym set and class are marked (and shaded: the colour travels with the table)
    minilm = frames[0].set_index("Name")
    assert minilm.loc["myocardial infarction", "Match"] == "synonym"
    assert minilm.loc["arrhythmia", "Match"] == "class"
    assert b"b7dfb0" in tables[0].proto.arrow_data.styler.styles.encode() if tables[0].proto.arrow_data.HasField(
        "styler") else b"b7dfb0" in tables[0].proto.arrow_data.data
    markdown = " ".join(m.value for m in at.markdown)
    assert "myocardial infarction" in markdown and "MINI:0000011" in markdown  # concept card
    assert "Path to root" in markdown and "heart disease" in markdown
    assert any(b.label == "Download the comparison (CSV)" for b in at.get("download_button"))


def test_query_and_k_are_written_to_the_url(app):
    at = app.run()
    at.selectbox(key="nb_query").set_value("asthma").run()
    at.number_input(key="nb_k").set_value(3).run()
    assert not at.exception and not at.error
    assert at.query_params["query"] in ("asthma", ["asthma"])
    assert at.query_params["k"] in ("3", ["3"])
    assert at.query_params["model_b"] in ("char-tfidf", ["char-tfidf"])
    assert all(len(t.value) == 3 for t in at.table)


def test_free_text_and_random_held_out_name(app):
    # free text from a shared link (AppTest's set_value only takes listed options; the page
    # adds a typed or linked text to the options itself)
    app.query_params["query"] = "crushing chest pain at night"
    at = app.run()
    assert not at.exception and not at.error
    assert "free text" in " ".join(m.value for m in at.markdown)
    random_button = next(b for b in at.button if b.label == "Random held-out name")
    random_button.click().run()
    assert not at.exception
    assert at.selectbox(key="nb_query").value != "crushing chest pain at night"
    assert len(at.table) == 2


def test_unknown_model_shows_a_one_line_error(app):
    app.query_params["query"] = "asthma"
    app.query_params["model_b"] = "nobody/no-such-model"
    at = app.run()
    assert not at.exception
    assert "nobody/no-such-model" in at.error[0].value


def test_one_model_only(app):
    app.query_params["query"] = "asthma"
    app.query_params["two"] = "0"
    at = app.run()
    assert not at.exception and not at.error
    assert len(at.table) == 1 and "Δ rank" not in at.table[0].value.columns
    assert at.query_params["two"] in ("0", ["0"])


def test_embedding_cache_can_be_cleared_from_the_page(tmp_home, data_dir, open_app):
    from bioviz.models.vector_cache import VectorCache

    at = open_app(PAGE, {"source": str(data_dir / "mini.obo"), "depth": "1", "model_a": "minilm",
                         "two": "0", "query": "pneumonia"})  # a query no other test encodes
    at.run()
    assert not at.exception and VectorCache().stats()[0]["vectors"] > 0
    next(b for b in at.sidebar.button if b.label == "Clear cached vectors").click().run()
    assert not at.exception and VectorCache().stats() == []


def test_hypernym_ranking_marks_the_matching_class_name(app):
    app.query_params["query"] = "heart attack"
    app.query_params["among"] = "hypernyms"
    app.query_params["k"] = "2"
    at = app.run()
    assert not at.exception and not at.error
    frame = at.table[0].value
    hypernyms = {"heart disease", "cardiac disease", "cardiopathy", "lung disease", "pulmonary disease"}
    assert set(frame["Name"]) <= hypernyms
    assert all((m == "class") == (c == "MINI:0000010") for m, c in zip(frame["Match"], frame["Code"]))
    assert at.query_params["among"] in ("hypernyms", ["hypernyms"])


def test_class_restriction_concept_and_image_format_are_kept_in_the_url(app):
    app.query_params["query"] = "heart attack"
    at = app.run()
    assert at.query_params["restrict"] in ("0", ["0"])
    at.toggle(key="nb_restrict").set_value(True).run()
    assert not at.exception and not at.error
    assert at.query_params["restrict"] in ("1", ["1"])
    assert all(set(t.value["Match"]) <= {"class", "synonym"} for t in at.table)
    at.radio(key="nb_image").set_value("svg").run()
    assert at.query_params["image"] in ("svg", ["svg"])


def test_a_shared_link_reopens_class_restriction_and_image_format(app):
    app.query_params.update({"query": "arrhythmia", "restrict": "1", "image": "svg", "k": "3"})
    at = app.run()
    assert not at.exception and not at.error
    assert at.toggle(key="nb_restrict").value is True and at.radio(key="nb_image").value == "svg"
    assert all(set(t.value["Match"]) <= {"class", "synonym"} for t in at.table)


def test_the_concept_of_a_name_of_several_concepts_is_kept_in_the_url(app):
    # "shared name" names two concepts: the card shows the one in the link, and a new pick is kept
    app.query_params.update({"query": "shared name", "concept": "MINI:0000023"})
    at = app.run()
    assert not at.exception and not at.error
    concept = at.selectbox(key="nb_concept")
    assert concept.value == "MINI:0000023" and "bronchitis" in " ".join(m.value for m in at.markdown)
    concept.set_value("MINI:0000030").run()
    assert at.query_params["concept"] in ("MINI:0000030", ["MINI:0000030"])
    assert "cardiopulmonary syndrome" in " ".join(m.value for m in at.markdown)
    at.selectbox(key="nb_query").set_value("asthma").run()  # one concept: no choice, none in the URL
    assert "concept" not in at.query_params


def test_large_levels_search_ontology_names_on_the_server(app, monkeypatch):
    # A level too large to send to the browser (here: any level with more than 3 names)
    monkeypatch.setattr("ui.cache.MAX_BROWSER_NAMES", 3)
    at = app.run()
    assert not at.exception and not at.error
    at.text_input(key="nb_query").input("attack heart").run()  # words in any order: no name, free text
    assert not at.exception and not at.error
    assert "free text" in " ".join(m.value for m in at.markdown) and len(at.table) == 2
    matches = at.selectbox(key="_nb_match")
    assert matches.options[0] == "heart attack · MINI:0000011"
    matches.set_value("heart attack").run()
    assert not at.exception and not at.error
    assert at.text_input(key="nb_query").value == "heart attack"
    assert at.query_params["query"] in ("heart attack", ["heart attack"])
    assert "MINI:0000011" in " ".join(m.value for m in at.markdown)  # now an ontology name: concept card
    at.text_input(key="nb_query").input("zzz unheard of").run()
    assert not at.exception and at.selectbox(key="_nb_match").disabled


def test_settings_survive_a_visit_to_another_page(app_home, data_dir, open_app):
    at = open_app(None, {"source": str(data_dir / "mini.obo"), "model_a": "minilm", "model_b": "char-tfidf"})
    at.run()
    at.switch_page("app_pages/4_Neighbours.py").run()
    at.selectbox(key="nb_query").set_value("asthma").run()
    at.number_input(key="nb_k").set_value(3).run()
    at.radio(key="nb_image").set_value("svg").run()
    at.switch_page("app_pages/0_Home.py").run()
    at.query_params.clear()  # a link in the page list opens a page without its parameters
    at.switch_page("app_pages/4_Neighbours.py").run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert at.number_input(key="nb_k").value == 3 and at.radio(key="nb_image").value == "svg"
    assert at.selectbox(key="nb_query").value == "asthma"
    assert all(len(t.value) == 3 for t in at.table)


def test_the_ranking_is_chosen_shown_and_kept_in_the_url(app):
    app.query_params.update({"query": "Heart-attack", "k": "3", "two": "0"})
    at = app.run()
    at.radio(key="nb_ranking").set_value("dense").run()
    assert not at.exception and not at.error
    assert "Cosine" in at.table[0].value.columns and at.query_params["ranking"] in ("dense", ["dense"])
    assert any("dense ranking" in m.value for m in at.markdown)
    at.radio(key="nb_ranking").set_value("hybrid").run()
    assert not at.exception and not at.error
    frame = at.table[0].value
    assert "Score" in frame.columns  # the matched concept's names first (equal to the query but for punctuation)
    assert set(frame["Name"][:2]) <= {"heart attack", "myocardial infarction", "MI"}
    assert any("hybrid w=" in m.value for m in at.markdown)
    assert at.query_params["ranking"] in ("hybrid", ["hybrid"])


def test_a_synonym_query_is_expanded_and_says_so_until_turned_off(app, monkeypatch):
    from bioviz.search import lexicon

    # a one-entry lexicon in place of the bundled one (same process as the page): free text that is a synonym
    entry = lexicon.LexiconEntry("Coronary thrombosis", "myocardial infarction", "MINI:0000011", "HPO", "EXACT")
    monkeypatch.setitem(lexicon._loaded, lexicon.lexicon_path().name, lexicon.Lexicon([entry]))
    app.query_params["query"] = "coronary thrombosis"
    app.query_params["k"] = "3"
    at = app.run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    note = "coronary thrombosis → myocardial infarction (HPO synonym)"
    assert any(note in c.value for c in at.caption)
    assert any(note in m.value for m in at.markdown)  # beside each ranking's title
    assert [t.value["Name"].iloc[0] for t in at.table] == ["myocardial infarction"] * 2
    at.toggle(key="nb_expand").set_value(False).run()
    assert not at.exception and not any(note in c.value for c in at.caption)
    assert at.query_params["expand"] in ("0", ["0"])


def test_ranking_among_training_names_ranks_only_them(app, data_dir):
    from bioviz.ontology import DEFAULT_SPLIT, LevelSpec

    app.query_params.update({"query": "heart attack", "among": "train", "k": "3"})
    at = app.run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    view = LevelSpec(str(data_dir / "mini.obo"), depth=1).load()
    training = {view.names[row] for row in DEFAULT_SPLIT.make(view).train}
    assert len(at.table) == 2 and all(set(t.value["Name"]) <= training for t in at.table)
