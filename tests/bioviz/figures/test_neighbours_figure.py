"""The image-ready neighbour table: two rankings side by side, matches shaded, title and caption."""

import plotly.graph_objects as go

from bioviz.figures.neighbours import CELL_PAD, OTHER, SAME_CLASS, SAME_CONCEPT, neighbour_table_figure
from bioviz.figures.text import plain, text_width
from tests.bioviz.figures.figure_samples import neighbour_rows


def rows(*marks):
    out = []
    for rank, (name, same_concept, same_class, change) in enumerate(marks, start=1):
        out.append({"rank": rank, "name": name, "concept_id": f"C{rank}", "score": 1 - rank / 10,
                    "same_concept": same_concept, "same_class": same_class, "rank_change": change})
    return out


def test_two_rankings_side_by_side_with_shading_and_rank_change():
    a = rows(("heart attack", True, True, 2), ("angina", False, True, 0), ("asthma", False, False, -3))
    b = rows(("cardiac arrest", False, True, 1), ("heart attack", True, True, -1))
    fig = neighbour_table_figure("myocardial infarction", [("minilm", a), ("run-1", b)], "icd10 · depth 1", 3,
                                 query_class="Diseases of the circulatory system")
    table = fig.data[0]
    assert isinstance(table, go.Table)
    header = list(table.header.values)
    assert header[0] == "<b>Rank</b>" and "<b>minilm</b>" in header and "<b>run-1</b>" in header
    assert header.count("<b>Δ rank</b>") == 2
    names_a = list(table.cells.values[1])
    assert names_a == ["heart attack", "angina", "asthma"]
    assert list(table.cells.fill.color[1]) == [SAME_CONCEPT, SAME_CLASS, OTHER]
    # the shorter ranking is padded so both columns have three rows
    assert list(table.cells.values[5]) == ["cardiac arrest", "heart attack", ""]
    assert list(table.cells.values[4]) == ["▲2", "=", "▼3"]
    title = fig.layout.title.text
    assert "myocardial infarction" in title and "minilm vs run-1" in title and "icd10" in title
    texts = " ".join(a.text for a in fig.layout.annotations)
    assert "k = 3" in texts and "Diseases of the circulatory system" in texts


def test_one_ranking_has_no_rank_change_column():
    fig = neighbour_table_figure("asthma", [("minilm", rows(("wheeze", False, True, None)))], "hpo", 1)
    assert "<b>Δ rank</b>" not in list(fig.data[0].header.values)


def test_columns_are_sized_from_their_content_so_codes_and_headers_are_not_cut():
    rankings = [("minilm", neighbour_rows(seed=0)), ("residual · HPO d1 · 15-shot", neighbour_rows(seed=1))]
    fig = neighbour_table_figure("Abnormal circulating metabolite concentration", rankings, "hpo · HP:0000118 depth 1",
                                 10, query_class="Abnormality of metabolism/homeostasis")
    table = fig.data[0]
    size = table.cells.font.size
    # The figure is laid out at its own width in pixels, so the column widths are pixels.
    assert fig.layout.width == round(sum(table.columnwidth) + 24) <= 1000
    for values, width, head in zip(table.cells.values, table.columnwidth, table.header.values):
        if head in ("<b>Code</b>", "<b>Cosine</b>", "<b>Rank</b>", "<b>Δ rank</b>"):
            # one line each: codes keep their last digit, headers are not clipped
            assert all(text_width(str(v), size) + 2 * CELL_PAD <= width for v in values)
            assert text_width(plain(head), size + 1, bold=True) + 2 * CELL_PAD <= width
    assert all(v.startswith("HP:") and len(v) == 10 for v in table.cells.values[2])


def test_long_names_wrap_between_words_and_rows_fit_in_the_figure():
    rows = neighbour_rows(seed=0)
    fig = neighbour_table_figure("q", [("minilm", rows), ("run-1", neighbour_rows(seed=1))], "hpo", 10)
    table = fig.data[0]
    names, width = table.cells.values[1], table.columnwidth[1]
    for name, row in zip(names, rows):
        lines = name.split("<br>")
        assert " ".join(lines) == row["name"]  # broken only where there was a space
        assert all(text_width(line, table.cells.font.size) + 2 * CELL_PAD <= width for line in lines)
    wrapped_lines = sum(max(a.count("<br>"), b.count("<br>")) + 1 for a, b in zip(table.cells.values[1],
                                                                                 table.cells.values[5]))
    plot_height = fig.layout.height - fig.layout.margin.t - fig.layout.margin.b
    assert plot_height >= 32 + wrapped_lines * 13 * 1.3 + 10 * 14  # header, every line, each row's padding


def test_a_legend_names_both_highlights_and_the_title_is_whole():
    rows = neighbour_rows(seed=0)
    fig = neighbour_table_figure("Abnormal circulating metabolite concentration", [("minilm", rows)],
                                 "hpo 2025-05-06 · HP:0000118 depth 1", 10,
                                 query_class="Abnormality of metabolism/homeostasis")
    chips = {a.bgcolor: a.text for a in fig.layout.annotations if a.bgcolor}
    assert "synonym" in chips[SAME_CONCEPT] and "Abnormality of metabolism/homeostasis" in plain(chips[SAME_CLASS])
    assert plain(fig.layout.title.text).replace("\n", " ").endswith("HP:0000118 depth 1")
    plain_rows = neighbour_table_figure("q", [("m", [dict(r, same_concept=False) for r in rows])], "hpo", 10)
    assert SAME_CONCEPT not in {a.bgcolor for a in plain_rows.layout.annotations}  # only what the table shows
