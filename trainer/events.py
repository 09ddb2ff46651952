"""What training reports and hands back: progress events, the cancel flag, the result.

Every part of training (the head loop, the fine-tuning loops, the run writer) reports
through an :data:`Emit` it is given, ``emit(event_dict)``; :func:`broadcast` turns the
callbacks of a caller (the command line's progress writer, a test's list) into one. Events
are dicts with an ``event`` key: ``embedding``, ``start``, ``epoch``, ``base_weight``,
``done`` and ``error`` (see docs/jobs.md for their fields).

This module depends on nothing else in the trainer, so the loop and the fine-tuning
modules can all import it without importing each other.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import numpy as np

# A progress callback: receives every event dict.
Callback = Callable[[dict], None]
# What training code calls to report an event (usually the callbacks' :func:`broadcast`).
Emit = Callable[[dict], None]


def broadcast(callbacks: Iterable[Callback]) -> Emit:
    """One :data:`Emit` that hands each event to every callback, in order.

    Examples
    --------
    >>> seen = []
    >>> emit = broadcast([seen.append])
    >>> emit({"event": "start"})
    >>> seen
    [{'event': 'start'}]
    """
    callbacks = list(callbacks)

    def emit(event: dict) -> None:
        for callback in callbacks:
            callback(event)

    return emit


def epoch_estimate(epoch: int, max_epochs: int, elapsed_s: float, *, best_epoch: int | None = None,
                   patience: int | None = None) -> dict:
    """What an epoch event says about the time left, honestly for a loop that stops early.

    Early stopping ends training ``patience`` epochs after the best one, so unless the
    validation figure improves again the loop stops by ``stop_by``; it never runs past
    ``max_epochs``. Both ends of the range are given: ``eta_s`` is the most it can take (all
    epochs), ``eta_stop_s`` the time to ``stop_by`` (the time left if nothing improves).

    Parameters
    ----------
    epoch : int
        Epochs done.
    max_epochs : int
    elapsed_s : float
        Seconds spent on the ``epoch`` epochs done (their mean paces the rest).
    best_epoch : int, optional
        The best epoch so far (0 or None: none yet).
    patience : int, optional
        Epochs without improvement before stopping; None: the loop does not stop early.

    Returns
    -------
    dict
        ``eta_s``, and with a patience ``stop_by``, ``eta_stop_s`` and ``best_epoch``.

    Examples
    --------
    >>> epoch_estimate(12, 100, 24.0, best_epoch=10, patience=10)
    {'eta_s': 176.0, 'best_epoch': 10, 'stop_by': 20, 'eta_stop_s': 16.0}
    >>> epoch_estimate(2, 5, 4.0)
    {'eta_s': 6.0}
    """
    per_epoch = elapsed_s / max(epoch, 1)
    out = {"eta_s": per_epoch * (max_epochs - epoch)}
    if patience is not None:
        # With no best epoch yet (no usable validation figure), the loop keeps the epoch at
        # ``patience`` as its best: the earliest stop is then 2 x patience.
        stop_by = min(max_epochs, max((best_epoch or patience) + patience, epoch))
        out.update(best_epoch=best_epoch or 0, stop_by=stop_by, eta_stop_s=per_epoch * (stop_by - epoch))
    return out


class Cancelled(Exception):
    """Training stopped because the cancel flag was set."""


class CancelFlag:
    """A flag another thread or a signal handler sets to stop training between batches."""

    def __init__(self) -> None:
        self._event = threading.Event()

    def set(self) -> None:
        """Ask the loop to stop at the next batch boundary."""
        self._event.set()

    def is_set(self) -> bool:
        """Whether cancellation was requested."""
        return self._event.is_set()

    def check(self) -> None:
        """Raise :class:`Cancelled` if the flag is set."""
        if self._event.is_set():
            raise Cancelled("training cancelled")


@dataclass(kw_only=True)  # ten fields: built by name only
class TrainResult:
    """What a finished training hands to the exporter.

    Attributes
    ----------
    head : torch.nn.Module or None
        The trained head (CPU, eval mode); None for fine-tuned models.
    model : object or None
        The fine-tuned SentenceTransformer (``definitions``, ``hierarchical`` with ``finetune``).
    projection : trainer.encoders.LinearMap or None
        The CCA projection alone (``cca``).
    vectors : numpy.ndarray
        Trained vectors of the view's names (L2-normalised); fine-tuned models encode only
        the split's names (other rows are zero).
    history : list of dict
        One record per epoch (losses, validation figures, seconds).
    best_epoch : int
    stopped_early : bool
    training_s : float
    per_epoch_s : list of float
    device : str
    metrics : dict
        ``baseline``/``trained`` (and ``cca_projection``) -> ``validation``/``test`` figures.
    """

    head: object | None
    model: object | None
    projection: object | None
    vectors: np.ndarray
    history: list[dict]
    best_epoch: int
    stopped_early: bool
    training_s: float
    per_epoch_s: list[float]
    device: str
    metrics: dict = field(default_factory=dict)


def cancel_on_signals() -> tuple[CancelFlag, Callable[[], None]]:
    """A :class:`CancelFlag` that SIGTERM and SIGINT set, and the function that puts the old handlers back.

    After a cancel, ``restore()`` ignores both signals until the process exits: the job runner
    forwards its own SIGTERM, which may land after the first one was handled, and the default
    action would turn a clean exit 130 into death by SIGTERM. Ignored, not a Python handler:
    the interpreter puts Python handlers back to the default while it shuts down, which is
    when a late duplicate lands.

    Returns
    -------
    (CancelFlag, callable)
        Call the second in a ``finally``.
    """
    cancel = CancelFlag()
    previous = {sig: signal.signal(sig, lambda *_: cancel.set()) for sig in (signal.SIGTERM, signal.SIGINT)}

    def restore() -> None:
        for sig, handler in previous.items():
            signal.signal(sig, signal.SIG_IGN if cancel.is_set() else handler)

    return cancel, restore
