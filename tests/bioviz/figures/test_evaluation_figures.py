"""Evaluation figures: grouped bars with intervals, cross-level heatmap."""

from __future__ import annotations

from bioviz.figures import cross_level_heatmap, metric_bars

ROWS = [
    {"model": "minilm", "task": "Ranking", "metric": "mAP", "value": 0.36, "ci_low": 0.27, "ci_high": 0.46, "n": 22},
    {"model": "minilm", "task": "MayoSRS", "metric": "Spearman", "value": 0.455, "ci_low": 0.28, "ci_high": 0.6, "n": 101},
    {"model": "char_tfidf", "task": "Ranking", "metric": "mAP", "value": 0.19, "ci_low": 0.13, "ci_high": 0.28, "n": 22},
    {"model": "char_tfidf", "task": "MayoSRS", "metric": "Spearman", "value": 0.455, "ci_low": None, "ci_high": None,
     "n": 101},
]


def test_metric_bars_one_trace_per_model_with_intervals():
    fig = metric_bars(ROWS, "Evaluation · minilm vs char_tfidf · icd10 depth 1", "seed 0")
    assert [t.name for t in fig.data] == ["minilm", "char_tfidf"]
    minilm = fig.data[0]
    assert list(minilm.y) == [0.36, 0.455]
    assert abs(minilm.error_y.array[0] - 0.10) < 1e-9 and abs(minilm.error_y.arrayminus[0] - 0.09) < 1e-9
    assert fig.data[1].error_y.array[1] is None  # no interval, no error bar
    assert fig.layout.barmode == "group" and "minilm vs" in fig.layout.title.text
    assert fig.data[0].marker.color != fig.data[1].marker.color


def test_cross_level_heatmap():
    table = {"models": ["minilm", "run-1"], "depths": [1, 2], "map": [[0.3, None], [0.5, 0.6]],
             "ci": [[[0.2, 0.4], None], [[0.4, 0.6], [0.5, 0.7]]]}
    fig = cross_level_heatmap(table, "Cross-level mAP")
    heat = fig.data[0]
    assert list(heat.x) == ["level 1", "level 2"] and list(heat.y) == ["minilm", "run-1"]
    assert heat.text[0][1] == "–" and heat.text[1][0] == "<b>0.500</b><br>[0.40, 0.60]"


def test_the_baseline_and_the_compared_model_have_the_colours_of_every_other_page():
    from bioviz.figures.theme import pair_colours

    fig = metric_bars(ROWS, "Evaluation", "seed 0")
    assert [t.marker.color for t in fig.data] == list(pair_colours())
    third = metric_bars(ROWS + [dict(ROWS[0], model="bne")], "Evaluation")
    assert third.data[2].marker.color not in pair_colours()
