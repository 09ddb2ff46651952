"""The promotion rule of the selection protocol (bioviz.evaluation.selection), on fake candidates."""

import math

import pytest

from bioviz.evaluation.selection import CODING_FILES, RANKINGS, RELATEDNESS, Figure, choose, coding_key, judge


def figures(relatedness: float, coding: float, *, width: float = 0.03, overrides: dict | None = None) -> dict:
    """A candidate's development figures: one relatedness value, one acc@1 on every coding file and ranking."""
    out = {RELATEDNESS: Figure(relatedness, relatedness - width, relatedness + width, 1831)}
    for gold in CODING_FILES:
        for ranking in RANKINGS:
            out[coding_key(gold, ranking)] = Figure(coding, coding - width, coding + width, 534)
    for key, value in (overrides or {}).items():
        out[key] = Figure(value, value - width, value + width, 534)
    return out


BASE = figures(0.524, 0.788)
SHIPPED = figures(0.475, 0.800)


def test_a_candidate_that_keeps_relatedness_and_codes_better_is_promoted():
    verdict = judge(figures(0.530, 0.810), base=BASE, shipped=SHIPPED)
    assert verdict.promotable
    assert len(verdict.checks) == 1 + len(CODING_FILES) * len(RANKINGS)


def test_a_candidate_below_the_base_on_clinical_relatedness_is_refused_however_well_it_codes():
    verdict = judge(figures(0.520, 0.900), base=BASE, shipped=SHIPPED)
    assert not verdict.promotable
    failed = [text for text, ok in verdict.checks if not ok]
    assert failed == ["ehr_relb_dev 0.520 >= base 0.524"]


def test_coding_must_rise_on_every_file_and_ranking_not_on_average():
    tie = coding_key("gsc_plus_dev", "hybrid")
    verdict = judge(figures(0.530, 0.850, overrides={tie: 0.800}), base=BASE, shipped=SHIPPED)
    assert not verdict.promotable
    assert [text for text, ok in verdict.checks if not ok] == [f"{tie} 0.800 > shipped 0.800"]


def test_choose_prefers_the_simpler_candidate_within_its_interval():
    key = coding_key("hpo_coding_dev", "hybrid")
    simple, richer, far = figures(0.53, 0.81), figures(0.53, 0.83), figures(0.53, 0.86)
    rows = [(name, f, judge(f, base=BASE, shipped=SHIPPED)) for name, f in
            (("simple", simple), ("richer", richer), ("far", far))]
    # 0.83 lies within simple's [0.78, 0.84]: simple is kept; 0.86 lies above it: far wins
    assert choose(rows[:2], key=key) == "simple"
    assert choose(rows, key=key) == "far"
    assert choose([("bad", figures(0.40, 0.9), judge(figures(0.40, 0.9), base=BASE, shipped=SHIPPED))],
                  key=key) is None


def test_a_missing_figure_is_an_error_not_a_pass():
    partial = figures(0.53, 0.81)
    del partial[coding_key("gsc_plus_dev", "dense")]
    with pytest.raises(KeyError):
        judge(partial, base=BASE, shipped=SHIPPED)


def test_figure_text_shows_the_interval():
    assert Figure(0.5241, 0.49, 0.561, 10).text() == "0.524 [0.49, 0.56]"
    assert math.isnan(Figure(0.5, float("nan"), float("nan"), 1).low)
