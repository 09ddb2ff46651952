"""Few-shot splits of a level view, deterministic from a seed.

The order of drawing follows the papers:

1. zero-shot classes are held out entirely (conceptual-grounding §5.1);
2. from each remaining class with at least two names, ``test_per_class`` held-out test
   names (one per class per iteration, higher-level-semantics §4.2);
3. ``shots`` training names and ``shots`` validation names per class
   (fewshot-biomedical-names §3.2). ``shots=None`` trains on every remaining name and
   keeps ``test_per_class`` names per class for validation.

Classes too small for the request get what they have (test first, then train, then
validation) and are reported in :attr:`Split.short_classes`, never silently dropped.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from bioviz.errors import SplitError
from bioviz.ontology.levels import LevelView

# The one default split: 15 training (and 15 validation) names per class, seed 0
# (fewshot-biomedical-names §3.2). Everything that says "the default split" uses these.
DEFAULT_SHOTS = 15
DEFAULT_SPLIT_SEED = 0
# The parts of a split: the Split attribute (and key of a run's split.json and of
# Split.sizes) -> the label Split.part_of gives its rows. Rows in no part are UNUSED.
SPLIT_PARTS = {"train": "train", "validation": "validation", "test": "test", "zero_shot": "zero-shot"}
UNUSED = "unused"


@dataclass(frozen=True)
class Split:
    """Row indices into a :class:`LevelView`'s ``names``.

    Attributes
    ----------
    seed, shots, test_per_class : int
        The settings that drew the split.
    train, validation, test, zero_shot : numpy.ndarray
        Disjoint ``int64`` row indices, sorted.
    zero_shot_classes : tuple of int
        Class indices held out entirely.
    short_classes : dict
        ``class id -> number of names`` for classes with fewer names than requested.
    """

    seed: int
    shots: int | None
    test_per_class: int
    train: np.ndarray
    validation: np.ndarray
    test: np.ndarray
    zero_shot: np.ndarray
    zero_shot_classes: tuple[int, ...] = ()
    short_classes: dict = field(default_factory=dict)

    def sizes(self) -> dict:
        """Number of names in each part, and how many classes were short."""
        return {
            **{part: int(len(getattr(self, part))) for part in SPLIT_PARTS},
            "zero_shot_classes": len(self.zero_shot_classes),
            "short_classes": len(self.short_classes),
        }

    def part_of(self, n_names: int) -> np.ndarray:
        """Array of part labels (``train``/``validation``/``test``/``zero-shot``/``unused``) per row."""
        parts = np.full(n_names, UNUSED, dtype=object)
        for part, label in SPLIT_PARTS.items():
            parts[getattr(self, part)] = label
        return parts


def make_split(
    view: LevelView,
    *,
    shots: int | None = DEFAULT_SHOTS,
    seed: int = DEFAULT_SPLIT_SEED,
    test_per_class: int = 1,
    zero_shot_classes: int | float = 0,
) -> Split:
    """Draw a few-shot split of ``view``.

    Parameters
    ----------
    view : LevelView
    shots : int or None
        Training names per class, and as many validation names. None: all remaining names
        train, ``test_per_class`` per class validate.
    seed : int
        Seed of the random draw; the same seed gives the same split.
    test_per_class : int
        Held-out test names per class (iterations of the papers' one-per-class sampling).
    zero_shot_classes : int or float
        Classes held out entirely: a count, or a fraction of the classes when below 1.

    Raises
    ------
    SplitError
        If the settings are impossible (negative counts, every class held out).
    """
    if shots is not None and shots < 1:
        raise SplitError(f"shots must be at least 1 (got {shots})")
    if test_per_class < 0:
        raise SplitError(f"test_per_class must be >= 0 (got {test_per_class})")
    n_classes = len(view.classes)
    n_zero = (
        int(round(zero_shot_classes * n_classes))
        if isinstance(zero_shot_classes, float) and zero_shot_classes < 1
        else int(zero_shot_classes)
    )
    if n_zero < 0 or n_zero >= n_classes:
        raise SplitError(
            f"cannot hold out {n_zero} zero-shot classes of {n_classes}: keep at least one to train on"
        )
    rng = np.random.default_rng(seed)
    zero = sorted(int(c) for c in rng.choice(n_classes, size=n_zero, replace=False)) if n_zero else []
    zero_set = set(zero)
    rows_by_class = [np.flatnonzero(view.labels == c) for c in range(n_classes)]
    train, validation, test, zero_rows = [], [], [], []
    short: dict[str, int] = {}
    for c, rows in enumerate(rows_by_class):
        if c in zero_set:
            zero_rows.extend(rows.tolist())
            continue
        rows = rows[rng.permutation(len(rows))]
        # Keep at least one training name: a class with a single name cannot give a test name.
        n_test = min(test_per_class, max(len(rows) - 1, 0))
        test.extend(rows[:n_test].tolist())
        rest = rows[n_test:]
        if shots is None:
            n_val = min(test_per_class, max(len(rest) - 1, 0))
            validation.extend(rest[:n_val].tolist())
            train.extend(rest[n_val:].tolist())
            if n_test < test_per_class:
                short[view.classes[c]] = int(len(rows))
            continue
        train.extend(rest[:shots].tolist())
        validation.extend(rest[shots : 2 * shots].tolist())
        if len(rows) < test_per_class + 2 * shots:
            short[view.classes[c]] = int(len(rows))

    def as_rows(values: list[int]) -> np.ndarray:
        return np.asarray(sorted(values), dtype=np.int64)

    return Split(
        seed=seed,
        shots=shots,
        test_per_class=test_per_class,
        train=as_rows(train),
        validation=as_rows(validation),
        test=as_rows(test),
        zero_shot=as_rows(zero_rows),
        zero_shot_classes=tuple(zero),
        short_classes=short,
    )


@dataclass(frozen=True)
class SplitSpec:
    """The settings that draw a split (:func:`make_split`); ``SplitSpec()`` is the default split.

    Examples
    --------
    >>> SplitSpec()
    SplitSpec(shots=15, seed=0, test_per_class=1, zero_shot_classes=0)
    """

    shots: int | None = DEFAULT_SHOTS
    seed: int = DEFAULT_SPLIT_SEED
    test_per_class: int = 1
    zero_shot_classes: float = 0

    def make(self, view: LevelView) -> Split:
        """Draw the split of ``view``."""
        return make_split(view, shots=self.shots, seed=self.seed, test_per_class=self.test_per_class,
                          zero_shot_classes=self.zero_shot_classes)


DEFAULT_SPLIT = SplitSpec()
