"""The image-ready neighbour table: two rankings side by side, matches shaded, title and caption."""

import plotly.graph_objects as go

from bioviz.figures.neighbours import OTHER, SAME_CLASS, SAME_CONCEPT, neighbour_table_figure


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
                                 "Diseases of the circulatory system")
    table = fig.data[0]
    assert isinstance(table, go.Table)
    header = list(table.header.values)
    assert header[0] == "Rank" and "<b>minilm</b>" in header and "<b>run-1</b>" in header
    assert header.count("Δ rank") == 2
    names_a = list(table.cells.values[1])
    assert names_a == ["heart attack", "angina", "asthma"]
    assert list(table.cells.fill.color[1]) == [SAME_CONCEPT, SAME_CLASS, OTHER]
    # the shorter ranking is padded so both columns have three rows
    assert list(table.cells.values[5]) == ["cardiac arrest", "heart attack", ""]
    assert list(table.cells.values[4]) == ["▲2", "=", "▼3"]
    title = fig.layout.title.text
    assert "myocardial infarction" in title and "minilm vs run-1" in title and "icd10" in title
    caption = fig.layout.annotations[0].text
    assert "k=3" in caption and "Diseases of the circulatory system" in caption


def test_one_ranking_has_no_rank_change_column():
    fig = neighbour_table_figure("asthma", [("minilm", rows(("wheeze", False, True, None)))], "hpo", 1)
    assert "Δ rank" not in list(fig.data[0].header.values)
