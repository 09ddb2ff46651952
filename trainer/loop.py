"""The training loop: heads over base vectors (residual, dan, cca, hierarchical) and the
dispatch to fine-tuning.

The loop (epochs, early stopping, the base weight) is the same for every head; what differs
between head types (inputs, head, batches, loss terms) is the type's objective
(:mod:`trainer.objectives`), which the loop calls without asking which type it trains.
:class:`Trainer.run` trains one configuration and reports through callbacks: each callback
receives event dicts (``start``, ``epoch``) so the command line, the progress file and the
job runner show the same figures. A :class:`CancelFlag` is checked between batches.
Writing the run to disk is kept out of the loop (:mod:`trainer.runs`).
"""

from __future__ import annotations

import copy
import logging
import time

import numpy as np
import torch

from bioviz.evaluation.metrics import CrossClassRetention
from bioviz.space import l2_normalise
from trainer import encoders
from trainer.base_mix import choose_base_weight, mix
from trainer.config import TrainConfig
from trainer.data import TrainingData
from trainer.devices import resolve_device
from trainer.events import CancelFlag, TrainResult, broadcast, epoch_estimate
from trainer.objectives import OBJECTIVES, fine_tuning

logger = logging.getLogger(__name__)


def _adam(parameters, lr: float, device: torch.device) -> torch.optim.Optimizer:
    """Adam, fused into one kernel where torch supports it (halves a wide head's step time on CPU)."""
    parameters = list(parameters)
    try:
        return torch.optim.Adam(parameters, lr=lr, fused=device.type in ("cpu", "cuda"))
    except (RuntimeError, TypeError, ValueError):
        return torch.optim.Adam(parameters, lr=lr)


def encode_in_chunks(model: torch.nn.Module, x: torch.Tensor, chunk: int = 4096) -> torch.Tensor:
    """Eval-mode encodings of ``x`` in chunks (bounded memory at wide hidden layers).

    The model is left in eval mode (the epoch loop switches it back to training at the start
    of each epoch): restoring a "previous" flag would switch every child of a freshly built
    wrapper to training mode, dropout included.
    """
    model.eval()
    with torch.no_grad():
        return torch.cat([model(x[s : s + chunk]) for s in range(0, len(x), chunk)]) if len(x) else x


def retrieval_figures(vectors: np.ndarray, data: TrainingData) -> dict:
    """Class-retrieval mAP (higher-level-semantics §4.3) of validation, test and zero-shot names.

    Validation and test names rank the training names; zero-shot names rank each other
    (:class:`trainer.evaluators.ClassRetrievalEvaluator`).
    """
    from trainer.evaluators import ClassRetrievalEvaluator  # imports sentence-transformers (seconds)

    out = {}
    for part in ("validation", "test", "zero_shot"):
        evaluator = ClassRetrievalEvaluator(data, part)
        if len(evaluator):
            out[part] = {"mAP": evaluator.score(vectors[evaluator.rows]), "names": len(evaluator)}
        elif part != "zero_shot":
            out[part] = {"mAP": None, "names": 0}
    return out


class _BestEpoch:
    """Early stopping's record: the best epoch so far on the validation criterion, and its weights."""

    def __init__(self, model: torch.nn.Module, *, higher_is_better: bool, patience: int):
        self.higher_is_better, self.patience = higher_is_better, patience
        self.value, self.epoch, self.state = None, 0, copy.deepcopy(model.state_dict())

    def consider(self, epoch: int, value: float, model: torch.nn.Module) -> None:
        """Keep the model's weights when ``value`` is the best so far (NaN never is)."""
        improved = self.value is None or (value > self.value if self.higher_is_better else value < self.value)
        if improved and not np.isnan(value):
            self.value, self.epoch, self.state = value, epoch, copy.deepcopy(model.state_dict())

    def should_stop(self, epoch: int, model: torch.nn.Module) -> bool:
        """Whether ``patience`` epochs passed without improvement."""
        if epoch - self.epoch >= self.patience and self.epoch > 0:
            return True
        if self.epoch == 0 and epoch >= self.patience:  # no usable validation figure: keep the last
            self.state, self.epoch = copy.deepcopy(model.state_dict()), epoch
        return False


