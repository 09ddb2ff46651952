"""Coverage: which of a level's names a vectors file has vectors for, said plainly, and the level cut to them.

A vectors file answers only its own names (:mod:`bioviz.models.vectors_encoder`). A level
compared or evaluated under one keeps the names every chosen vectors file covers
(:func:`load_level`, for a :class:`~bioviz.ontology.LevelSpec` whose ``covered_by`` names them)
and every page and command says how many: "11,902 of 12,456 names; 554 without a vector are
left out" (:meth:`Coverage.message`). Both models of a comparison see the same names.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from bioviz.errors import LevelError, ModelError
from bioviz.models.model_spec import ModelSpec, input_chain
from bioviz.models.vectors_file import open_vectors
from bioviz.ontology.level_spec import LevelSpec
from bioviz.ontology.levels import LevelView
from bioviz.ontology.model import Ontology


@dataclass(frozen=True)
class Coverage:
    """How many of a set of names a vectors file has vectors for.

    Attributes
    ----------
    label : str
        The vectors file's label.
    total : int
        Names asked about (a level's).
    covered : int
        Names with a vector (exactly or normalised).

    Examples
    --------
    >>> Coverage("sapbert", 12456, 11902).message()
    '11,902 of 12,456 names; 554 without a vector are left out'
    >>> Coverage("sapbert", 3, 3).message()
    'all 3 names have a vector'
    """

    label: str
    total: int
    covered: int

    @property
    def missing(self) -> int:
        """Names without a vector."""
        return self.total - self.covered

    def message(self, noun: str = "names") -> str:
        """The one line pages and commands print (``noun``: what was counted, ``names`` or ``terms``)."""
        if not self.missing:
            return f"all {self.total:,} {noun} have a vector"
        return f"{self.covered:,} of {self.total:,} {noun}; {self.missing:,} without a vector are left out"


def vectors_models(models: Iterable[ModelSpec | str | None]) -> tuple[ModelSpec, ...]:
    """The vectors files among ``models`` and behind them (a run trained on one: its input chain), each once.

    MODEL text is parsed (many library callers still pass it).
    """
    found = []
    for model in models:
        if model is None:
            continue
        model = ModelSpec.of(model)
        chain = [model, *input_chain(model)] if model.kind == "run" else [model]
        found += [step for step in chain if step.kind == "vectors"][:1]
    return tuple(dict.fromkeys(found))


def covered_mask(names, model: ModelSpec) -> np.ndarray:
    """Whether each name has a vector in the vectors file ``model``."""
    return open_vectors(model.path).rows(names) >= 0


def coverage(names, model: ModelSpec) -> Coverage:
    """How many of ``names`` the vectors file ``model`` covers."""
    names = list(names)
    return Coverage(model.label, len(names), int(covered_mask(names, model).sum()))


def covered_terms(terms, models: Iterable[ModelSpec | None]) -> tuple[np.ndarray, tuple[Coverage, ...]]:
    """Which of ``terms`` every vectors file among ``models`` covers (a mask), and each file's coverage."""
    terms = list(terms)
    keep = np.ones(len(terms), dtype=bool)
    found = []
    for model in vectors_models(models):
        mask = covered_mask(terms, model)
        found.append(Coverage(model.label, len(terms), int(mask.sum())))
        keep &= mask
    return keep, tuple(found)


def covered_view(view: LevelView, models: Iterable[ModelSpec | None]) -> tuple[LevelView, tuple[Coverage, ...]]:
    """``view`` cut to the names every vectors file among ``models`` covers, and each file's coverage.

    A view with no vectors file among the models comes back as it is (no coverage).

    Raises
    ------
    ModelError
        A vectors file that covers none of the level's names.
    """
    files = vectors_models(models)
    if not files:
        return view, ()
    keep = np.ones(len(view.names), dtype=bool)
    found = []
    for model in files:
        mask = covered_mask(view.names, model)
        found.append(Coverage(model.label, len(view.names), int(mask.sum())))
        keep &= mask
    if not keep.any():
        raise ModelError(f"none of the {len(view.names):,} names of {view.title} has a vector in "
                         f"{' and '.join(m.label for m in files)}: is it a vectors file of these names?")
    try:
        return (view if keep.all() else view.subset(keep)), tuple(found)
    except LevelError as error:  # pragma: no cover - keep.any() is checked above
        raise ModelError(str(error)) from None


def with_coverage(spec: LevelSpec, models: Iterable[ModelSpec | None]) -> LevelSpec:
    """``spec`` naming the vectors files among ``models`` as ``covered_by`` (none: ``spec`` without any)."""
    return spec.replace(covered_by=tuple(m.spec for m in vectors_models(models)))


def load_level(spec: LevelSpec, ontology: Ontology | None = None) -> LevelView:
    """The level ``spec`` names, cut to the names its ``covered_by`` vectors files cover.

    Raises
    ------
    BiovizError
        As :meth:`LevelSpec.load`, or a vectors file that cannot be read or covers nothing.
    """
    view = spec.load(ontology)
    if not spec.covered_by:
        return view
    return covered_view(view, [ModelSpec.parse(m) for m in spec.covered_by])[0]


def level_coverage(spec: LevelSpec, ontology: Ontology | None = None) -> tuple[Coverage, ...]:
    """Each ``covered_by`` vectors file's coverage of the whole (uncut) level ``spec`` names."""
    if not spec.covered_by:
        return ()
    return covered_view(spec.load(ontology), [ModelSpec.parse(m) for m in spec.covered_by])[1]
