"""When a coded term's first concept needs a coder's review: its score is low, or the next concept is close.

A model's first concept for a term is flagged *low confidence* when its score is below
``min_score`` or its margin (the score minus the second concept's) is below ``min_margin``.
Scores are on each model's own scale (char-tfidf's cosines run higher than a transformer's, a
hybrid score adds a weighted char-tfidf cosine), so the thresholds are per model and ranking.
They were chosen on the GSC+ dev file (``../shared/benchmarks/gsc_plus_dev.tsv``, never shipped) by
``benchmarks/coding_confidence.py``, which writes them with their dev figures (share flagged,
accuracy of the flagged and of the unflagged terms) to ``benchmarks/results/coding_confidence.json``;
a test checks that :data:`THRESHOLDS` holds what that file chose. A model without its own
thresholds (a trained run, a hub id) gets the default model's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from bioviz.models.model_spec import DEFAULT_MODEL
from bioviz.search.hybrid import Ranking


@dataclass(frozen=True)
class Confidence:
    """The thresholds below which a model's first concept is flagged for review.

    Attributes
    ----------
    min_score : float
        The first concept's score under the ranking.
    min_margin : float
        The first concept's score minus the second's.
    """

    min_score: float
    min_margin: float

    def low(self, score: float, margin: float) -> bool:
        """Whether a first concept with this ``score`` and ``margin`` is flagged (a missing margin is not low).

        >>> Confidence(0.7, 0.05).low(0.66, 0.2), Confidence(0.7, 0.05).low(0.9, 0.01), Confidence(0.7, 0.05).low(0.9, 0.2)
        (True, True, False)
        """
        return bool(score < self.min_score or (not math.isnan(margin) and margin < self.min_margin))


# (model, ranking label) -> thresholds; written from benchmarks/results/coding_confidence.json.
# Dev figures (119 mentions; flagged share, accuracy of the unflagged): med-minilm hybrid w=1 40%, 0.90
# (0.68 unflagged and flagged together); dense 31%, 0.88 (0.64 overall).
THRESHOLDS: dict[tuple[str, str], Confidence] = {
    ("med-minilm", "dense"): Confidence(0.794, 0.02),
    ("med-minilm", "hybrid w=1"): Confidence(1.596, 0.05),
    ("minilm", "dense"): Confidence(0.888, 0.0),
    ("minilm", "hybrid w=1"): Confidence(1.593, 0.0),
    ("char-tfidf", "dense"): Confidence(0.96, 0.0),
    ("char-tfidf", "hybrid w=1"): Confidence(1.46, 0.04),
}


def confidence_for(model: str, ranking: Ranking) -> Confidence:
    """The thresholds of ``model`` (a preset name or a model's label) under ``ranking``.

    A model or ranking without its own thresholds gets the default model's under that ranking,
    else under the closest ranking chosen (dense for dense, the default hybrid for a hybrid).
    """
    label = ranking.label
    for key in ((model, label), (DEFAULT_MODEL, label)):
        if key in THRESHOLDS:
            return THRESHOLDS[key]
    same_kind = [c for (m, r), c in THRESHOLDS.items() if m == model and r.split()[0] == ranking.kind]
    fallback = [c for (m, r), c in THRESHOLDS.items() if m == DEFAULT_MODEL and r.split()[0] == ranking.kind]
    return (same_kind or fallback or [Confidence(-math.inf, -math.inf)])[0]


# The default model and ranking, re-chosen for issue 40 on the pooled development sets: the everyday queries
# (WHO ICD-10 with unlisted phrasings and with held-out categories, HPO with unlisted phrasings) and both coding
# dev files, 1,552 terms coded as `bioviz code` codes them (benchmarks/review_flags.py, results/review_flags.json,
# highest Youden J). The GSC+-only choice (0.794, 0.02) caught 76% of the wrong first concepts, this one 89%.
THRESHOLDS[("med-minilm", "dense")] = Confidence(0.87, 0.02)

# Whether a first concept placed by the clinical vocabulary's rule (bioviz.search.query_reading) is
# flagged for review: True always, False never, None by the model's score thresholds as a dense answer.
# Chosen with the thresholds (benchmarks/review_flags.py): a rule right at least 80% of the time on the pooled
# sets is never flagged (vocabulary 0.84, rewritten 0.91), similar term (0.54) is judged by the thresholds as a
# dense answer, an abbreviation (too few held-out answers to judge: 6) as the vocabulary's dictionary hits, and
# an ambiguous abbreviation is always flagged (a coder picks a sense).
RULE_REVIEW: dict[str, bool | None] = {
    "ambiguous abbreviation": True,
    "abbreviation": False,
    "vocabulary": False,
    "rewritten": False,
    "similar term": None,
}


@dataclass(frozen=True)
class ReviewFigures:
    """How well the Review flag of the default model and ranking predicts a wrong first concept, on dev data.

    Attributes
    ----------
    precision, recall : float
        Wrong among the flagged; flagged among the wrong.
    precision_ci, recall_ci : tuple of float
        95% bootstrap intervals.
    terms : int
        Development terms they were measured on.
    """

    precision: float
    precision_ci: tuple[float, float]
    recall: float
    recall_ci: tuple[float, float]
    terms: int

    @property
    def sentence(self) -> str:
        """What a page says of the flag."""
        return (f"On {self.terms:,} development terms, {self.precision:.0%} of flagged first concepts were wrong "
                f"[{self.precision_ci[0]:.0%}–{self.precision_ci[1]:.0%}] and {self.recall:.0%} of the wrong ones "
                f"were flagged [{self.recall_ci[0]:.0%}–{self.recall_ci[1]:.0%}]")


# From benchmarks/results/review_flags.json ("chosen", "pooled"); a test checks they agree.
REVIEW_FIGURES = ReviewFigures(0.584, (0.548, 0.62), 0.894, (0.865, 0.92), 1552)


def needs_review(match: str, confidence: Confidence, score: float, margin: float) -> bool:
    """Whether a term's first concept is flagged: by its rule (:data:`RULE_REVIEW`), else by the thresholds.

    >>> rule = Confidence(0.8, 0.05)
    >>> needs_review("nearest", rule, 0.7, 0.2), needs_review("vocabulary", rule, 0.7, 0.2), needs_review("ambiguous abbreviation", rule, 0.9, 0.2)
    (True, False, True)
    """
    fixed = RULE_REVIEW.get(match)
    return fixed if fixed is not None else confidence.low(score, margin)
