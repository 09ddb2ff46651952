"""User and ontology text shows as text: a query like ``![x](http://...)`` never becomes an image or a link.

:func:`ui.markdown.md` is checked against a CommonMark renderer (markdown-it) on random
text, then the pages are opened on an ontology whose names, synonyms and definitions are
markdown and HTML, with such a query: what Streamlit would render holds the text verbatim
and no image, link or emphasis made of it.
"""

from __future__ import annotations

import html
import re

import pytest
from hypothesis import given, strategies as st
from markdown_it import MarkdownIt

from test_app_support import no_traceback, open_app, share
from ui.markdown import md, md_code

RENDER = MarkdownIt("commonmark").enable(["strikethrough", "table"])
PIECES = st.sampled_from([*"ab1é 9.)-+#>*_~`[]()!<>&$@:/\\|=\n\t", "__", "_a_", "http://", "www.", "&amp;", "1. ",
                          "---", "![x](http://e/x.png)", "<img src=x>", ":red[r]", "$x$", "[^1]"])
TAG = re.compile(r"<[^>]+>")


def visible(markdown: str) -> str:
    """The text a reader sees of ``markdown`` (tags dropped, entities decoded)."""
    return html.unescape(TAG.sub("", RENDER.render(markdown))).strip()


@given(st.lists(PIECES, max_size=14).map("".join))
def test_escaped_text_renders_as_itself_and_nothing_else(text):
    expected = re.sub(r"[\r\n\u2028\u2029\x0b\x0c\x85]+", " ", text).strip()
    rendered = RENDER.render(md(text)).strip()
    if not expected:
        return
    assert re.fullmatch(r"<p>[^<]*</p>", rendered), (text, md(text), rendered)  # one paragraph, no markup
    assert visible(md(text)) == expected


@given(st.lists(PIECES, max_size=10).map("".join).filter(lambda t: t.strip() and "\n" not in t))
def test_code_spans_hold_any_text(text):
    rendered = RENDER.render(md_code(text)).strip()
    assert rendered.startswith("<p><code>") and rendered.endswith("</code></p>"), (text, rendered)


def test_autolinks_and_mail_addresses_are_broken():
    escaped = md("see http://e.org, HTTPS://e.org, www.e.org and me@e.org")
    assert not re.search(r"(?i)https?:|www\.|[^\\]@", escaped), escaped


HOSTILE_NAMES = {
    "class": "[click](http://127.0.0.1:9/a)",
    "query": "*emph* leaf",
    "definition": "<img src=http://127.0.0.1:9/d.png> **def** www.example.org",
    "synonym": "![pic](http://127.0.0.1:9/p.png)",
}


@pytest.fixture
def hostile_level(tmp_path, monkeypatch):
    """A shared table whose names, synonyms and definitions are markdown and HTML (one name in two classes)."""
    data = tmp_path / "data"
    data.mkdir()
    n = HOSTILE_NAMES
    (data / "hostile.tsv").write_text(
        "concept_id\tname\tparent_id\tdefinition\tsynonyms\n"
        "R\troot\t\t\t\n"
        f"A\t{n['class']}\tR\t\t\n"
        f"A1\t{n['query']}\tA\t{n['definition']}\t{n['synonym']}|# heading\n"
        "A2\tsecond leaf\tA\t\t$x^2$\n"
        "B\tplain class\tR\t\t\n"
        f"B1\tplain leaf\tB\t\t{n['synonym']}|:red[coloured]\n")
    monkeypatch.setenv("BIOVIZ_HOME", str(tmp_path / "home"))
    share(monkeypatch, data)
    return {"source": str(data / "hostile.tsv"), "depth": "1", "model_a": "minilm", "keep_ambiguous": "1"}


def rendered_elements(at) -> list[str]:
    """The markdown of every element Streamlit renders as markdown."""
    kinds = ("markdown", "caption", "title", "header", "subheader", "error", "warning", "info", "success")
    return [element.value for kind in kinds for element in getattr(at, kind)]


def assert_shown_as_text(at, texts) -> None:
    no_traceback(at)
    shown = rendered_elements(at)
    html_out = " ".join(RENDER.render(value) for value in shown)
    assert "<img" not in html_out and "<a " not in html_out, html_out
    seen = " ".join(visible(value) for value in shown)
    for text in texts:
        assert text in seen, (text, seen)


def test_neighbours_shows_a_markdown_query_and_hostile_names_as_text(hostile_level):
    at = open_app("app_pages/4_Neighbours.py", {**hostile_level, "two": "0", "query": "![x](http://127.0.0.1:9/x.png)"},
                  timeout=180).run()
    assert_shown_as_text(at, ["![x](http://127.0.0.1:9/x.png)"])
    at = open_app("app_pages/4_Neighbours.py", {**hostile_level, "two": "0", "query": HOSTILE_NAMES["query"]},
                  timeout=180).run()
    assert_shown_as_text(at, list(HOSTILE_NAMES.values()) + ["# heading"])  # query line and concept card


def test_home_shows_hostile_ambiguous_names_as_text(hostile_level):
    at = open_app(None, {**hostile_level, "keep_ambiguous": "0"}).run()
    assert_shown_as_text(at, [HOSTILE_NAMES["synonym"]])  # listed under "ambiguous names"


def test_error_messages_echo_hostile_text_as_text(hostile_level):
    at = open_app(None, {**hostile_level, "root": "[x](http://127.0.0.1:9/) **no**"}).run()
    assert at.error
    assert_shown_as_text(at, ["[x](http://127.0.0.1:9/) **no**"])
