"""The pretraining job's figure (bioviz.figures.pretraining): loss per step, resumes marked."""

from __future__ import annotations

from bioviz.figures.pretraining import pretraining_curve
from bioviz.figures.theme import pair_colours


def test_loss_per_step_with_the_resume_marked_and_the_title_stating_the_run():
    events = [{"event": "start", "resumed_from_step": 0}, {"event": "step", "step": 1, "loss": None},
              {"event": "step", "step": 2, "loss": 2.0}, {"event": "step", "step": 3, "loss": 1.5},
              {"event": "start", "resumed_from_step": 3}, {"event": "step", "step": 4, "loss": 1.2}]
    fig = pretraining_curve(events, "Pretraining loss · pretrained minilm: synonyms, 2k pairs", "batch 64",
                            width=800)
    [curve] = fig.data
    assert list(curve.x) == [2, 3, 4] and list(curve.y) == [2.0, 1.5, 1.2]
    assert curve.line.color == pair_colours()[1]
    assert [shape.x0 for shape in fig.layout.shapes] == [3]  # the one resume, not the first start
    assert "resumed at step 3" in [a.text for a in fig.layout.annotations]
    assert "pretrained minilm" in fig.layout.title.text and fig.layout.width == 800


def test_before_the_first_loss_it_says_it_is_waiting():
    fig = pretraining_curve([{"event": "pairs", "train": 10}], "Pretraining loss")
    assert any("waiting for the first logged loss" in a.text for a in fig.layout.annotations)
