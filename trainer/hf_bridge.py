"""The one bridge between sentence-transformers' (Hugging Face) trainer and a bioviz run.

Fine-tuning (:mod:`trainer.finetune`) and pretraining (:mod:`trainer.pretrain.fit`) both train
with :class:`~sentence_transformers.SentenceTransformerTrainer`: the same arguments
(:func:`training_arguments`: AdamW, a linear schedule with warm-up, the run's seed for the
weights and the data order, no reporting, no progress bars, data loaded in this process), the
same callback (:class:`RunBridge`: the cancel flag, the logged losses, the run's own events)
and the same quiet trainer (:func:`quiet_trainer`). Importing this module imports transformers
and sentence-transformers (seconds): training code imports it when a run starts.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from sentence_transformers import SentenceTransformerTrainer, SentenceTransformerTrainingArguments
from transformers import TrainerCallback
from transformers.trainer_callback import PrinterCallback, ProgressCallback

from trainer.events import CancelFlag


def training_arguments(c, output_dir, *, warmup_steps: int, logging_steps: int, use_cpu: bool,
                       **extra) -> SentenceTransformerTrainingArguments:
    """The trainer's arguments for a run of config ``c``.

    Parameters
    ----------
    c : trainer.config.TrainConfig or trainer.pretrain.config.PretrainConfig
        Read: ``epochs``, ``batch_size``, ``lr``, ``weight_decay``, ``seed``.
    output_dir : str or Path
        Where the trainer writes checkpoints (a scratch directory when it saves none).
    warmup_steps, logging_steps : int
    use_cpu : bool
        Train on the CPU even where a GPU is present.
    **extra
        Further :class:`~sentence_transformers.SentenceTransformerTrainingArguments` (saving,
        the batch sampler, dropping the last batch).
    """
    return SentenceTransformerTrainingArguments(
        output_dir=str(output_dir),
        num_train_epochs=c.epochs,
        per_device_train_batch_size=c.batch_size,
        learning_rate=c.lr,
        weight_decay=c.weight_decay,
        warmup_steps=warmup_steps,
        lr_scheduler_type="linear",
        seed=c.seed,
        data_seed=c.seed,
        report_to="none",
        logging_steps=logging_steps,
        disable_tqdm=True,
        use_cpu=use_cpu,
        dataloader_num_workers=0,
        **extra,
    )


class RunBridge(TrainerCallback):
    """Stops the trainer when the cancel flag is set, keeps its logged losses, reports to the run.

    Parameters
    ----------
    cancel : CancelFlag
        Checked after every step; when set, training stops (and with ``save_on_cancel`` the
        trainer saves a checkpoint first, so the run can resume).
    on_step, on_epoch : callable, optional
        Called with this bridge and the trainer's state after each step (before the cancel
        check) and after each epoch (not once cancelled).
    save_on_cancel : bool

    Attributes
    ----------
    losses : list of float
        Every training loss the trainer logged, in order.
    """

    def __init__(self, cancel: CancelFlag, *, on_step: Callable | None = None, on_epoch: Callable | None = None,
                 save_on_cancel: bool = False):
        self.cancel, self.on_step, self.on_epoch, self.save_on_cancel = cancel, on_step, on_epoch, save_on_cancel
        self.losses: list[float] = []
        self._epoch_start = 0

    def on_step_end(self, args, state, control, **kwargs):
        if state.global_step >= state.max_steps:
            # The last step's loss is logged whatever ``logging_steps`` says (the trainer's own
            # end-of-training flow does not log it in every version), so a run's last report has it.
            control.should_log = True
        if self.on_step is not None:
            self.on_step(self, state)
        if self.cancel.is_set():
            control.should_save = control.should_save or self.save_on_cancel
            control.should_training_stop = True
        return control

    def on_log(self, args, state, control, logs=None, **kwargs):
        if logs and "loss" in logs:
            self.losses.append(float(logs["loss"]))

    def on_epoch_end(self, args, state, control, **kwargs):
        if self.on_epoch is not None and not self.cancel.is_set():
            self.on_epoch(self, state)
        return control

    def epoch_loss(self) -> float:
        """The mean of the losses logged since the last call (NaN when none was)."""
        new, self._epoch_start = self.losses[self._epoch_start:], len(self.losses)
        return float(np.mean(new)) if new else float("nan")


def quiet_trainer(*, model, args, train_dataset, loss, bridge: RunBridge) -> SentenceTransformerTrainer:
    """A :class:`~sentence_transformers.SentenceTransformerTrainer` reporting through ``bridge`` only."""
    fit = SentenceTransformerTrainer(model=model, args=args, train_dataset=train_dataset, loss=loss,
                                     callbacks=[bridge])
    # The printer callback writes log dicts to stdout, which carries only the JSON summary.
    fit.remove_callback(PrinterCallback)
    fit.remove_callback(ProgressCallback)
    return fit
