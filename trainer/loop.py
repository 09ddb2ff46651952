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
from trainer.events import CancelFlag, TrainResult, broadcast, epoch_estimate
from trainer.objectives import OBJECTIVES, fine_tuning

logger = logging.getLogger(__name__)

def resolve_device(name: str) -> torch.device:
    """``auto`` -> CUDA when present (else MPS, else CPU); ``cpu``/``cuda`` as given."""
    if name == "auto":
        from bioviz.models.encoders import device

        return torch.device(device())
    return torch.device(name)


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

    Validation and test names rank the training names; zero-shot names rank each other.
    """
    from bioviz.evaluation.metrics import class_retrieval_map

    split, labels = data.split, data.view.labels
    out = {}
    train_v, train_l = vectors[split.train], labels[split.train]
    for part in ("validation", "test"):
        rows = getattr(split, part)
        out[part] = {"mAP": float(class_retrieval_map(vectors[rows], labels[rows], train_v, train_l)),
                     "names": len(rows)} if len(rows) else {"mAP": None, "names": 0}
    if len(split.zero_shot):
        rows = split.zero_shot
        out["zero_shot"] = {"mAP": float(class_retrieval_map(vectors[rows], labels[rows], vectors[rows], labels[rows],
                                                            exclude_self=True)), "names": len(rows)}
    return out


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
        self.device = resolve_device(config.device)

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
        result = path(c, self.data, self.device, self.emit, self.cancel) if path else self._train_head()
        result.metrics = {"baseline": baseline, "trained": retrieval_figures(result.vectors, self.data),
                          **result.metrics}
        return result

    # ----------------------------------------------------------------- heads
    def _train_head(self) -> TrainResult:
        """Train the configuration's head (:data:`trainer.objectives.OBJECTIVES`) with early stopping."""
        c, data, dev = self.config, self.data, self.device
        split, labels_np = data.split, data.view.labels
        train_rows, val_rows = split.train, split.validation
        objective = OBJECTIVES[c.encoder](c, data, dev, self.generator)
        model = objective.build_head()
        optimiser = _adam(model.parameters(), c.lr, dev)
        x_dev = objective.device_inputs
        weights = {"triplet": c.triplet_weight, "ground": c.grounding_weight, "context": c.context_weight, "ms": 1.0}

        def weighted_total(terms: dict):
            """The multi-task loss: the papers' weighted sum of the terms (all weights 1 by default)."""
            return sum(weights[name] * value for name, value in terms.items())

        def validation_loss(encoded_val: torch.Tensor) -> float:
            """The multi-task loss on validation names, from their (eval-mode) encodings."""
            if not len(val_rows):
                return float("nan")
            with torch.no_grad():
                return float(weighted_total(objective.validation_terms(encoded_val)))

        def validation_map(encoded: torch.Tensor) -> float:
            from bioviz.evaluation.metrics import class_retrieval_map

            if not len(val_rows):
                return float("nan")
            enc = l2_normalise(encoded.numpy())  # the metric assumes unit rows
            return float(class_retrieval_map(enc[n_train:], labels_np[val_rows], enc[:n_train],
                                             labels_np[train_rows]))

        # What the head keeps of the base's similarities between classes (a relatedness proxy
        # computed on validation names only; quality_train.py can select on it).
        retention = CrossClassRetention(data.vectors[val_rows], labels_np[val_rows])

        history: list[dict] = []
        per_epoch: list[float] = []
        best_value, best_epoch, best_state = None, 0, copy.deepcopy(model.state_dict())
        higher_is_better = c.stop_on == "mAP"
        stopped_early = False
        started = time.perf_counter()
        n_train = len(train_rows)
        # One eval-mode pass over training + validation names per epoch serves the validation
        # figures of this epoch and the negative sampling of the next.
        tv_rows = torch.from_numpy(np.concatenate([train_rows, val_rows]))
        encoded = encode_in_chunks(model, x_dev[tv_rows]).cpu()
        for epoch in range(1, c.epochs + 1):
            epoch_started = time.perf_counter()
            model.train()
            batches = objective.epoch_batches(encoded[:n_train])
            sums: dict[str, float] = {}
            seen = 0
            for local in batches:
                self.cancel.check()
                terms = objective.batch_terms(model, local)
                total = weighted_total(terms)
                optimiser.zero_grad(set_to_none=True)
                total.backward()
                optimiser.step()
                for name, value in terms.items():
                    sums[name] = sums.get(name, 0.0) + float(value.detach()) * len(local)
                sums["total"] = sums.get("total", 0.0) + float(total.detach()) * len(local)
                seen += len(local)
            self.cancel.check()
            epoch_losses = {k: v / max(seen, 1) for k, v in sums.items()}
            encoded = encode_in_chunks(model, x_dev[tv_rows]).cpu()
            val_map = validation_map(encoded)
            val_loss = validation_loss(encoded[n_train:]) if c.stop_on == "loss" else None
            value = val_map if higher_is_better else val_loss
            improved = best_value is None or (value > best_value if higher_is_better else value < best_value)
            if improved and not np.isnan(value):  # NaN never improves
                best_value, best_epoch, best_state = value, epoch, copy.deepcopy(model.state_dict())
            elapsed = time.perf_counter() - started
            per_epoch.append(time.perf_counter() - epoch_started)
            record = {"epoch": epoch, "losses": epoch_losses, "val_mAP": val_map, "val_loss": val_loss,
                      "val_retention": retention(encoded[n_train:].numpy()), "seconds": per_epoch[-1]}
            history.append(record)
            self.emit({"event": "epoch", "epoch": epoch, "max_epochs": c.epochs, "losses": epoch_losses,
                        "val_metric": value, "val_name": c.stop_on, "val_mAP": val_map,
                        "val_retention": record["val_retention"],
                        "elapsed_s": elapsed,
                        **epoch_estimate(epoch, c.epochs, elapsed, best_epoch, c.patience)})
            if epoch - best_epoch >= c.patience and best_epoch > 0:
                stopped_early = epoch < c.epochs
                break
            if best_epoch == 0 and epoch >= c.patience:  # no usable validation figure: keep the last
                best_state, best_epoch = copy.deepcopy(model.state_dict()), epoch
        training_s = time.perf_counter() - started
        model.load_state_dict(best_state)
        # The head's outputs for every name, once and on the training device: the base-weight
        # choice reads the training and validation rows, the run's vectors all of them.
        outputs = encode_in_chunks(model, x_dev).cpu().numpy()
        model = model.cpu()
        head = objective.trained_head(model)
        mixing = self._choose_base_weight(outputs, np.concatenate([train_rows, val_rows]), retention)
        if mixing["weight"] > 0:
            head = encoders.BaseMix(head, mixing["weight"], mixing["scale"])
        head.eval()
        vectors = mix(outputs, data.vectors, mixing["weight"], mixing["scale"])
        extra = {"base_mix": mixing, **objective.metrics(lambda vectors: retrieval_figures(vectors, data))}
        logger.info("trained %s: best epoch %d of %d in %.1fs", c.encoder, best_epoch, len(history), training_s)
        return TrainResult(head, None, objective.projection, vectors, history, best_epoch, stopped_early, training_s,
                           per_epoch, str(self.device), metrics=extra)

    def _choose_base_weight(self, outputs: np.ndarray, rows: np.ndarray, retention) -> dict:
        """The weight of the input in the run's output, fixed or chosen on validation (:mod:`trainer.base_mix`).

        ``outputs`` are the head's outputs for every name of the view; ``rows`` the training
        then the validation names. Returns the record of the choice for the run's metrics.
        """
        c, labels = self.config, self.data.view.labels

        def progress(done: int, total: int) -> None:
            self.cancel.check()
            self.emit({"event": "base_weight", "done": done, "total": total})

        record = choose_base_weight(outputs[rows], self.data.vectors[rows], labels[rows], len(self.data.split.train),
                                    retention, c.min_retention, c.base_weight, progress=progress)
        logger.info("base weight %.1f (%s)", record["weight"], record["chosen_by"])
        return record
