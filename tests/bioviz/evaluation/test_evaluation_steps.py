"""Step progress of an evaluation (``steps=``): what a progress bar with an ETA is driven by."""

from __future__ import annotations

from pathlib import Path

import pytest

from bioviz.evaluation import run as evaluation
from bioviz.evaluation.run import EvalSettings
from bioviz.ontology import SplitSpec, level_view, load_source

DATA = Path(__file__).resolve().parents[2] / "data"
SETTINGS = EvalSettings(n_boot=20, leaf_queries=50, pairs_per_distance=20)


@pytest.fixture
def mini(tmp_home):
    onto = load_source(str(DATA / "mini.obo"))
    view = level_view(onto, depth=1)
    return onto, view, SplitSpec(shots=2).make(view)


def test_steps_count_every_model_and_task_and_move_while_names_are_encoded(mini, fake_eval_models):
    onto, view, split = mini
    seen = []
    evaluation.evaluate(view, split, ["a", "b"], ["ranking", "hypernym"], ontology=onto, settings=SETTINGS,
                        steps=lambda done, total, message: seen.append((done, total, message)))
    assert {total for _, total, _ in seen} == {4}
    done = [d for d, _, _ in seen]
    assert done == sorted(done) and done[0] == 0 and done[-1] == 4  # never backwards, ends complete
    assert seen[-1][2] == "done"
    assert any(0 < d < 1 for d in done)  # the first step moves while its names are encoded
    assert any("encoding" in m for _, _, m in seen)
    assert (2.0, 4, "tri-b: Semantic similarity ranking") in seen
    # A second run is all cached: every step still counted, nothing encoded.
    again = []
    evaluation.evaluate(view, split, ["a", "b"], ["ranking", "hypernym"], ontology=onto, settings=SETTINGS,
                        steps=lambda done, total, message: again.append(done))
    assert again == [0, 1, 2, 3, 4]


def test_benchmark_and_cross_level_steps_end_complete(mini, fake_eval_models):
    onto, _, _ = mini
    bench = []
    evaluation.evaluate_benchmarks(["a"], "all", settings=SETTINGS, steps=lambda d, t, m: bench.append((d, t)))
    assert bench[0] == (0, 3) and bench[-1] == (3, 3)
    levels = []
    evaluation.cross_level(onto, ["a", "b"], depths=(1, 2), split_spec=SplitSpec(shots=1), settings=SETTINGS,
                           steps=lambda d, t, m: levels.append((d, t, m)))
    assert {t for _, t, _ in levels} == {2} and levels[-1][0] == 2
    assert levels[0][2].startswith("level 1 · tri-a") and any(m.startswith("level 2 · ") for _, _, m in levels)
