"""How well each class stands apart in a Space: per-class numbers for baseline vs trained.

Two measures, both on the original vectors (not on a 2-D projection, which distorts):

- ``map``: *within-sample* mean average precision. Every name ranks all other names of the
  sample by cosine; its AP for finding names of its own class is averaged per class
  (:func:`bioviz.evaluation.metrics.average_precisions` with ``exclude_self``). It is not
  the *class-retrieval mAP* of the Train and Evaluation pages (held-out test names rank the
  training names, :func:`bioviz.evaluation.protocols.ranking_problem`): other queries, other
  references, so other numbers; hence its own name, with the sample size stated;
- ``silhouette``: mean cosine silhouette of the class's names (scikit-learn), from -1
  (closer to other classes) to 1 (tight and apart).

Large views are sampled per class (:func:`bioviz.views.projection.stratified_sample`), because
both measures compare every pair of names.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np
import pandas as pd

from bioviz.evaluation import metrics
from bioviz.errors import BiovizError
from bioviz.views.projection import stratified_sample
from bioviz.space import Space

logger = logging.getLogger(__name__)

MEASURES = {"map": "within-sample mAP", "silhouette": "silhouette (cosine)"}


def per_class_scores(vectors: np.ndarray, labels: np.ndarray, n_classes: int, measure: str = "map") -> np.ndarray:
    """Score of every class under ``measure``; NaN for classes without a scorable name.

    Parameters
    ----------
    vectors : numpy.ndarray
        L2-normalised rows.
    labels : numpy.ndarray
        Class index of each row.
    n_classes : int
        Length of the returned array.
    measure : str
        ``"map"`` or ``"silhouette"``.
    """
    labels = np.asarray(labels, dtype=np.int64)
    out = np.full(n_classes, np.nan)
    present = np.unique(labels)
    if measure == "map":
        ap = metrics.average_precisions(vectors, labels, vectors, labels, exclude_self=True)
        for label, value in metrics.per_class_map(ap, labels).items():
            out[int(label)] = value
        return out
    if measure == "silhouette":
        if len(present) < 2 or len(labels) <= len(present):
            return out  # silhouette needs two classes and one class with two names
        from sklearn.metrics import silhouette_samples  # imported here: scikit-learn takes seconds to import

        values = silhouette_samples(vectors, labels, metric="cosine")
        for label in present:
            out[label] = float(values[labels == label].mean())
        return out
    raise BiovizError(f"unknown separation measure {measure!r}: use one of {', '.join(MEASURES)}")


@dataclass(frozen=True)
class Separation:
    """Per-class separation of two Spaces over the same names.

    Attributes
    ----------
    table : pandas.DataFrame
        One row per class: ``class``, ``label``, ``names`` (in the sample), ``baseline``,
        ``trained``, ``gain`` (trained - baseline).
    measure : str
    sample_size : int
        Names scored (after the cap).
    model_a, model_b : str
    """

    table: pd.DataFrame
    measure: str
    sample_size: int
    model_a: str
    model_b: str

    @property
    def means(self) -> tuple[float, float]:
        """Means over classes for baseline and trained (NaN classes left out)."""
        return float(np.nanmean(self.table["baseline"])), float(np.nanmean(self.table["trained"]))


def compare_separation(
    space_a: Space,
    space_b: Space,
    labels: np.ndarray,
    *,
    classes: list[str],
    class_labels: list[str],
    measure: str = "map",
    max_names: int = 5_000,
    seed: int = 0,
) -> Separation:
    """Per-class ``measure`` for two Spaces over the same names.

    Parameters
    ----------
    space_a, space_b : Space
        Baseline and compared space (same names, same order).
    labels : numpy.ndarray
        Class index per name.
    classes, class_labels : list of str
        Class ids and their names (index = label).
    measure : str
        ``"map"`` or ``"silhouette"``.
    max_names : int
        Class-stratified cap on the names scored (both measures are quadratic).
    seed : int
        Seed of the sample.

    Raises
    ------
    BiovizError
        On different names, an unknown measure, or label count mismatch.
    """
    if measure not in MEASURES:
        raise BiovizError(f"unknown separation measure {measure!r}: use one of {', '.join(MEASURES)}")
    if space_a.names != space_b.names:
        raise BiovizError("the two spaces hold different names: embed the same level view with both models")
    labels = np.asarray(labels, dtype=np.int64)
    if len(labels) != len(space_a):
        raise BiovizError(f"{len(labels)} labels for {len(space_a)} names")
    rows = stratified_sample(labels, max_names, seed)
    sample_labels = labels[rows]
    scores_a = per_class_scores(space_a.vectors[rows], sample_labels, len(classes), measure)
    scores_b = per_class_scores(space_b.vectors[rows], sample_labels, len(classes), measure)
    table = pd.DataFrame({
        "class": classes,
        "label": class_labels,
        "names": np.bincount(sample_labels, minlength=len(classes)),
        "baseline": scores_a,
        "trained": scores_b,
    })
    table["gain"] = table["trained"] - table["baseline"]
    return Separation(table, measure, len(rows), space_a.model_id, space_b.model_id)


def separation_so_far(partial_a, partial_b, labels: np.ndarray, *, classes: list[str], class_labels: list[str],
                      model_ids: tuple[str, str], measure: str = "map", max_names: int = 5_000,
                      seed: int = 0) -> Separation | None:
    """:func:`compare_separation` over the names both models have encoded so far, while a level encodes.

    The rows a claimant stores first are a shuffled sample of the level
    (:meth:`bioviz.models.encoding_session.EncodingSession.partial`), and the separation is scored on
    a class-stratified sample of at most ``max_names`` anyway: once that many names are encoded
    under both models, this is nearly the figure the complete level gives. Classes with no
    scorable name yet are NaN (a tree node then averages the classes it has).

    Parameters
    ----------
    partial_a, partial_b : PartialVectors
        The level's vectors stored so far under the baseline and the compared model (rows of the
        same list of names).
    labels : numpy.ndarray
        Class index of every name of the level.
    classes, class_labels, measure, max_names, seed
        As for :func:`compare_separation`.
    model_ids : (str, str)
        The two models' labels, for titles.

    Returns
    -------
    Separation or None
        None while fewer than two names have vectors under both models.
    """
    common, in_a, in_b = np.intersect1d(np.asarray(partial_a.rows), np.asarray(partial_b.rows), return_indices=True)
    if len(common) < 2:
        return None
    names = tuple(map(str, common))  # the same rows under both: compare_separation checks the names agree
    space_a = Space(names, np.asarray(partial_a.vectors)[in_a], model_ids[0])
    space_b = Space(names, np.asarray(partial_b.vectors)[in_b], model_ids[1])
    return compare_separation(space_a, space_b, np.asarray(labels)[common], classes=classes,
                              class_labels=class_labels, measure=measure, max_names=max_names, seed=seed)
