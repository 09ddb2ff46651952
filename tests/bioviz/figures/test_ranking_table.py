"""The Neighbours page's ranking table and download file name."""

from bioviz.figures.ranking_table import STEM_QUERY_CHARS, neighbours_file_stem, ranking_table


def ranking_row(rank, name, same_concept, same_class, **extra):
    return {"rank": rank, "name": name, "concept_id": f"C{rank}", "class_label": "Circulatory", "score": 1 - rank / 10,
            "same_concept": same_concept, "same_class": same_class, **extra}


def test_marks_are_spelled_out_in_rank_order():
    table = ranking_table([ranking_row(1, "heart attack", True, True), ranking_row(2, "angina", False, True),
                           ranking_row(3, "asthma", False, False)])
    # the five columns a reader compares (and the match spelled out): no class, which would push them off-screen
    assert list(table.columns) == ["Rank", "Name", "Code", "Match", "Cosine"]
    assert table["Name"].tolist() == ["heart attack", "angina", "asthma"]
    assert table["Match"].tolist() == ["synonym", "class", ""]
    assert table["Cosine"].tolist() == [0.9, 0.8, 0.7]


def test_a_compared_ranking_has_the_change_with_its_direction():
    table = ranking_table([ranking_row(1, "heart attack", True, True, other_rank=3, rank_change=2),
                           ranking_row(2, "angina", False, True, other_rank=1, rank_change=-1),
                           ranking_row(3, "asthma", False, False, other_rank=3, rank_change=0)])
    assert list(table.columns) == ["Rank", "Name", "Code", "Match", "Cosine", "Δ rank"]
    assert table["Δ rank"].tolist() == ["▲2", "▼1", "="]


def test_file_stem_is_safe_lower_case_and_bounded():
    assert neighbours_file_stem("Heart attack / MI?") == "neighbours-heart-attack-mi"
    long = neighbours_file_stem("x" * 200)
    assert long == "neighbours-" + "x" * STEM_QUERY_CHARS
    # nothing usable in the query still names the file after the page
    assert neighbours_file_stem("???") == "neighbours"
