"""Result tables: wide form, best per column, CSV and LaTeX booktabs export."""

from __future__ import annotations

import math

from bioviz.evaluation import tables as result_tables
from bioviz.evaluation.result import EvalResult

ROWS = [
    {"model": "minilm", "task": "Ranking", "metric": "mAP", "value": 0.36, "ci_low": 0.27, "ci_high": 0.46, "n": 22},
    {"model": "minilm", "task": "MayoSRS", "metric": "Spearman", "value": 0.455, "ci_low": 0.28, "ci_high": 0.6, "n": 101},
    {"model": "char_tfidf", "task": "Ranking", "metric": "mAP", "value": 0.19, "ci_low": 0.13, "ci_high": 0.28, "n": 22},
    {"model": "char_tfidf", "task": "MayoSRS", "metric": "Spearman", "value": 0.455, "ci_low": None, "ci_high": None, "n": 101},
]


def test_wide_tables_and_best():
    values, lows, highs = result_tables.wide_tables(ROWS)
    assert list(values.index) == ["minilm", "char_tfidf"]
    assert list(values.columns) == [("Ranking", "mAP"), ("MayoSRS", "Spearman")]
    best = result_tables.best_mask(values, lows, highs)
    assert best.loc["minilm"].tolist() == [False, False]  # intervals overlap (0.27 < 0.28); a tie
    assert best.loc["char_tfidf"].tolist() == [False, False]
    assert math.isnan(lows.loc["char_tfidf", ("MayoSRS", "Spearman")])
    separated = [dict(ROWS[0], ci_low=0.30), *ROWS[1:]]
    assert result_tables.best_mask(*result_tables.wide_tables(separated)).loc["minilm"].tolist() == [True, False]


def test_display_table_marks_best_and_shows_intervals():
    table = result_tables.display_table(*result_tables.wide_tables([dict(ROWS[0], ci_low=0.30), *ROWS[1:]]))
    assert table.loc["minilm", "Ranking · mAP"] == "★ 0.360 [0.300, 0.460]"
    assert table.loc["char_tfidf", "Ranking · mAP"] == "0.190 [0.130, 0.280]"
    assert table.loc["char_tfidf", "MayoSRS · Spearman"] == "0.455"  # tied: no star


def test_synonym_test_map_is_shown_once_under_ranking():
    results = [EvalResult(model="m", task="ranking", metrics={"map": 0.5}),
               EvalResult(model="m", task="synonym", metrics={"train.map": 0.9, "test.map": 0.5, "test.acc1": 0.6})]
    keys = [(r["task_key"], r["key"]) for r in result_tables.results_table(results)]
    assert keys == [("ranking", "map"), ("synonym", "train.map"), ("synonym", "test.acc1")]
    alone = result_tables.results_table(results[1:])  # without the ranking task it stays
    assert ("synonym", "test.map") in [(r["task_key"], r["key"]) for r in alone]


def test_csv_is_long_form():
    text = result_tables.to_csv(ROWS)
    lines = text.strip().splitlines()
    assert lines[0] == "model,task,metric,value,ci_low,ci_high,n"
    assert lines[1] == "minilm,Ranking,mAP,0.36,0.27,0.46,22"
    assert len(lines) == 5


def test_latex_booktabs():
    rows = [dict(ROWS[0], ci_low=0.30), *ROWS[1:]]
    tex = result_tables.to_latex(*result_tables.wide_tables(rows), caption="Scores on ICD-10 chapters", label="tab:x")
    assert r"\toprule" in tex and r"\midrule" in tex and r"\bottomrule" in tex
    assert r"\textbf{0.360}" in tex and r"\textbf{0.190}" not in tex
    assert r"char\_tfidf" in tex  # escaped
    assert r"\cmidrule(lr){2-2} \cmidrule(lr){3-3}" in tex
    assert r"\caption{Scores on ICD-10 chapters}" in tex and r"\label{tab:x}" in tex
    assert tex.count(r"\\") == 4 + 3  # two header lines, two model rows, three stacked intervals
    assert r"\begin{tabular}[t]{@{}c@{}}\textbf{0.360}\\ {\scriptsize[0.300, 0.460]}\end{tabular}" in tex


def test_empty_rows():
    values, _, _ = result_tables.wide_tables([])
    assert values.empty and result_tables.best_mask(values).empty


def test_best_compares_shown_values():
    rows = [dict(ROWS[0], value=0.41431, ci_low=0.41, ci_high=0.42),
            dict(ROWS[2], value=0.41409, ci_low=0.1, ci_high=0.2)]
    values, lows, highs = result_tables.wide_tables(rows)
    assert not result_tables.best_mask(values, lows, highs).any().any()  # both print as 0.414: a tie
    assert result_tables.best_mask(values, lows, highs, digits=4).loc["minilm"].tolist() == [True]
