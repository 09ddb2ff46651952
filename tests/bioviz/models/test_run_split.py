"""bioviz.models.runs: reading a run's own split back onto a level view."""

import json

import pytest

from bioviz.errors import SplitError
from bioviz.ontology import level_view, load_source, make_split
from bioviz.models.runs import read_split_names, run_split


@pytest.fixture
def view(data_dir, tmp_home):
    return level_view(load_source(str(data_dir / "views_table.tsv")), depth=1)


def fake_run(path, view, split, with_split_file=True):
    """A run directory as trainer.runs writes it, minus the weights (not read here)."""
    path.mkdir()
    config = {"shots": split.shots, "view": view.stats(),
              "split": {"seed": split.seed, "shots": split.shots,
                        "zero_shot_classes": list(split.zero_shot_classes)}}
    (path / "run.json").write_text(json.dumps({"run_id": path.name, "config": config}))
    if with_split_file:
        names = {part: [view.names[i] for i in getattr(split, part)]
                 for part in ("train", "validation", "test", "zero_shot")}
        (path / "split.json").write_text(json.dumps(names))
    return path


def test_the_runs_split_marks_the_rows_it_was_drawn_from(view, tmp_path):
    split = make_split(view, shots=2, seed=3, zero_shot_classes=1)
    run = fake_run(tmp_path / "run-z", view, split)
    marks = run_split(run, view)
    assert list(marks.parts) == list(split.part_of(len(view.names)))
    assert (marks.parts == "zero-shot").sum() == len(split.zero_shot) > 0
    assert marks.describe() == "run · ? · 2-shot (run-z)'s own split (2 shots, seed 3, 1 zero-shot classes)"
    # The page's default split (seed 0, no zero-shot classes) would mark other rows.
    assert list(marks.parts) != list(make_split(view, shots=2, seed=0).part_of(len(view.names)))


def test_a_split_that_cannot_mark_the_view_says_why(view, data_dir, tmp_path):
    split = make_split(view, shots=2, seed=0)
    with pytest.raises(SplitError, match="no split.json"):
        run_split(fake_run(tmp_path / "bare", view, split, with_split_file=False), view)
    other = level_view(load_source(str(data_dir / "views_table.tsv")), depth=2)
    with pytest.raises(SplitError, match="trained on another level"):
        run_split(fake_run(tmp_path / "deep", view, split), other)
    with pytest.raises(SplitError, match="not a trained run"):
        run_split(tmp_path / "nothing", view)
    odd = fake_run(tmp_path / "odd", view, split)
    (odd / "split.json").write_text(json.dumps({"train": ["a name this level lacks"]}))
    with pytest.raises(SplitError, match="lacks"):
        run_split(odd, view)
    damaged = fake_run(tmp_path / "damaged", view, split)
    (damaged / "run.json").write_text("{not json")
    with pytest.raises(SplitError, match="damaged: run.json is not valid JSON"):
        run_split(damaged, view)


def test_read_split_names_tolerates_missing_parts(tmp_path):
    (tmp_path / "split.json").write_text(json.dumps({"train": ["asthma"]}))
    assert read_split_names(tmp_path) == {"train": ["asthma"], "validation": [], "test": [], "zero_shot": []}
    (tmp_path / "split.json").write_text("not json")
    assert read_split_names(tmp_path) is None
