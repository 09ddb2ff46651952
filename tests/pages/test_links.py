"""Links made by the app before the level selection became a LevelSpec open the same view."""

from __future__ import annotations

from pathlib import Path

from streamlit.testing.v1 import AppTest

from bioviz.ontology import LevelSpec

ROOT = Path(__file__).resolve().parents[2]


def params_of(at) -> dict[str, str]:
    return {k: (v[0] if isinstance(v, list) else v) for k, v in at.query_params.items()}


def test_a_umls_link_with_every_selection_parameter_reopens_the_same_selection(tmp_home, data_dir):
    # sources as links made now carry them: relative to the data folder (never the server's absolute path)
    link = {"source": "umls/META", "depth": "2", "root": "C2720507", "synonyms": "1",
            "keep_ambiguous": "1", "model_a": "minilm", "model_b": "char-tfidf", "sab": "SNOMEDCT_US",
            "semantic_group": "DISO", "hierarchy": "isa"}
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    at.query_params.update(link)
    at.run()
    assert not at.exception
    assert params_of(at) == link  # the app writes back exactly the link it was opened with
    state = at.session_state
    assert (state["source"], state["root"], state["depth"], state["synonyms"], state["keep_ambiguous"]) == \
        (str(data_dir / "umls/META"), "C2720507", 2, True, True)
    assert (state["sab"], state["semantic_group"], state["hierarchy"]) == ("SNOMEDCT_US", "DISO", "isa")
    assert (state["model_a"], state["model_b"]) == ("minilm", "char-tfidf")
    assert LevelSpec.from_query(params_of(at)) == LevelSpec.from_query(link)


def test_a_bundled_link_keeps_its_defaults_out_of_the_url(tmp_home, data_dir):
    link = {"source": "mini.obo", "depth": "1", "model_a": "minilm", "model_b": "char-tfidf"}
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    at.query_params.update(link)
    at.run()
    assert not at.exception and not at.error
    assert params_of(at) == link


# Each page's own keys as links made by today's app carry them.
PAGE_LINKS = {
    "app_pages/0_Home.py": {},
    "app_pages/1_Train.py": {},
    "app_pages/2_Projection.py": {"method": "pca", "dims": "2", "nn": "15", "md": "0.1", "cap": "40", "shots": "1",
                                  "measure": "map"},
    "app_pages/3_Similarity_matrix.py": {"from": "typed", "order": "given", "colour": "list",
                                         "terms": "heart attack\nasthma"},
    "app_pages/4_Neighbours.py": {"k": "3", "two": "0", "among": "names", "restrict": "0", "image": "svg",
                                  "query": "asthma", "ranking": "dense"},
    "app_pages/5_Hierarchy.py": {"kind": "icicle", "colour": "none", "levels": "2", "node": "MINI:0000001"},
    "app_pages/6_Evaluation.py": {"eval_models": "minilm", "eval_tasks": "ranking", "eval_shots": "2",
                                  "eval_boot": "50"},
    "app_pages/7_Code_terms.py": {"k": "3", "input": "upload", "two": "0", "ranking": "dense"},
}


def test_every_page_writes_back_the_link_it_was_opened_with(app_home, data_dir, open_app):
    from ui.navigation import PAGES

    assert set(PAGE_LINKS) == {page.script for page in PAGES}
    level = {"source": "mini.obo", "depth": "1", "model_a": "minilm", "model_b": "char-tfidf"}
    for script, own in PAGE_LINKS.items():
        link = {**level, **own}
        at = open_app(script, link).run()
        assert not at.exception, (script, at.exception)
        written = params_of(at)
        assert {k: written.get(k) for k in link} == link, script


def test_home_is_called_home_in_the_navigation(tmp_home, open_app):
    from ui.navigation import PAGES, sections

    at = open_app(None).run()
    assert not at.exception
    assert [page.title for page in PAGES][0] == "Home" and PAGES[0].url_path == ""
    titles = {info.get("page_name") for info in at._registered_pages.values()}
    assert "Home" in titles and "app" not in titles
    assert [p.url_path for p in PAGES[1:]] == ["Train", "Projection", "Similarity_matrix", "Neighbours", "Hierarchy",
                                               "Evaluation", "Code_terms"]
    # Two sections in the menu; the URL paths above are unchanged by them.
    assert {section: [p.title for p in pages] for section, pages in sections().items()} == {
        "Explore": ["Home", "Projection", "Similarity matrix", "Neighbours", "Hierarchy", "Code terms"],
        "Train and evaluate": ["Train", "Evaluation"]}
    assert [info["page_name"] for info in at._registered_pages.values()] == [
        p.title for pages in sections().values() for p in pages]


def test_the_selection_survives_page_switches(tmp_home, data_dir, open_app):
    at = open_app(None, {"source": str(data_dir / "mini.obo")}).run()
    at.sidebar.number_input(key="depth").set_value(2).run()
    at.sidebar.toggle(key="keep_ambiguous").set_value(True).run()
    at.query_params.clear()  # a link in the page list opens a page without parameters
    for script in ("app_pages/1_Train.py", "app_pages/4_Neighbours.py", "app_pages/0_Home.py"):
        at.switch_page(script).run()
        assert not at.exception, (script, at.exception)
        assert at.sidebar.number_input(key="depth").value == 2, script
        assert at.sidebar.toggle(key="keep_ambiguous").value is True, script
        assert at.sidebar.selectbox(key="source").value == str(data_dir / "mini.obo"), script
