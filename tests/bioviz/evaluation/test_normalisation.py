"""Mention normalisation (bioviz.evaluation.normalisation): gold files refused in one line, ranks, metrics and the
paraphrased subset, on tests/data/mini.obo synonym sets with char-tfidf (no transformer loaded)."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from bioviz.errors import BiovizError
from bioviz.evaluation.normalisation import (EXAMPLE_GOLD, check_gold_ids, load_gold, paraphrased, rank_metrics,
                                             read_gold)
from bioviz.evaluation.run import EvalSettings, evaluate_normalisation
from bioviz.ontology import LevelSpec
from bioviz.search.hybrid import Ranking


@pytest.fixture(autouse=True)
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("BIOVIZ_HOME", str(tmp_path))


@pytest.fixture
def level(data_dir):
    return LevelSpec(str(data_dir / "mini.obo"), synonyms=True)


@pytest.fixture
def gold(data_dir):
    return load_gold(data_dir / "gold" / "mini_gold.tsv")


def test_the_example_gold_file_reads():
    example = load_gold(EXAMPLE_GOLD)
    assert len(example) == 30 and example.id_column == "hpo_id" and example.concept_ids[0].startswith("HP:")


@pytest.mark.parametrize("data, message", [
    (b"", "empty"),
    (b"mention\thpo_id\n", "no rows"),
    (b"term\tnote\tother\nx\ty\tz\n", "needs a header with 'mention'"),
    (b"mention\thpo_id\n\xff\xfe\tHP:1\n", "not UTF-8"),
    (b"mention\thpo_id\nfever\t\n", "line 2"),
    (b"mention\thpo_id\n" + b"x\tHP:1\n" * 200, "at most"),
])
def test_bad_gold_files_are_refused_in_one_line(data, message):
    with pytest.raises(BiovizError, match=message) as error:
        read_gold(data, "gold.tsv", max_bytes=1000)
    assert "\n" not in str(error.value)


def test_unknown_ids_are_counted_and_a_few_shown(level, gold):
    view = level.load()
    check_gold_ids(gold, view)
    bad = read_gold(b"mention,cui\n" + b"".join(b"x%d,HP:%07d\n" % (i, i) for i in range(8)) + b"asthma,MINI:0000022\n",
                    "bad.csv")
    with pytest.raises(BiovizError, match=r"8 of 9 concept ids of bad.csv are not concepts .*HP:0000004, \.\.\."):
        check_gold_ids(bad, view)


def test_metrics_and_intervals_from_ranks():
    metrics, ci = rank_metrics(np.array([1, 2, 10, 1]), n_boot=200)
    assert metrics == pytest.approx({"acc1": 0.5, "acc5": 0.75, "mrr": (1 + 0.5 + 0.1 + 1) / 4})
    assert ci["acc1"][0] <= 0.5 <= ci["acc1"][1]


def test_normalisation_per_model_and_ranking_with_the_paraphrased_subset(level, gold):
    view, ontology = level.load(), level.ontology()
    assert paraphrased(gold, view, ontology).tolist() == [False, True, True, True, False]
    results = evaluate_normalisation(gold, level, ["char-tfidf"], [Ranking("dense"), Ranking("hybrid", 0.5)],
                                     settings=EvalSettings(n_boot=100))
    assert [r.model for r in results] == ["char-tfidf · dense", "char-tfidf · hybrid w=0.5"]
    dense, hybrid = results
    assert dense.sizes == {"queries": 5, "paraphrased.queries": 3}
    assert {"acc1", "acc5", "mrr", "paraphrased.acc1", "paraphrased.acc5", "paraphrased.mrr"} <= set(dense.metrics)
    assert hybrid.metrics["acc1"] >= dense.metrics["acc1"]  # "heart-attack!" is an exact match when hybrid
    assert dense.metrics["acc5"] >= dense.metrics["acc1"] and all(len(v) == 2 for v in dense.ci.values())


@given(st.lists(st.integers(-5, 5), min_size=1, max_size=60), st.integers(1, 70))
def test_the_rerankers_window_is_the_k_best_in_a_full_sorts_order(scores, k):
    from bioviz.evaluation.normalisation import _top_k

    scores = np.asarray(scores, dtype=float)  # small integers: many ties, the hard case
    window = _top_k(scores, k)
    full = np.argsort(-scores, kind="stable")[:k]
    assert len(window) == min(k, scores.size)
    assert np.array_equal(scores[window], scores[full])  # the same scores, best first
    assert all(np.diff(window[scores[window] == s]).min(initial=1) > 0 for s in set(scores[window]))  # ties by index
