"""Mention normalisation as an evaluation task: a gold file of (mention, concept id) -> accuracy at 1 and 5, MRR.

Each mention ranks every concept of the level (a concept's score is its best name's, under a
model and a :class:`~bioviz.search.hybrid.Ranking`, exactly as term coding ranks them:
:mod:`bioviz.search.term_coding`); the gold concept's rank gives Acc@1, Acc@5 and the
reciprocal rank, each with a percentile bootstrap interval over mentions. The same figures
on the *paraphrased* mentions: those that are not, lower-cased, a name or synonym of any
concept of the level (an exact-match lookup would code the others).

The example gold file (assets/gold/lay_phenotypes_example.tsv) is 30 lay phrasings written for
bioviz, each with the HPO concept it means: an illustration of the format and of what dense
coding does with words no ontology lists, not a benchmark. It is scored on HPO synonym sets
under HP:0000118 (:data:`EXAMPLE_LEVEL`). Development gold files (GSC+, HPO coding) are never
shipped: point ``--gold`` at them where they are.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from bioviz.errors import BiovizError, EvaluationError
from bioviz.evaluation.metrics import bootstrap_mean_ci
from bioviz.ontology import LevelSpec
from bioviz.ontology.model import Ontology
from bioviz.search.hybrid import EXACT_BOOST, ExpandedForms, NameMatcher, Ranking, SparseNames, name_scores
from bioviz.search.index import NeighbourIndex
from bioviz.search.rerank import OntologyReranker, Reranker
from bioviz.search.term_coding import exact_concepts, read_term_table, resolve_terms
from bioviz.uploads import read_user_file

TASK = "normalisation"
EXAMPLE_GOLD = Path(__file__).resolve().parents[2] / "assets" / "gold" / "lay_phenotypes_example.tsv"
EXAMPLE_LEVEL = LevelSpec("hpo", root="HP:0000118", synonyms=True)
MAX_GOLD_BYTES = 5 * 2**20  # a gold file is a few thousand mentions: far below this
MAX_GOLD_ROWS = 20_000
MENTION = "mention"
SHOWN_IDS = 5  # unknown ids quoted in an error
_TERMS_PER_CHUNK = 256  # (terms x names) float32 scores per matrix product: ~40 MB on a 40k-name level


@dataclass(frozen=True)
class GoldFile:
    """A gold file's mentions and concept ids, row by row.

    Attributes
    ----------
    label : str
        The file's name, for titles.
    mentions, concept_ids : tuple of str
        Aligned; a mention may appear with several ids (each row is scored).
    id_column : str
    """

    label: str
    mentions: tuple[str, ...]
    concept_ids: tuple[str, ...]
    id_column: str

    def __len__(self) -> int:
        return len(self.mentions)


def _id_column(columns: list[str]) -> str | None:
    """The concept id column: one named like an id (``hpo_id``, ``cui``, ``code``), else the only other column."""
    others = [c for c in columns if c.strip().lower() != MENTION]
    named = [c for c in others if any(word in c.lower() for word in ("id", "cui", "code"))]
    if named:
        return named[0]
    return others[0] if len(others) == 1 else None


def read_gold(data: bytes, filename: str = "gold.tsv", *, max_bytes: int = MAX_GOLD_BYTES) -> GoldFile:
    """Parse a gold file: a CSV/TSV with a header holding ``mention`` and a concept id column.

    Raises
    ------
    BiovizError
        Too large, not UTF-8, empty, without a ``mention`` or id column, without rows, a row
        with an empty mention or id, or too many rows; one line each.
    """
    name = Path(filename).name
    if len(data) > max_bytes:
        raise BiovizError(f"{name} has {len(data) / 2**20:.1f} MiB: a gold file is at most {max_bytes / 2**20:.0f} MiB")
    try:
        frame = read_term_table(data, name, max_bytes=max_bytes)
    except BiovizError as error:
        raise BiovizError(f"{name}: {error}") from None
    columns = list(frame.columns)
    mention = next((c for c in columns if c.strip().lower() == MENTION), None)
    id_column = _id_column(columns)
    if mention is None or id_column is None:
        shown = ", ".join(repr(c) for c in columns[:6])
        raise BiovizError(f"{name} needs a header with 'mention' and a concept id column such as 'hpo_id' "
                          f"(its columns: {shown})")
    if not len(frame):
        raise BiovizError(f"{name} has a header but no rows of mention and concept id")
    if len(frame) > MAX_GOLD_ROWS:
        raise BiovizError(f"{name} has {len(frame):,} rows: at most {MAX_GOLD_ROWS:,} are scored at once")
    mentions = [m.strip() for m in frame[mention]]
    ids = [i.strip() for i in frame[id_column]]
    blank = next((row for row, (m, i) in enumerate(zip(mentions, ids)) if not m or not i), None)
    if blank is not None:
        raise BiovizError(f"{name} line {blank + 2}: a row needs both a mention and a concept id")
    return GoldFile(name, tuple(mentions), tuple(ids), id_column)


def load_gold(path: str | Path) -> GoldFile:
    """Read a gold file from disk (bounded before it is read).

    Raises
    ------
    BiovizError
        No such file, or any :func:`read_gold` refusal.
    """
    return read_gold(read_user_file(path, MAX_GOLD_BYTES, "gold file"), Path(path).name)


def check_gold_ids(gold: GoldFile, view) -> None:
    """Refuse a gold file with ids that are not concepts of the level (how many, and a few of them).

    Raises
    ------
    EvaluationError
    """
    known = set(view.name_concepts)
    unknown = list(dict.fromkeys(i for i in gold.concept_ids if i not in known))
    if unknown:
        shown = ", ".join(unknown[:SHOWN_IDS]) + (", ..." if len(unknown) > SHOWN_IDS else "")
        raise EvaluationError(f"{len(unknown)} of {len(set(gold.concept_ids))} concept ids of {gold.label} are not "
                              f"concepts of {view.title} ({shown}): choose the level the file was coded on")


def paraphrased(gold: GoldFile, view, ontology: Ontology | None = None) -> np.ndarray:
    """Boolean mask: mentions that are not, lower-cased, a name or synonym of any concept of the level."""
    names = {name.lower() for name in view.names}
    if ontology is not None:
        for concept in set(view.name_concepts):
            if concept in ontology.concepts:
                names.update(name.lower() for name in ontology.concepts[concept].names)
    return np.array([mention.lower() not in names for mention in gold.mentions], dtype=bool)


def gold_ranks(gold: GoldFile, view, index: NeighbourIndex, vectors: np.ndarray, *, ranking: Ranking,
               ontology: Ontology | None = None, sparse: SparseNames | None = None,
               forms: ExpandedForms | None = None, reranker: Reranker = Reranker()) -> np.ndarray:
    """The 1-based rank of each gold concept among every concept of the level, as term coding ranks them.

    Parameters
    ----------
    gold : GoldFile
    view : LevelView
    index : NeighbourIndex
        Over the level's names under the model (``candidate_index(view, model)``).
    vectors : numpy.ndarray
        The model's unit vectors of the resolved mentions (:func:`resolve_terms` ``.text``).
    ranking : Ranking
    ontology : Ontology, optional
        To resolve exact names (as term coding does).
    sparse : SparseNames, optional
        The index's names under the level's char-tfidf (a hybrid ranking needs them).
    forms : ExpandedForms, optional
        The mentions' synonym expansions under the model (:mod:`bioviz.search.lexicon`), as term coding scores them.
    reranker : Reranker
        Granularity re-ranking of each mention's top candidates, as term coding applies it (needs ``ontology``).
    """
    infos = resolve_terms(gold.mentions, view, ontology)
    texts = [info.text for info in infos]
    concept_of = np.asarray(index.concept_ids)
    concepts, codes = np.unique(concept_of, return_inverse=True)
    order = np.argsort(codes, kind="stable")  # names grouped by concept: one reduceat per chunk
    starts = np.flatnonzero(np.r_[True, np.diff(codes[order]) != 0])
    column = {concept: i for i, concept in enumerate(concepts)}
    matcher = NameMatcher(index.space.names, index.concept_ids) if ranking.hybrid else None
    ranks = np.zeros(len(gold), dtype=np.int64)
    regrain = OntologyReranker(reranker, ontology)
    for lo in range(0, len(gold), _TERMS_PER_CHUNK):
        hi = min(lo + _TERMS_PER_CHUNK, len(gold))
        scores = name_scores(vectors[lo:hi], index.vectors, ranking, sparse=sparse, texts=texts[lo:hi],
                             forms=forms.between(lo, hi) if forms is not None else None)
        best = np.maximum.reduceat(scores[:, order], starts, axis=1)  # a concept's score is its best name's
        for i, t in enumerate(range(lo, hi)):
            exact = list(exact_concepts(infos[t]))
            if matcher is not None:
                exact += matcher.concepts(gold.mentions[t], texts[t])
            exact = [c for c in dict.fromkeys(exact) if c in column]
            for position, concept in enumerate(exact):  # exact concepts first, in their order (as coding lists them)
                best[i, column[concept]] += EXACT_BOOST * (len(exact) - position)
            gold_score = best[i, column[gold.concept_ids[t]]]
            ranks[t] = 1 + int(np.count_nonzero(best[i] > gold_score))
            if regrain.active and ranks[t] <= reranker.k:  # beyond the window the re-ranker moves nothing past it
                window = _top_k(best[i], reranker.k)
                moved = [c for c, _ in regrain([(concepts[j], float(best[i, j])) for j in window], exact, texts[t])]
                if gold.concept_ids[t] in moved:  # absent only on a tie at the window's edge: rank unchanged
                    ranks[t] = 1 + moved.index(gold.concept_ids[t])
    return ranks


def _top_k(scores: np.ndarray, k: int) -> np.ndarray:
    """Indices of the ``k`` best scores, best first (ties by index), without sorting every concept.

    The re-ranker's window is about 20 of tens of thousands of concepts per mention: a partition
    then a sort of the window costs O(n + k log k) where a full argsort costs O(n log n).
    """
    if k >= scores.size:
        return np.argsort(-scores, kind="stable")
    part = np.argpartition(-scores, k - 1)[:k]
    return part[np.lexsort((part, -scores[part]))]


def rank_metrics(ranks: np.ndarray, *, n_boot: int = 1000, seed: int = 0) -> tuple[dict, dict]:
    """Acc@1, Acc@5 and MRR of gold ranks, and their 95% bootstrap intervals (over mentions)."""
    ranks = np.asarray(ranks, dtype=float)
    per_mention = {"acc1": (ranks == 1).astype(float), "acc5": (ranks <= 5).astype(float), "mrr": 1.0 / ranks}
    metrics = {key: float(values.mean()) if len(values) else float("nan") for key, values in per_mention.items()}
    return metrics, {key: bootstrap_mean_ci(values, n_boot, seed) for key, values in per_mention.items()}


def normalisation_figures(ranks: np.ndarray, paraphrased_mask: np.ndarray, *, n_boot: int = 1000,
                          seed: int = 0) -> tuple[dict, dict, dict]:
    """``(metrics, ci, sizes)`` of gold ranks: Acc@1, Acc@5 and MRR on all mentions and on the paraphrased ones.

    The paraphrased figures are ``paraphrased.acc1`` etc.; the sizes ``queries`` and
    ``paraphrased.queries``. The task that scores a gold file per model and ranking is
    :class:`bioviz.evaluation.tasks.NormalisationTask`.
    """
    metrics, ci = rank_metrics(ranks, n_boot=n_boot, seed=seed)
    para_metrics, para_ci = rank_metrics(ranks[paraphrased_mask], n_boot=n_boot, seed=seed)
    metrics.update({f"paraphrased.{key}": value for key, value in para_metrics.items()})
    ci.update({f"paraphrased.{key}": value for key, value in para_ci.items()})
    return metrics, ci, {"queries": int(len(ranks)), "paraphrased.queries": int(paraphrased_mask.sum())}
