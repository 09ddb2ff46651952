"""AppTest of the Evaluation page's *Mention normalisation* section: a gold file scored per model and ranking on
tests/data/mini.obo synonym sets with char-tfidf; bad files refused in one line."""

from __future__ import annotations

import json

import pytest

PAGE = "app_pages/6_Evaluation.py"
GOLD = "mention\tconcept_id\nheart attack\tMINI:0000011\nheart-attack!\tMINI:0000011\npneumonai\tMINI:0000021\n"


@pytest.fixture
def app(app_home, data_dir, open_app):
    return open_app(PAGE, {"source": str(data_dir / "mini.obo"), "synonyms": "1", "model_a": "char-tfidf",
                           "eval_models": "char-tfidf", "eval_boot": "50"}, timeout=240)


def score_button(at):
    return next(b for b in at.button if b.label == "Score the gold file")


def upload(at, data: bytes, name: str = "gold.tsv"):
    at.radio(key="eval_gold").set_value("upload").run()
    at.file_uploader(key="_eval_gold_upload").set_value((name, data, "text/tab-separated-values")).run()
    score_button(at).click().run()
    assert not at.exception, at.exception
    return at


def test_the_example_is_offered_and_an_uploaded_gold_file_is_scored_per_ranking(app):
    at = app.run()
    assert not at.exception and not at.error
    assert at.radio(key="eval_gold").value == "example"  # the bundled example (lay phrasings), by default
    assert any("HP:0000118" in c.value for c in at.caption)  # ... and the level it needs, since this is another
    upload(at, GOLD.encode())
    assert not at.error, [e.value for e in at.error]
    table = at.dataframe[0].value
    assert [i for i in table.index] == ["char-tfidf · dense", "char-tfidf · hybrid w=" + table.index[1].split("=")[1]]
    assert {"Mention normalisation · Acc@1", "Mention normalisation · paraphrased MRR"} <= set(table.columns)
    assert any("3 mentions, 2 paraphrased" in c.value for c in at.caption)
    assert [b.label for b in at.get("download_button")] == ["Download CSV"]
    title = json.loads(at.get("plotly_chart")[0].proto.spec)["layout"]["title"]["text"]
    assert "Mention normalisation · char-tfidf · dense vs char-tfidf · hybrid" in title and "synonym sets" in title


@pytest.mark.parametrize("data, message", [
    (b"term\tid\nasthma\tMINI:0000022\n", "needs a header with 'mention'"),
    (b"mention\tid\nasthma\tHP:0000001\nwheeze\tHP:0000002\n", "2 of 2 concept ids of gold.tsv are not concepts"),
    (b"mention\tid\n", "no rows"),
    (b"mention\tid\n\xff\tMINI:0000022\n", "not UTF-8"),
])
def test_bad_gold_files_give_one_line_errors(app, data, message):
    at = upload(app.run(), data)
    assert len(at.error) == 1 and message in at.error[0].value and "\n" not in at.error[0].value
