"""The home page's class-size bar chart: title, one readable bar per class, theme, caption."""

import plotly.graph_objects as go
import pytest

from bioviz.figures import class_size_bar
from bioviz.figures.text import text_width
from bioviz.figures.theme import class_colours, theme
from bioviz.ontology import level_view, load_source


@pytest.fixture
def table_view(data_dir, tmp_home):
    return level_view(load_source(str(data_dir / "views_table.tsv")), depth=1)


@pytest.fixture
def icd10_chapters(shared_home, monkeypatch):
    monkeypatch.setenv("BIOVIZ_HOME", str(shared_home))
    return level_view(load_source("icd10"), depth=1)


def test_one_bar_per_class_largest_on_top_with_names_and_codes(table_view):
    fig = class_size_bar(table_view)
    [bar] = fig.data
    assert isinstance(bar, go.Bar) and bar.orientation == "h"
    # plotly draws the first category at the bottom, so the largest class comes last
    assert list(bar.y) == ["neoplasm (C4)", "injury (C3)", "cardiovascular disease (C2)", "infection (C1)"]
    assert list(bar.x) == [14, 16, 17, 23]
    colours = class_colours(table_view.classes)
    assert list(bar.marker.color) == [colours[c] for c in ("C4", "C3", "C2", "C1")]
    assert len(set(bar.marker.color)) == 4


def test_title_caption_and_theme(table_view):
    fig = class_size_bar(table_view)
    t = theme()
    assert fig.layout.title.text == f"Class sizes · {table_view.title}"
    assert fig.layout.title.font.size == t["title_size"]
    assert fig.layout.font.family == t["font_family"] and fig.layout.plot_bgcolor == t["background"]
    assert fig.layout.xaxis.title.text == "names per class"
    [caption] = fig.layout.annotations
    assert caption.text == "70 names in 4 classes"


def test_caption_reports_dropped_ambiguous_names(data_dir, tmp_home):
    view = level_view(load_source(str(data_dir / "mini.obo")), depth=1)
    assert "2 ambiguous names dropped" in class_size_bar(view).layout.annotations[0].text


def test_long_chapter_names_stay_readable(icd10_chapters):
    fig = class_size_bar(icd10_chapters)
    labels = list(fig.data[0].y)
    assert len(labels) == 22
    names = dict(zip(icd10_chapters.classes, icd10_chapters.class_labels))
    assert {label.rsplit(" (", 1)[1].rstrip(")") for label in labels} == set(names), "each chapter once, with its code"
    wrapped = 0
    for label in labels:
        text, code = label.replace("<br>", " ")[:-1].rsplit(" (", 1)
        assert text == names[code], "the whole chapter name, not cut"  # ICD-10 chapter names fit on two lines
        assert all(text_width(line, 12) <= fig.layout.margin.l for line in label.split("<br>"))
        wrapped += "<br>" in label
    assert wrapped, "ICD-10 has chapter names too long for one line"
    assert fig.layout.height >= 22 * 2 * 12 * 1.3  # room for two lines per class


def test_many_classes_are_cut_to_the_largest(icd10_chapters):
    fig = class_size_bar(icd10_chapters, max_classes=5)
    assert len(fig.data[0].y) == 5
    assert fig.data[0].x[-1] == max(icd10_chapters.class_sizes())
    assert "largest 5 of 22 classes" in fig.layout.annotations[0].text


def test_a_name_longer_than_two_lines_is_wrapped_whole_and_the_margin_grows_to_fit(tmp_path, tmp_home):
    long_name = " ".join(["Diseases of the blood and blood-forming organs and certain disorders"] * 4)
    rows = ["concept_id\tname\tparent_id", "R\troot\t", f"C1\t{long_name}\tR", "C2\tshort\tR",
            "C11\tanaemia\tC1", "C12\tpurpura\tC1", "C21\tcough\tC2"]
    (tmp_path / "long.tsv").write_text("\n".join(rows) + "\n")
    fig = class_size_bar(level_view(load_source(str(tmp_path / "long.tsv")), depth=1))
    label = next(y for y in fig.data[0].y if y.endswith("(C1)"))
    assert "…" not in label and label.replace("<br>", " ") == f"{long_name} (C1)"
    assert label.count("<br>") >= 2, "more than two lines: none cut"
    assert fig.layout.yaxis.automargin, "plotly widens the margin where the viewer's font is wider"
