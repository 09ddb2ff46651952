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


def fit_sentence_transformer(c, data, device: torch.device, emit: Emit, cancel: CancelFlag, columns: dict,
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
    from datasets import Dataset
    from sentence_transformers import SentenceTransformerTrainer, SentenceTransformerTrainingArguments
    from transformers import TrainerCallback
    from transformers.trainer_callback import PrinterCallback, ProgressCallback

    from bioviz.models.encoders import load_sentence_transformer
    from bioviz.evaluation.metrics import class_retrieval_map

    model = load_sentence_transformer(c.base, device=str(device))
    split, labels = data.split, data.view.labels
    eval_names = [data.view.names[i] for i in np.concatenate([split.train, split.validation])]

    def encode(texts: list[str]) -> np.ndarray:
        return model.encode(texts, batch_size=128, convert_to_numpy=True, normalize_embeddings=True,
                            show_progress_bar=False)

    history: list[dict] = []
    per_epoch: list[float] = []
    started = time.perf_counter()
    state = {"epoch_started": started, "losses": []}

    class Reporter(TrainerCallback):
        """Bridges the Hugging Face trainer to bioviz callbacks and the cancel flag."""

        def on_step_end(self, args, train_state, control, **kwargs):
            if cancel.is_set():
                control.should_training_stop = True
            return control

        def on_log(self, args, train_state, control, logs=None, **kwargs):
            if logs and "loss" in logs:
                state["losses"].append(float(logs["loss"]))

        def on_epoch_end(self, args, train_state, control, **kwargs):
            if cancel.is_set():
                return control
            epoch = len(history) + 1
            vectors = encode(eval_names)
            n_train = len(split.train)
            val_map = float(class_retrieval_map(vectors[n_train:], labels[split.validation], vectors[:n_train],
                                                labels[split.train])) if len(split.validation) else float("nan")
            loss = float(np.mean(state["losses"])) if state["losses"] else float("nan")
            state["losses"] = []
            now = time.perf_counter()
            per_epoch.append(now - state["epoch_started"])
            state["epoch_started"] = now
            elapsed = now - started
            losses = {loss_name: loss, "total": loss}
            history.append({"epoch": epoch, "losses": losses, "val_mAP": val_map, "val_loss": None,
                            "seconds": per_epoch[-1]})
            emit({"event": "epoch", "epoch": epoch, "max_epochs": c.epochs, "losses": losses,
                           "val_metric": val_map, "val_name": "mAP", "val_mAP": val_map, "elapsed_s": elapsed,
                           "eta_s": elapsed / epoch * (c.epochs - epoch)})
            return control

    dataset = Dataset.from_dict(columns)
    n_rows = len(next(iter(columns.values())))
    steps_per_epoch = max(1, int(np.ceil(n_rows / c.batch_size)))
    extra = {"batch_sampler": batch_sampler} if batch_sampler is not None else {}
    with tempfile.TemporaryDirectory(prefix="bioviz-finetune-") as scratch:
        args = SentenceTransformerTrainingArguments(
            output_dir=scratch,
            num_train_epochs=c.epochs,
            per_device_train_batch_size=c.batch_size,
            learning_rate=c.lr,
            weight_decay=c.weight_decay,
            warmup_steps=round(c.warmup_ratio * steps_per_epoch * c.epochs),
            lr_scheduler_type="linear",
            seed=c.seed,
            data_seed=c.seed,
            save_strategy="no",
            report_to="none",
            logging_steps=max(1, steps_per_epoch // 4),
            disable_tqdm=True,
            use_cpu=device.type == "cpu",
            dataloader_num_workers=0,
            **extra,
        )
        fit = SentenceTransformerTrainer(model=model, args=args, train_dataset=dataset, loss=make_loss(model),
                                         callbacks=[Reporter()])
        # The printer callback writes log dicts to stdout, which carries only the JSON summary.
        fit.remove_callback(PrinterCallback)
        fit.remove_callback(ProgressCallback)
        fit.train()
    if cancel.is_set():
        raise Cancelled("training cancelled")
    training_s = time.perf_counter() - started
    model.eval()
    # Only the split's names are evaluated: encoding a whole large view again (tens of
    # thousands of names through the transformer) would cost more than the fine-tuning.
    split_rows = np.unique(np.concatenate([split.train, split.validation, split.test, split.zero_shot]))
    vectors = np.zeros((len(data.view.names), model.get_embedding_dimension()), dtype=np.float32)
    if len(split_rows):
        vectors[split_rows] = encode([data.view.names[i] for i in split_rows])
    return TrainResult(None, model, None, vectors, history, len(history), False, training_s, per_epoch,
                       str(device), metrics={})


def fine_tune_hierarchy(c, data, device: torch.device, emit: Emit, cancel: CancelFlag) -> TrainResult:
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
        c, data, device, emit, cancel, columns,
        lambda model: HierarchyMultiSimilarityLoss(model, categories, c.ms_alpha, c.ms_beta, c.ms_lambda),
        loss_name="ms",
    )
