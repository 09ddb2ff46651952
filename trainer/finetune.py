"""Fine-tuning a whole sentence-transformer with its own trainer, reporting like the head loop.

Used by ``definitions`` (BioLORD) and by ``hierarchical`` with ``finetune`` (HiPrBERT):
:class:`~sentence_transformers.SentenceTransformerTrainer` with AdamW, a linear schedule with
warm-up, the run's seed; a Hugging Face callback turns each epoch into a bioviz ``epoch``
event (training loss, validation mAP, ETA) and stops training when the cancel flag is set.
"""

from __future__ import annotations

import logging
import tempfile
import time
from collections.abc import Callable

import numpy as np
import torch
from torch import nn

from trainer import sampling
from trainer.events import CancelFlag, Cancelled, Emit, TrainResult
from trainer.losses import MultiSimilarityLoss

logger = logging.getLogger(__name__)


class HierarchyMultiSimilarityLoss(nn.Module):
    """HiPrBERT's multi-similarity loss as a sentence-transformers loss over (anchor, partner) rows.

    Each dataset row is an anchor name and its closest related name; ``label`` encodes both
    row indices (``anchor * n + partner``) so the categories of the whole batch can be
    looked up in the precomputed ``(n, n)`` matrix.

    Parameters
    ----------
    model : SentenceTransformer
    categories : torch.Tensor
        ``(n, n)`` HiPrBERT distance categories (:func:`trainer.sampling.hierarchy_categories`).
    alpha, beta, lam : float
    """

    def __init__(self, model, categories: torch.Tensor, alpha: float = 2.0, beta: float = 2.0, lam: float = 0.5):
        super().__init__()
        self.model = model
        self.register_buffer("categories", categories.long(), persistent=False)
        self.ms = MultiSimilarityLoss(alpha, beta, lam)

    def forward(self, sentence_features, labels: torch.Tensor) -> torch.Tensor:
        n = self.categories.shape[0]
        anchors = self.model(sentence_features[0])["sentence_embedding"]
        partners = self.model(sentence_features[1])["sentence_embedding"]
        rows = torch.cat([labels // n, labels % n]).to(self.categories.device)
        cats = self.categories[rows][:, rows]
        return self.ms(torch.cat([anchors, partners]), cats.to(anchors.device))


class _EpochReport:
    """Each epoch of a fine-tuning as a bioviz ``epoch`` event: mean logged loss, validation mAP, ETA."""

    def __init__(self, c, emit: Emit, evaluator, loss_name: str):
        self.c, self.emit, self.evaluator, self.loss_name = c, emit, evaluator, loss_name
        self.started = self.epoch_started = time.perf_counter()
        self.history: list[dict] = []
        self.per_epoch: list[float] = []

    def __call__(self, model, bridge) -> None:
        epoch, epochs = len(self.history) + 1, self.c.epochs
        val_map = self.evaluator(model)[self.evaluator.primary_metric]
        loss = bridge.epoch_loss()
        now = time.perf_counter()
        self.per_epoch.append(now - self.epoch_started)
        self.epoch_started = now
        elapsed = now - self.started
        losses = {self.loss_name: loss, "total": loss}
        self.history.append({"epoch": epoch, "losses": losses, "val_mAP": val_map, "val_loss": None,
                             "seconds": self.per_epoch[-1]})
        self.emit({"event": "epoch", "epoch": epoch, "max_epochs": epochs, "losses": losses,
                   "val_metric": val_map, "val_name": "mAP", "val_mAP": val_map, "elapsed_s": elapsed,
                   "eta_s": elapsed / epoch * (epochs - epoch)})


def _split_vectors(model, data) -> np.ndarray:
    """The run's vectors: the split's names encoded, every other row zero.

    Only the split's names are encoded: encoding a whole large view again (tens of thousands
    of names through the transformer) would cost more than the fine-tuning.
    """
    from trainer.evaluators import encode_unit  # imports sentence-transformers (seconds)

    split = data.split
    split_rows = np.unique(np.concatenate([split.train, split.validation, split.test, split.zero_shot]))
    vectors = np.zeros((len(data.view.names), model.get_embedding_dimension()), dtype=np.float32)
    if len(split_rows):
        vectors[split_rows] = encode_unit(model, [data.view.names[i] for i in split_rows])
    return vectors


def fit_sentence_transformer(c, data, *, device: torch.device, emit: Emit, cancel: CancelFlag, columns: dict,
                             make_loss: Callable, loss_name: str, batch_sampler=None) -> TrainResult:
    """Fine-tune the base model of config ``c`` on a dataset and return a TrainResult.

    Parameters
    ----------
    c : trainer.config.TrainConfig
        A validated configuration.
    data : trainer.data.TrainingData
    device : torch.device
    emit : callable
        Receives one ``epoch`` event per epoch (:mod:`trainer.events`).
    cancel : CancelFlag
        Stops training at the next step when set.
    columns : dict
        Dataset columns (text columns first, optional ``label``).
    make_loss : callable
        ``make_loss(model) -> loss module``.
    loss_name : str
        Name of the loss in the reported ``losses``.
    batch_sampler : optional
        A :class:`~sentence_transformers.base.sampler.BatchSamplers` value.
    """
    from datasets import Dataset  # imported here: datasets imports pyarrow and pandas (seconds)

    from bioviz.models.encoders import load_sentence_transformer  # imported here: it imports the hub client
    from trainer import hf_bridge  # imports transformers and sentence-transformers (seconds)
    from trainer.evaluators import ClassRetrievalEvaluator  # imports sentence-transformers (seconds)

    model = load_sentence_transformer(c.base, device=str(device))
    report = _EpochReport(c, emit, ClassRetrievalEvaluator(data, "validation"), loss_name)
    bridge = hf_bridge.RunBridge(cancel, on_epoch=lambda bridge, _state: report(model, bridge))
    dataset = Dataset.from_dict(columns)
    n_rows = len(next(iter(columns.values())))
    steps_per_epoch = max(1, int(np.ceil(n_rows / c.batch_size)))
    extra = {"batch_sampler": batch_sampler} if batch_sampler is not None else {}
    with tempfile.TemporaryDirectory(prefix="bioviz-finetune-") as scratch:
        args = hf_bridge.training_arguments(c, scratch, warmup_steps=round(c.warmup_ratio * steps_per_epoch * c.epochs),
                                            logging_steps=max(1, steps_per_epoch // 4),
                                            use_cpu=device.type == "cpu", save_strategy="no", **extra)
        hf_bridge.quiet_trainer(model=model, args=args, train_dataset=dataset, loss=make_loss(model),
                                bridge=bridge).train()
    if cancel.is_set():
        raise Cancelled("training cancelled")
    training_s = time.perf_counter() - report.started
    model.eval()
    return TrainResult(head=None, model=model, projection=None, vectors=_split_vectors(model, data),
                       history=report.history, best_epoch=len(report.history), stopped_early=False,
                       training_s=training_s, per_epoch_s=report.per_epoch, device=str(device), metrics={})


def fine_tune_hierarchy(c, data, *, device: torch.device, emit: Emit, cancel: CancelFlag) -> TrainResult:
    """HiPrBERT-style fine-tuning of the base transformer with the hierarchical multi-similarity loss.

    Arguments as for :func:`fit_sentence_transformer`.
    """
    rows = data.split.train
    concepts = [data.view.name_concepts[i] for i in rows]
    categories = sampling.hierarchy_categories(concepts, data.view.labels[rows], data.parents())
    # One (anchor, closest related name) row per training name, as in the head's hierarchy batches.
    cats = categories.clone().long()
    cats.fill_diagonal_(127)
    lowest = cats.min(dim=1, keepdim=True).values
    gen = torch.Generator().manual_seed(c.seed)
    partners = torch.multinomial((cats == lowest).double(), 1, generator=gen).squeeze(1)
    n = len(rows)
    names = [data.view.names[i] for i in rows]
    columns = {"anchor": names, "partner": [names[int(p)] for p in partners],
               "label": [int(i) * n + int(p) for i, p in enumerate(partners)]}
    return fit_sentence_transformer(
        c, data, device=device, emit=emit, cancel=cancel, columns=columns,
        make_loss=lambda model: HierarchyMultiSimilarityLoss(model, categories, c.ms_alpha, c.ms_beta, c.ms_lambda),
        loss_name="ms",
    )
