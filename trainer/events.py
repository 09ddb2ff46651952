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


@dataclass
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
