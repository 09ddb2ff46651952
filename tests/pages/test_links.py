"""Links made by the app before the level selection became a LevelSpec open the same view."""

from __future__ import annotations

from pathlib import Path

from streamlit.testing.v1 import AppTest

from bioviz.ontology import LevelSpec

ROOT = Path(__file__).resolve().parents[2]


def params_of(at) -> dict[str, str]:
    return {k: (v[0] if isinstance(v, list) else v) for k, v in at.query_params.items()}


def test_a_umls_link_with_every_selection_parameter_reopens_the_same_selection(tmp_home, data_dir):
    link = {"source": str(data_dir / "umls/META"), "depth": "2", "root": "C2720507", "synonyms": "1",
            "keep_ambiguous": "1", "model_a": "minilm", "model_b": "char-tfidf", "sab": "SNOMEDCT_US",
            "semantic_group": "DISO", "hierarchy": "isa"}
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    at.query_params.update(link)
    at.run()
    assert not at.exception
    assert params_of(at) == link  # the app writes back exactly the link it was opened with
    state = at.session_state
    assert (state["source"], state["root"], state["depth"], state["synonyms"], state["keep_ambiguous"]) == \
        (link["source"], "C2720507", 2, True, True)
    assert (state["sab"], state["semantic_group"], state["hierarchy"]) == ("SNOMEDCT_US", "DISO", "isa")
    assert (state["model_a"], state["model_b"]) == ("minilm", "char-tfidf")
    assert LevelSpec.from_query(params_of(at)) == LevelSpec.from_query(link)


def test_a_bundled_link_keeps_its_defaults_out_of_the_url(tmp_home, data_dir):
    link = {"source": str(data_dir / "mini.obo"), "depth": "1", "model_a": "minilm", "model_b": "char-tfidf"}
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    at.query_params.update(link)
    at.run()
    assert not at.exception and not at.error
    assert params_of(at) == link
