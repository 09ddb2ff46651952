"""The training loop: every head trains, runs are deterministic, stopping and cancel work."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from trainer.events import CancelFlag, Cancelled
from trainer.loop import Trainer


@pytest.mark.parametrize("encoder", ["residual", "dan", "cca", "hierarchical"])
def test_each_head_trains_and_reports_epochs(encoder, tiny_data, tiny_config):
    events = []
    config = tiny_config(encoder=encoder, epochs=3, patience=5)
    result = Trainer(config, tiny_data, callbacks=[events.append]).run()
    assert events[0]["event"] == "start" and events[0]["max_epochs"] == 3
    epochs = [e for e in events if e["event"] == "epoch"]
    assert [e["epoch"] for e in epochs] == [1, 2, 3]
    assert all({"total", *({"triplet"} if encoder != "hierarchical" else {"ms"})} <= set(e["losses"]) for e in epochs)
    assert all(e["val_name"] == config.stop_on and e["eta_s"] >= 0 for e in epochs)
    assert all(-1.0 <= e["val_retention"] <= 1.0 for e in epochs)  # drawn on the Train page's curves
    assert result.vectors.shape == tiny_data.vectors.shape
    assert np.allclose(np.linalg.norm(result.vectors, axis=1), 1.0, atol=1e-5)
    assert set(result.metrics) >= {"baseline", "trained"}
    assert result.metrics["trained"]["test"]["mAP"] is not None
    if encoder == "cca":
        assert "cca_projection" in result.metrics
    # The head is handed over for inference: no dropout anywhere (a cca Stack once came back in training mode).
    assert not any(module.training for module in result.head.modules())
    u = torch.from_numpy(tiny_data.vectors)
    with torch.no_grad():
        assert torch.equal(result.head(u), result.head(u))


def test_training_lowers_the_training_loss(tiny_data, tiny_config):
    config = tiny_config(encoder="dan", epochs=25, patience=25, hidden=64)
    history = Trainer(config, tiny_data).run().history
    assert np.mean([h["losses"]["total"] for h in history[-5:]]) < history[0]["losses"]["total"]


def test_same_seed_gives_identical_runs(tiny_data, tiny_config):
    config = tiny_config(encoder="residual", epochs=3)
    first = Trainer(config, tiny_data).run()
    second = Trainer(config, tiny_data).run()
    assert [h["losses"] for h in first.history] == [h["losses"] for h in second.history]
    assert np.array_equal(first.vectors, second.vectors)
    third = Trainer(tiny_config(encoder="residual", epochs=3, seed=1), tiny_data).run()
    assert not np.array_equal(first.vectors, third.vectors)


def test_early_stopping_restores_the_best_epoch(tiny_data, tiny_config):
    # With a zero learning rate nothing improves after the first epoch: stop after `patience`.
    config = tiny_config(encoder="dan", epochs=50, patience=3, lr=1e-12, stop_on="mAP")
    result = Trainer(config, tiny_data).run()
    assert len(result.history) == 4 and result.best_epoch == 1 and result.stopped_early


def test_validation_loss_criterion_is_reported(tiny_data, tiny_config):
    result = Trainer(tiny_config(encoder="residual", epochs=2), tiny_data).run()
    assert all(h["val_loss"] is not None and h["val_loss"] > 0 for h in result.history)


def test_cancel_flag_stops_between_batches(tiny_data, tiny_config):
    cancel = CancelFlag()
    seen = []

    def cancel_after_first_epoch(event):
        seen.append(event["event"])
        if event["event"] == "epoch":
            cancel.set()

    trainer = Trainer(tiny_config(encoder="residual", epochs=10, batch_size=2), tiny_data,
                      callbacks=[cancel_after_first_epoch], cancel=cancel)
    with pytest.raises(Cancelled):
        trainer.run()
    assert seen.count("epoch") == 1


def test_cancel_before_start_trains_nothing(tiny_data, tiny_config):
    cancel = CancelFlag()
    cancel.set()
    with pytest.raises(Cancelled):
        Trainer(tiny_config(), tiny_data, cancel=cancel).run()


def test_trained_head_matches_returned_vectors(tiny_data, tiny_config):
    result = Trainer(tiny_config(encoder="residual", epochs=2), tiny_data).run()
    with torch.no_grad():
        out = torch.nn.functional.normalize(result.head(torch.from_numpy(tiny_data.vectors)), dim=1).numpy()
    assert np.allclose(out, result.vectors, atol=1e-5)


def test_embedding_progress_reports_throttled_and_honours_a_cancel():
    from trainer.runs import _EmbeddingProgress

    events, seen = [], []
    cancel = CancelFlag()
    report = _EmbeddingProgress([events.append], cancel, progress=lambda d, t: seen.append(d), every_s=3600)
    report(10, 100)  # the first call reports, later ones wait for the interval ...
    report(50, 100)
    report(100, 100)  # ... except the last
    assert [e["done"] for e in events] == [10, 100] and seen == [10, 50, 100]
    assert events[0]["event"] == "embedding" and events[0]["total"] == 100 and events[-1]["eta_s"] == 0
    cancel.set()
    with pytest.raises(Cancelled):
        report(60, 100)


def test_history_reports_the_cross_class_retention(tiny_data, tiny_config):
    result = Trainer(tiny_config(encoder="dan", epochs=2), tiny_data).run()
    assert all(-1.0 <= h["val_retention"] <= 1.0 for h in result.history)


def test_identity_started_dan_keeps_more_of_the_base_than_a_random_one(tiny_data, tiny_config):
    random_start = Trainer(tiny_config(encoder="dan", epochs=1, lr=1e-12, stop_on="mAP"), tiny_data).run()
    identity = Trainer(tiny_config(encoder="dan", epochs=1, lr=1e-12, stop_on="mAP", identity_start=True),
                       tiny_data).run()
    # Nothing is learnt at this learning rate: the identity start is the base space itself.
    assert identity.history[0]["val_retention"] == pytest.approx(1.0, abs=1e-6)
    assert random_start.history[0]["val_retention"] < 0.99
    assert np.allclose(identity.vectors, tiny_data.vectors, atol=1e-5)


def test_identity_start_too_narrow_is_a_one_line_error(tiny_data, tiny_config):
    from bioviz.errors import BiovizError

    with pytest.raises(BiovizError, match="hidden >= 2 x 16 = 32 .* 16 dimensions"):
        Trainer(tiny_config(encoder="dan", hidden=20, identity_start=True), tiny_data).run()


def test_loss_weights_scale_the_multi_task_loss(tiny_data, tiny_config):
    plain = Trainer(tiny_config(encoder="dan", epochs=1), tiny_data).run().history[0]["losses"]
    weighted = Trainer(tiny_config(encoder="dan", epochs=1, triplet_weight=0.0, context_weight=3.0),
                       tiny_data).run().history[0]["losses"]
    # Terms are reported unweighted; the total is their weighted sum (same first batch).
    assert plain["total"] == pytest.approx(plain["triplet"] + plain["context"] + plain["ground"], rel=1e-5)
    assert weighted["total"] == pytest.approx(3.0 * weighted["context"] + weighted["ground"], rel=1e-5)


def test_cca_takes_an_optional_contextual_term(tiny_data, tiny_config):
    without = Trainer(tiny_config(encoder="cca", epochs=1), tiny_data).run().history[0]["losses"]
    with_context = Trainer(tiny_config(encoder="cca", epochs=1, context_weight=1.0), tiny_data).run()
    assert "context" not in without
    assert with_context.history[0]["losses"]["context"] > 0


def test_auto_base_weight_is_chosen_on_validation_and_recorded(tiny_data, tiny_config):
    events = []
    result = Trainer(tiny_config(encoder="dan", epochs=2), tiny_data, callbacks=[events.append]).run()
    assert [e["done"] for e in events if e["event"] == "base_weight"] == list(range(1, 12))  # after the epochs
    assert events[-1]["event"] == "base_weight"
    record = result.metrics["base_mix"]
    assert record["chosen_by"] == "validation" and len(record["candidates"]) == 11
    chosen = next(c for c in record["candidates"] if c["weight"] == record["weight"])
    assert chosen["val_retention"] >= record["min_retention"]
    # The run's trained validation figure is the chosen candidate's.
    assert result.metrics["trained"]["validation"]["mAP"] == pytest.approx(chosen["val_mAP"], abs=1e-6)


def test_fixed_base_weight_mixes_the_head_with_its_input(tiny_data, tiny_config):
    from trainer.encoders import BaseMix

    plain = Trainer(tiny_config(encoder="cca", epochs=2, base_weight=0.0), tiny_data).run()
    mixed = Trainer(tiny_config(encoder="cca", epochs=2, base_weight=0.5), tiny_data).run()
    assert not isinstance(plain.head, BaseMix) and plain.metrics["base_mix"]["chosen_by"] == "fixed"
    assert isinstance(mixed.head, BaseMix) and mixed.head.weight == 0.5
    u = torch.from_numpy(tiny_data.vectors)
    with torch.no_grad():
        f = mixed.head.head(u)  # the trained head underneath
    scale = mixed.metrics["base_mix"]["scale"]
    expected = torch.nn.functional.normalize(0.5 * f / scale + 0.5 * u, dim=1).numpy()
    assert np.allclose(mixed.vectors, expected, atol=1e-5)


def test_the_embedding_time_left_comes_from_the_recent_rate_not_from_names_found_cached():
    import time

    from trainer.runs import _EmbeddingProgress

    events = []
    report = _EmbeddingProgress([events.append], None, every_s=0.0)
    report(900, 1000)  # 900 names found cached: done at once
    time.sleep(0.6)
    report(910, 1000)  # then 10 names encoded in 0.6 s: 90 left take about 5 s, not 0.06 s
    assert events[0]["eta_s"] is None, "no rate yet: no time left"
    assert 2.0 < events[-1]["eta_s"] < 8.0
