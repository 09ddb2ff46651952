"""Neighbours and Code terms answer while a level encodes: a partial answer, marked, then the usual one."""

from __future__ import annotations

import pytest

from bioviz.models.cached_encoding import DELAY_ENV
from bioviz.models.encoding_session import EncodingSession, background_encoding
from bioviz.ontology import LevelSpec
from ui import progressive


def level_table(folder, classes: int = 4, per_class: int = 150):
    rows = ["concept_id\tname\tparent_id\tdefinition\tsynonyms", "R\tdisorder\t\t\t"]
    for c in range(classes):
        rows.append(f"C{c}\tclass {c} disorder\tR\t\t")
        rows += [f"C{c}_{i}\tkind {i} of class {c} disorder\tC{c}\t\t" for i in range(per_class)]
    path = folder / "progressive_level.tsv"
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return path


@pytest.fixture
def slow_level(tmp_home, tmp_path, monkeypatch):
    """A 600-name level that takes seconds to encode, answered progressively (the threshold lowered for it)."""
    monkeypatch.setenv(DELAY_ENV, "0.02")
    monkeypatch.setattr(progressive, "MIN_MISSING", 100)
    source = level_table(tmp_path)
    yield source
    # the encoding thread outlives the page's run: let it finish before the home is removed
    job = background_encoding(EncodingSession.of("char-tfidf", LevelSpec(str(source), depth=1).load().names))
    if job is not None:
        job.wait(120)


def markers(at) -> list[str]:
    return [i.value for i in at.info if "names encoded, refining" in i.value]


def wait_for_chunks(session, names: int = 50, timeout_s: float = 60) -> None:
    """Until a few chunks of the background encoding are stored: something for a partial view to draw."""
    import time

    deadline = time.monotonic() + timeout_s
    while session.partial().done < names and time.monotonic() < deadline:
        time.sleep(0.2)


@pytest.mark.slow  # a level encoded in the background while the answer is polled: 25-40 s
def test_neighbours_answers_at_once_while_the_level_encodes_then_ranks_fully(slow_level, open_app):
    at = open_app("app_pages/4_Neighbours.py", {"source": str(slow_level), "depth": "1", "model_a": "char-tfidf",
                                                  "two": "0", "query": "kind 7 of class 2 disorder", "k": "5"}).run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert markers(at) and markers(at)[0].startswith("**partial: ")
    assert any(p.proto.text for p in at.get("progress"))  # the encoding's bar beside it
    table = at.table[0].value
    assert list(table.columns) == ["Rank", "Name", "Code", "Match", "Found by", "Cosine"] and len(table) == 5
    assert "kind 7 of class 2 disorder" not in set(table["Name"])
    names = LevelSpec(str(slow_level), depth=1).load().names
    # two models side by side: each partial table says where its names sit in the other's (the same model
    # twice here, to encode once: every name found by both sits at the same rank)
    at.query_params["model_b"], at.query_params["two"] = "char-tfidf", "1"
    at = open_app("app_pages/4_Neighbours.py", dict(at.query_params)).run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert markers(at), "the level was encoded before the second look"  # 600 names at 0.02 s a chunk
    assert len(at.table) == 2 and list(at.table[0].value.columns)[-1] == "Δ rank"
    assert set(at.table[0].value["Δ rank"]) <= {"=", ""}
    assert background_encoding(EncodingSession.of("char-tfidf", names)).wait(120)
    at = at.run()  # what the fragment's rerun does once every name is encoded
    assert not at.exception and not at.error and not markers(at)
    columns = list(at.table[0].value.columns)
    assert columns[:4] == ["Rank", "Name", "Code", "Match"] and "Found by" not in columns


