"""Which encoder ships as the default: the figures a candidate is judged on and the promotion rule.

The rule (docs/models.md, *Choosing the shipped model*) is written here once and enforced by
``python benchmarks/select_model.py``; it reads development data only, never MayoSRS/UMNSRS
(those are reported, never compared):

1. **Never below the general base on clinical relatedness**: Spearman on ``ehr_relb_dev``
   at or above all-MiniLM-L6-v2's (point estimates: a candidate that loses there loses for
   every clinician who browses neighbours, whatever its interval says).
2. **Better at coding than the model it replaces**: acc@1 strictly above the shipped model's
   on each coding development file (``hpo_coding_dev``, ``gsc_plus_dev``) under the dense
   ranking (the product's default) and under the hybrid ranking (char-tfidf weight 1, one option
   away on every page and command): four comparisons, all must hold. The rankings are named, not
   "the default", so that rows measured before and after a change of default compare alike.

Among the candidates that pass, the one with the highest acc@1 on ``hpo_coding_dev`` (the larger
coding file) under the default ranking is promoted; where two are within each other's 95 % intervals, the simpler one (fewer
training steps, then no interpolation) is preferred, which :func:`choose` takes as the order
the candidates are listed in.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

RELATEDNESS = "ehr_relb_dev"
CODING_FILES = ("hpo_coding_dev", "gsc_plus_dev")
RANKINGS = ("dense", "hybrid")
# The figure that ranks the candidates that pass: the larger coding file under the default ranking.
PROMOTION_KEY = "hpo_coding_dev acc@1 dense"


def coding_key(gold: str, ranking: str) -> str:
    """The figure name of acc@1 on one coding file under one ranking (``hpo_coding_dev acc@1 dense``)."""
    return f"{gold} acc@1 {ranking}"


@dataclass(frozen=True)
class Figure:
    """One measured figure with its 95 % bootstrap interval.

    Attributes
    ----------
    value : float
    low, high : float
        The interval's bounds (NaN when not bootstrapped).
    n : int
        Items it was measured on (pairs, mentions or queries).
    """

    value: float
    low: float
    high: float
    n: int

    def text(self) -> str:
        """``0.524 [0.49, 0.56]``."""
        return f"{self.value:.3f} [{self.low:.2f}, {self.high:.2f}]"


@dataclass(frozen=True)
class Verdict:
    """Whether a candidate may replace the shipped default, and each comparison that decided it.

    Attributes
    ----------
    promotable : bool
    checks : tuple of (str, bool)
        One line per comparison of the rule (``"ehr_relb_dev 0.530 >= minilm 0.524"``) and whether it held.
    """

    promotable: bool
    checks: tuple[tuple[str, bool], ...]


def judge(candidate: Mapping[str, Figure], *, base: Mapping[str, Figure], shipped: Mapping[str, Figure]) -> Verdict:
    """Apply the promotion rule to a candidate's development figures.

    Parameters
    ----------
    candidate, base, shipped : mapping of str to Figure
        Figures by name (:data:`RELATEDNESS`, :func:`coding_key`) of the candidate, of the
        general base (all-MiniLM-L6-v2) and of the model shipped today.

    Returns
    -------
    Verdict

    Raises
    ------
    KeyError
        A figure the rule needs is missing from one of the three.
    """
    checks = []
    c, b = candidate[RELATEDNESS].value, base[RELATEDNESS].value
    checks.append((f"{RELATEDNESS} {c:.3f} >= base {b:.3f}", c >= b))
    for gold in CODING_FILES:
        for ranking in RANKINGS:
            key = coding_key(gold, ranking)
            c, s = candidate[key].value, shipped[key].value
            checks.append((f"{key} {c:.3f} > shipped {s:.3f}", c > s))
    return Verdict(all(ok for _, ok in checks), tuple(checks))


def choose(candidates: Sequence[tuple[str, Mapping[str, Figure], Verdict]], *, key: str) -> str | None:
    """The promoted candidate's name: the best ``key`` among those that pass, the earliest listed among near ties.

    A candidate later in the list replaces an earlier one only when its ``key`` value lies above
    the earlier one's interval: within it, the simpler (earlier) one is kept.

    Parameters
    ----------
    candidates : sequence of (name, figures, verdict)
        In order of simplicity, simplest first.
    key : str
        The figure that ranks the promotable candidates.

    Returns
    -------
    str or None
        None when no candidate passes the rule.
    """
    best: tuple[str, Figure] | None = None
    for name, figures, verdict in candidates:
        if not verdict.promotable:
            continue
        figure = figures[key]
        if best is None or figure.value > best[1].high:
            best = (name, figure)
    return None if best is None else best[0]
