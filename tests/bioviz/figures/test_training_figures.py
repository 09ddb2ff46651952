"""Training figures: curves from progress events, baseline vs trained bars from run metrics."""

from bioviz.figures import base_weight_choice, baseline_vs_trained, training_curves

EVENTS = [
    {"event": "start", "max_epochs": 3},
    *({"event": "epoch", "epoch": i, "losses": {"triplet": 1.0 / i, "total": 2.0 / i}, "val_metric": v,
       "val_name": "mAP"} for i, v in ((1, 0.30), (2, 0.50), (3, 0.45))),
]


def test_curves_have_one_line_per_loss_and_mark_the_best_validation_epoch():
    fig = training_curves(EVENTS, "Training curves · residual on icd10 d1", "lr 0.001")
    names = [t.name for t in fig.data]
    assert names == ["triplet", "total", "validation mAP", "best mAP"]
    assert list(fig.data[1].y) == [2.0, 1.0, 2.0 / 3]
    assert (fig.data[3].x[0], fig.data[3].y[0]) == (2, 0.50)  # highest mAP, not the last
    assert fig.layout.title.text.startswith("Training curves")


def test_loss_as_validation_metric_marks_the_lowest():
    events = [{"event": "epoch", "epoch": i, "losses": {"total": 1.0}, "val_metric": v, "val_name": "loss"}
              for i, v in ((1, 0.3), (2, 0.2), (3, 0.25))]
    best = training_curves(events, "t").data[-1]
    assert (best.x[0], best.y[0]) == (2, 0.2)


def test_curves_before_the_first_epoch_say_so():
    fig = training_curves([{"event": "start", "max_epochs": 5}], "t")
    assert any("waiting for the first epoch" in a.text for a in fig.layout.annotations)


def test_baseline_vs_trained_compares_shared_scores_only():
    baseline = {"validation": {"mAP": 0.4, "names": 330}, "test": {"mAP": 0.35, "names": 22}, "zero_shot": {"mAP": 0.2}}
    trained = {"validation": {"mAP": 0.6, "names": 330}, "test": {"mAP": 0.55, "names": 22}, "zero_shot": {"mAP": None}}
    fig = baseline_vs_trained(baseline, trained, "Class retrieval · minilm vs run r1", labels=("minilm", "r1"))
    assert [t.name for t in fig.data] == ["minilm", "r1"]
    assert list(fig.data[0].x) == ["validation mAP", "test mAP"]
    assert list(fig.data[1].y) == [0.6, 0.55]


def test_curves_show_the_cross_class_retention_when_reported():
    events = [{"event": "epoch", "epoch": i, "losses": {"total": 1.0}, "val_metric": 0.5, "val_name": "mAP",
               "val_retention": r} for i, r in ((1, 0.9), (2, 0.8), (3, float("nan")))]
    fig = training_curves(events, "t")
    [kept] = [t for t in fig.data if t.name == "cross-class retention"]
    assert list(kept.x) == [1, 2] and list(kept.y) == [0.9, 0.8]  # NaN epochs left out
    assert "cross-class retention" in fig.layout.annotations[1].text


def test_base_weight_choice_marks_the_chosen_weight_and_the_threshold():
    record = {"weight": 0.2, "min_retention": 0.85, "chosen_by": "validation",
              "candidates": [{"weight": w, "val_mAP": 0.7 - w / 2, "val_retention": 0.6 + w} for w in (0.0, 0.1, 0.2, 0.3)]}
    fig = base_weight_choice(record, "Base weight · run r1 · dan on icd10 d1")
    names = [t.name for t in fig.data]
    assert names == ["validation mAP", "cross-class retention", "chosen: w = 0.2"]
    assert list(fig.data[2].x) == [0.2] and fig.data[2].y[0] == 0.6
    assert any(s.y0 == 0.85 for s in fig.layout.shapes)
    assert fig.layout.title.text.startswith("Base weight")
    empty = base_weight_choice({"weight": 0.0, "candidates": [], "chosen_by": "no validation names"}, "t")
    assert any("no validation names" in a.text for a in empty.layout.annotations)


def test_baseline_and_trained_bars_use_the_one_baseline_compared_pair():
    from bioviz.figures.theme import pair_colours

    fig = baseline_vs_trained({"test": {"mAP": 0.3}}, {"test": {"mAP": 0.6}}, "t", labels=("minilm", "r1"))
    assert [t.marker.color for t in fig.data] == list(pair_colours())


def test_curves_draw_the_trained_map_against_the_base_model_in_the_pair_colours():
    from bioviz.figures.theme import pair_colours

    baseline, compared = pair_colours()
    events = [{"event": "start", "max_epochs": 10, "baseline_val_mAP": 0.41},
              *({"event": "epoch", "epoch": i, "losses": {"total": 1.0 / i}, "val_metric": 1.0 / i + (i == 3),
                 "val_name": "loss", "val_mAP": m} for i, m in ((1, 0.41), (2, 0.42), (3, 0.43)))]
    fig = training_curves(events, "t")
    traces = {t.name: t for t in fig.data}
    assert list(traces["validation mAP"].y) == [0.41, 0.42, 0.43] and traces["validation mAP"].line.color == compared
    base = traces["base model (validation mAP)"]
    assert list(base.y) == [0.41, 0.41] and list(base.x) == [1, 10] and base.line.color == baseline
    assert traces["validation loss"].xaxis == "x"  # the stopping criterion beside the training loss
    assert (traces["best loss"].x[0], traces["best loss"].xaxis) == (2, "x")
    assert fig.layout.annotations[1].text == "Validation class-retrieval mAP"