@pytest.mark.slow  # a level encoded in the background while the answer is polled: 25-40 s
def test_code_terms_codes_at_once_while_the_level_encodes_then_fully(slow_level, open_app):
    at = open_app("app_pages/7_Code_terms.py", {"source": str(slow_level), "depth": "1", "model_a": "char-tfidf",
                                                  "two": "0"}).run()
    at.text_area(key="ct_text").set_value("C1_3\nkind 9 of class 0 disorder\nkind nine class zero")
    at = at.button[0].click().run() if at.button[0].label == "Code the terms" else \
        next(b for b in at.button if b.label == "Code the terms").click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert markers(at) and markers(at)[0].startswith("**partial: ")
    frame = at.dataframe[0].value
    assert list(frame["Term"]) == ["C1_3", "kind 9 of class 0 disorder", "kind nine class zero"]
    assert list(frame["Code"][:2]) == ["C1_3", "C0_9"]
    names = LevelSpec(str(slow_level), depth=1).load().names
    assert background_encoding(EncodingSession.of("char-tfidf", names)).wait(120)
    at = at.run()  # the fragment's rerun once every name is encoded: the pending coding is done in full
    assert not at.exception and not at.error and not markers(at)
    assert any("Review" in df.value.columns for df in at.dataframe)


@pytest.mark.slow  # a level encoded in the background while the sample map is polled: 20-40 s
def test_projection_draws_a_sample_map_while_the_level_encodes_then_its_usual_layout(slow_level, open_app):
    import json

    at = open_app("app_pages/2_Projection.py", {"source": str(slow_level), "depth": "1", "model_a": "char-tfidf",
                                                 "model_b": "char-tfidf", "one": "1", "method": "pca"}).run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    names = LevelSpec(str(slow_level), depth=1).load().names
    session = EncodingSession.of("char-tfidf", names)
    wait_for_chunks(session)
    at = at.run()  # what the fragment's poll draws
    assert not at.exception and not at.error, [e.value for e in at.error]
    marker = [i.value for i in at.info if "names encoded, refining" in i.value]
    assert marker and marker[0].startswith("**sample map: ")
    assert any(p.proto.text for p in at.get("progress"))  # the encoding's bar above it
    specs = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    assert len(specs) == 1 and specs[0]["layout"]["title"]["text"].startswith("PCA sample map of ")
    assert "char-tfidf" in specs[0]["layout"]["title"]["text"] and "progressive_level" in specs[0]["layout"]["title"]["text"]
    assert background_encoding(session).wait(120)
    at = at.run()  # the fragment's rerun once every name is encoded: the usual map
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert not [i.value for i in at.info if "names encoded, refining" in i.value]
    title = json.loads(at.get("plotly_chart")[0].proto.spec)["layout"]["title"]["text"]
    assert title.startswith("PCA · char-tfidf") and "sample map" not in title


@pytest.mark.slow  # a level encoded in the background while the tree is polled: 20-40 s
def test_hierarchy_draws_the_tree_coloured_by_what_is_encoded_so_far_then_its_usual_view(slow_level, open_app):
    import json

    at = open_app("app_pages/5_Hierarchy.py", {"source": str(slow_level), "depth": "1", "model_a": "char-tfidf",
                                                "model_b": "char-tfidf", "colour": "map"}).run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    names = LevelSpec(str(slow_level), depth=1).load().names
    session = EncodingSession.of("char-tfidf", names)
    wait_for_chunks(session)
    at = at.run()  # what the fragment's poll draws
    assert not at.exception and not at.error, [e.value for e in at.error]
    marker = [i.value for i in at.info if "encoded under both models, refining" in i.value]
    assert marker and marker[0].startswith("**partial: ")
    assert any(p.proto.text for p in at.get("progress"))
    [spec] = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    assert spec["layout"]["title"]["text"].startswith("Hierarchy · char-tfidf vs char-tfidf")
    assert "on the" in json.dumps(spec["layout"]) and "names encoded so far" in json.dumps(spec["layout"])
    assert not at.subheader, "no node details before every name is encoded"
    assert background_encoding(session).wait(120)
    at = at.run()  # the fragment's rerun once every name is encoded: the usual view with the node's details
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert not [i.value for i in at.info if "refining" in i.value] and at.subheader
