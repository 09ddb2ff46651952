"""Relatedness benchmark loading and scoring."""

from __future__ import annotations

import numpy as np
import pytest

from bioviz.evaluation import benchmarks
from bioviz.evaluation.benchmarks import BenchmarkError, load_benchmark, parse_pairs, score_benchmark
from bioviz.errors import BiovizError


@pytest.mark.parametrize("name, pairs", [("mayosrs", 101), ("umnsrs-sim", 566), ("umnsrs-rel", 587)])
def test_bundled_sets_load(name, pairs):
    bench = load_benchmark(name)
    assert len(bench) == pairs
    assert bench.term1[0] and np.isfinite(bench.scores).all()


def test_expand():
    assert benchmarks.expand_benchmarks("all") == ["mayosrs", "umnsrs-sim", "umnsrs-rel"]
    assert benchmarks.expand_benchmarks("x.tsv") == ["x.tsv"]


def test_user_csv_with_header_and_quotes(data_dir):
    bench = load_benchmark(data_dir / "benchmarks" / "pairs.csv")
    assert bench.term1 == ("heart attack, acute", "asthma", "fever")
    assert list(bench.scores) == [9.0, 5.0, 1.0]
    assert bench.name == "pairs.csv"


def test_header_is_optional():
    bench = parse_pairs(b"a\tb\t1\nc\td\t2\ne\tf\t3\n")
    assert len(bench) == 3 and bench.term1[0] == "a"


@pytest.mark.parametrize("file_name, message", [
    ("missing_column.tsv", "line 2: expected 3 tab-separated columns"),
    ("bad_score.tsv", "line 2: the score \\(third column\\) is not a number"),
])
def test_malformed_files(data_dir, file_name, message):
    with pytest.raises(BenchmarkError, match=message):
        load_benchmark(data_dir / "benchmarks" / file_name)


@pytest.mark.parametrize("data, message", [
    (b"", "empty"),
    (b"\xff\xfe\x00bad", "not a UTF-8"),
    (b"a\tb\t1\nc\td\t2\n", "2 pairs; at least 3"),
    (b"a\tb\tnan\nc\td\t2\ne\tf\t3\n", "not a finite number"),
    (b"a\t\t1\nc\td\t2\ne\tf\t3\n", "line 1: empty term"),
])
def test_malformed_content(data, message):
    with pytest.raises(BenchmarkError, match=message):
        parse_pairs(data, name="upload.tsv")


def test_unknown_benchmark_is_a_user_error():
    with pytest.raises(BiovizError, match="unknown benchmark 'nope'"):
        load_benchmark("nope")


def unit(*values):
    v = np.asarray(values, dtype=np.float32)
    return v / np.linalg.norm(v)


def test_score_perfect_order_and_coverage():
    bench = parse_pairs("a\tb\t3\nc\td\t2\ne\tf\t1\ng\th\t0\n")
    vectors = {
        "a": unit(1, 0), "b": unit(1, 0.1),   # most similar, highest score
        "c": unit(1, 0), "d": unit(1, 0.5),
        "e": unit(1, 0), "f": unit(1, 2),
        "g": np.zeros(2, np.float32), "h": unit(0, 1),  # not covered
    }
    result = score_benchmark(bench, vectors, n_boot=200)
    assert result["spearman"] == pytest.approx(1.0)
    assert result["pairs"] == 4 and result["covered"] == 3
    low, high = result["ci"]["spearman"]
    assert low <= 1.0 and high == pytest.approx(1.0)
    with pytest.raises(ValueError, match="no vectors"):
        score_benchmark(bench, {"a": unit(1, 0)})