class Trainer:
    """Train one configuration on prepared data.

    Parameters
    ----------
    config : TrainConfig
        A validated configuration (:func:`trainer.config.validate`).
    data : TrainingData
        View, split and input vectors (:func:`trainer.data.prepare`).
    callbacks : sequence of callable
        Each receives event dicts: ``{"event": "start", ...}`` then one
        ``{"event": "epoch", ...}`` per epoch.
    cancel : CancelFlag, optional
        Checked between batches; :meth:`run` raises :class:`Cancelled` when set.
    """

    def __init__(self, config: TrainConfig, data: TrainingData, callbacks=(), cancel: CancelFlag | None = None):
        self.config = config
        self.data = data
        self.emit = broadcast(callbacks)
        self.cancel = cancel or CancelFlag()
        self.device = torch.device(resolve_device(config.device))

    # ----------------------------------------------------------------- entry point
    def run(self) -> TrainResult:
        """Train, stop early on the validation criterion, and evaluate baseline and trained vectors."""
        c = self.config
        torch.manual_seed(c.seed)
        self.generator = torch.Generator().manual_seed(c.seed)
        baseline = retrieval_figures(self.data.vectors, self.data)
        # The base model's validation mAP: the line the Train page's curves measure training against.
        self.emit({"event": "start", "max_epochs": c.epochs, "device": str(self.device),
                    "train_names": len(self.data.split.train), "encoder": c.encoder,
                    "validation_names": len(self.data.split.validation),
                    "baseline_val_mAP": baseline["validation"]["mAP"]})
        path = fine_tuning(c)
        result = (path(c, self.data, device=self.device, emit=self.emit, cancel=self.cancel) if path
                  else self._train_head())
        result.metrics = {"baseline": baseline, "trained": retrieval_figures(result.vectors, self.data),
                          **result.metrics}
        return result

    # ----------------------------------------------------------------- heads
    def _train_head(self) -> TrainResult:
        """Train the configuration's head (:data:`trainer.objectives.OBJECTIVES`) with early stopping."""
        from trainer.evaluators import ClassRetrievalEvaluator  # imports sentence-transformers (seconds)

        c, data = self.config, self.data
        objective = OBJECTIVES[c.encoder](c, data, self.device, self.generator)
        model = objective.build_head()
        optimiser = _adam(model.parameters(), c.lr, self.device)
        x_dev, n_train, val_rows = objective.device_inputs, len(data.split.train), data.split.validation
        evaluator = ClassRetrievalEvaluator(data, "validation")
        # What the head keeps of the base's similarities between classes (a relatedness proxy
        # computed on validation names only; quality_train.py can select on it).
        retention = CrossClassRetention(data.vectors[val_rows], data.view.labels[val_rows])
        best = _BestEpoch(model, higher_is_better=c.stop_on == "mAP", patience=c.patience)
        history: list[dict] = []
        stopped_early = False
        started = time.perf_counter()
        # One eval-mode pass over training + validation names per epoch serves the validation
        # figures of this epoch and the negative sampling of the next.
        tv_rows = torch.from_numpy(evaluator.rows)
        encoded = encode_in_chunks(model, x_dev[tv_rows]).cpu()
        for epoch in range(1, c.epochs + 1):
            epoch_started = time.perf_counter()
            epoch_losses = self._train_epoch(model, objective, optimiser, encoded[:n_train])
            encoded = encode_in_chunks(model, x_dev[tv_rows]).cpu()
            val_map = evaluator.score(l2_normalise(encoded.numpy()))  # the metric assumes unit rows
            val_loss = self._validation_loss(objective, encoded[n_train:]) if c.stop_on == "loss" else None
            value = val_map if best.higher_is_better else val_loss
            best.consider(epoch, value, model)
            elapsed = time.perf_counter() - started
            record = {"epoch": epoch, "losses": epoch_losses, "val_mAP": val_map, "val_loss": val_loss,
                      "val_retention": retention(encoded[n_train:].numpy()),
                      "seconds": time.perf_counter() - epoch_started}
            history.append(record)
            self.emit({"event": "epoch", "epoch": epoch, "max_epochs": c.epochs, "losses": epoch_losses,
                       "val_metric": value, "val_name": c.stop_on, "val_mAP": val_map,
                       "val_retention": record["val_retention"], "elapsed_s": elapsed,
                       **epoch_estimate(epoch, c.epochs, elapsed, best_epoch=best.epoch, patience=c.patience)})
            if best.should_stop(epoch, model):
                stopped_early = epoch < c.epochs
                break
        training_s = time.perf_counter() - started
        model.load_state_dict(best.state)
        head, vectors, extra = self._finish_head(model, objective, evaluator.rows, retention)
        logger.info("trained %s: best epoch %d of %d in %.1fs", c.encoder, best.epoch, len(history), training_s)
        return TrainResult(head=head, model=None, projection=objective.projection, vectors=vectors, history=history,
                           best_epoch=best.epoch, stopped_early=stopped_early, training_s=training_s,
                           per_epoch_s=[record["seconds"] for record in history], device=str(self.device),
                           metrics=extra)

    def _weighted_total(self, terms: dict):
        """The multi-task loss: the papers' weighted sum of the terms (all weights 1 by default)."""
        c = self.config
        weights = {"triplet": c.triplet_weight, "ground": c.grounding_weight, "context": c.context_weight, "ms": 1.0}
        return sum(weights[name] * value for name, value in terms.items())

    def _train_epoch(self, model, objective, optimiser, encoded_train: torch.Tensor) -> dict[str, float]:
        """One pass over the epoch's batches; the mean of each loss term (and ``total``) per name."""
        model.train()
        sums: dict[str, float] = {}
        seen = 0
        for local in objective.epoch_batches(encoded_train):
            self.cancel.check()
            terms = objective.batch_terms(model, local)
            total = self._weighted_total(terms)
            optimiser.zero_grad(set_to_none=True)
            total.backward()
            optimiser.step()
            for name, value in terms.items():
                sums[name] = sums.get(name, 0.0) + float(value.detach()) * len(local)
            sums["total"] = sums.get("total", 0.0) + float(total.detach()) * len(local)
            seen += len(local)
        self.cancel.check()
        return {k: v / max(seen, 1) for k, v in sums.items()}

    def _validation_loss(self, objective, encoded_val: torch.Tensor) -> float:
        """The multi-task loss on validation names, from their (eval-mode) encodings."""
        if not len(self.data.split.validation):
            return float("nan")
        with torch.no_grad():
            return float(self._weighted_total(objective.validation_terms(encoded_val)))

    def _finish_head(self, model, objective, rows: np.ndarray, retention) -> tuple:
        """The trained head (with its base weight), the run's vectors and the head's metrics.

        The head's outputs for every name are computed once, on the training device: the
        base-weight choice reads the training and validation ``rows``, the run's vectors all of them.
        """
        data = self.data
        outputs = encode_in_chunks(model, objective.device_inputs).cpu().numpy()
        model = model.cpu()
        head = objective.trained_head(model)
        mixing = self._choose_base_weight(outputs, rows, retention)
        if mixing["weight"] > 0:
            head = encoders.BaseMix(head, mixing["weight"], mixing["scale"])
        head.eval()
        vectors = mix(outputs, data.vectors, mixing["weight"], mixing["scale"])
        extra = {"base_mix": mixing, **objective.metrics(lambda vectors: retrieval_figures(vectors, data))}
        return head, vectors, extra

    def _choose_base_weight(self, outputs: np.ndarray, rows: np.ndarray, retention) -> dict:
        """The weight of the input in the run's output, fixed or chosen on validation (:mod:`trainer.base_mix`).

        ``outputs`` are the head's outputs for every name of the view; ``rows`` the training
        then the validation names. Returns the record of the choice for the run's metrics.
        """
        c, labels = self.config, self.data.view.labels

        def progress(done: int, total: int) -> None:
            self.cancel.check()
            self.emit({"event": "base_weight", "done": done, "total": total})

        record = choose_base_weight(outputs[rows], self.data.vectors[rows], labels[rows],
                                    n_train=len(self.data.split.train), retention=retention,
                                    min_retention=c.min_retention, weight=c.base_weight, progress=progress)
        logger.info("base weight %.1f (%s)", record["weight"], record["chosen_by"])
        return record
