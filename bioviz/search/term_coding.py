"""Code a list of free-text terms: each term's top-k concepts of a level under one or two models.

What a clinical coder mapping a dataset to ICD-10-CM or HPO does by hand: for every term of a
list (a column of a CSV/TSV file, or pasted lines), one row: under each model the concept whose
names are nearest, with its code, name, class, score and margin over the next concept, the other
codes of the top k, whether two models agree, and a low-confidence flag
(:mod:`bioviz.search.coding_confidence`). Each model ranks by its own scores: two models' cosines
are on different scales, so they are never averaged.

- A term that is an exact concept id (``R39.11``, ``r3911``) or an exact name of the ontology
  resolves to its concept (:func:`~bioviz.search.neighbours.resolve_query`): that concept comes
  first with score 1.0, marked ``exact``; the rest of its top k are the nearest concepts of the
  resolved name.
- Terms are scored against the names of the level's :class:`~bioviz.search.index.NeighbourIndex`
  (its float32 vectors and concepts), a batch of terms per matrix product: for thousands of
  terms BLAS is much faster than one index search per term (the index's float16 scan is made
  for one query at a time). Several names belong to one concept, so name scores are
  aggregated to concepts (best score per concept). The top k concepts are exact: names are
  read best first until k distinct concepts are found, and a concept whose names all come
  later cannot score above the last one read.
- Terms are encoded in one batch per model (:func:`encode_terms`), without the disk vector
  cache: a dataset's terms are the user's data, not the ontology's.
- Under a vectors file a term it lacks is answered from its nearest file name; one that shares
  no word with any file name has no vector at all: its row says ``no vector`` and why
  (:data:`NO_VECTOR`, :func:`term_vectors`), and the rest of the list is coded (issue 41).
- Input is bounded (:data:`MAX_TERMS`, :data:`MAX_TERM_CHARS`, :data:`MAX_TABLE_BYTES`); an
  uploaded table is only parsed (``pandas.read_csv``), never executed.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from bioviz.errors import BiovizError, ModelError, shown, shown_list
from bioviz.models.encoders import Progress
from bioviz.models.model_spec import ModelSpec
from bioviz.models.registry import load_encoder
from bioviz.models.vectors_coverage import vectors_models
from bioviz.search.vectors_query import answer_vectors, query_answer
from bioviz.ontology.model import Ontology
from bioviz.search.coding_confidence import Confidence, confidence_for, needs_review
from bioviz.search.hybrid import ExpandedForms, NameMatcher, Ranking, SparseNames, name_scores
from bioviz.search.index import NeighbourIndex
from bioviz.search.lexicon import NO_EXPANSION, Expansion, expand_queries, expanded_forms, expansion_notes
from bioviz.search.neighbours import QueryInfo, resolve_query
from bioviz.search.rerank import DEFAULT_RERANKER, OntologyReranker, Reranker
from bioviz.search.vocabulary_vectors import with_similar_terms
from bioviz.text_clean import clean_texts

MAX_TERMS = 5_000
MAX_TERM_CHARS = 500
MAX_TABLE_BYTES = 20 * 2**20
MAX_K = 50
EXACT, NEAREST = "exact", "nearest"
NO_VECTOR = "no vector"  # the match of a term a vectors file has no vector for (nor a name to stand in)
# Per model, the columns of a coding (suffixed _a, _b) and their names in an export.
MODEL_COLUMNS = ("code", "name", "class", "score", "margin", "others")
# Per model, the columns bioviz.search.granularity.with_parents adds (the first concept's parents).
PARENT_COLUMNS = ("parent", "parent_name")
EXPORT_NAMES = {"others": "other codes", "parent_name": "parent name"}


def check_terms(terms: Sequence[str], max_terms: int = MAX_TERMS) -> list[str]:
    """The terms stripped, blank ones dropped, each kept once (first occurrence order).

    Invisible characters (control and format characters: NUL, right-to-left overrides,
    zero-width spaces, see :mod:`bioviz.text_clean`) are taken out first, and a term made only
    of them is dropped like a blank one (``clean_texts(terms).dropped`` counts them).

    Raises
    ------
    BiovizError
        No terms, more than ``max_terms`` distinct terms, or a term over :data:`MAX_TERM_CHARS`.
    """
    kept = list(dict.fromkeys(t.strip() for t in clean_texts(terms).texts if isinstance(t, str) and t.strip()))
    if not kept:
        raise BiovizError("no terms to code: give one term per line, or a column with terms")
    if len(kept) > max_terms:
        raise BiovizError(f"{len(kept):,} distinct terms: at most {max_terms:,} are coded at once (split the list)")
    long = next((t for t in kept if len(t) > MAX_TERM_CHARS), None)
    if long is not None:
        raise BiovizError(f"a term has {len(long):,} characters (at most {MAX_TERM_CHARS}): "
                          f"{long[:40]!r}... is not a term")
    return kept


def terms_from_text(text: str, max_terms: int = MAX_TERMS) -> list[str]:
    """Pasted terms, one per line (see :func:`check_terms`)."""
    return check_terms(text.splitlines(), max_terms)


def read_term_table(data: bytes, filename: str = "", max_bytes: int = MAX_TABLE_BYTES) -> pd.DataFrame:
    """An uploaded CSV/TSV file as a table of strings (parsed, never executed).

    The delimiter is a tab for ``.tsv``, a comma for ``.csv``, otherwise sniffed from the
    first lines. Every cell is text; empty cells are empty strings.

    Parameters
    ----------
    data : bytes
        The file's content (UTF-8, with or without a byte-order mark).
    filename : str
        The file's own name (only its suffix is used).
    max_bytes : int

    Raises
    ------
    BiovizError
        Too large, not UTF-8, not a table, or without columns.
    """
    if len(data) > max_bytes:
        raise BiovizError(f"the file has {len(data) / 2**20:.1f} MiB: at most {max_bytes / 2**20:.0f} MiB of terms")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise BiovizError(f"the file is not UTF-8 text (byte {error.start:,}): save it as UTF-8 CSV") from None
    if not text.strip():
        raise BiovizError("the file is empty: it needs a header line and one term per line")
    suffix = filename.lower().rsplit(".", 1)[-1] if "." in filename else ""
    if suffix in ("tsv", "tab"):
        sep = "\t"
    elif suffix == "csv":
        sep = ","
    else:
        try:
            sep = csv.Sniffer().sniff(text[:8192], delimiters=",\t;|").delimiter
        except csv.Error:  # one column: no delimiter to find
            sep = ","
    try:
        frame = pd.read_csv(io.StringIO(text), sep=sep, dtype=str, keep_default_na=False, on_bad_lines="error",
                            engine="python" if sep not in (",", "\t") else "c")
    except (pd.errors.ParserError, pd.errors.EmptyDataError, csv.Error) as error:
        reason = str(error).strip().splitlines()[-1] if str(error).strip() else type(error).__name__
        raise BiovizError(f"the file is not a {'TSV' if sep == chr(9) else 'CSV'} table: {reason}") from None
    if not isinstance(frame.index, pd.RangeIndex):  # pandas makes the surplus leading fields an index
        raise BiovizError("rows have more fields than the header line: quote terms that contain the delimiter")
    if not len(frame.columns):
        raise BiovizError("the file has no columns: it needs a header line")
    frame.columns = [str(c) for c in frame.columns]
    return frame


def terms_from_column(frame: pd.DataFrame, column: str, max_terms: int = MAX_TERMS) -> list[str]:
    """The terms of one column of an uploaded table (see :func:`check_terms`).

    Raises
    ------
    BiovizError
        The column is missing, or its terms fail :func:`check_terms`.
    """
    if column not in frame.columns:
        # each cell cut short, the list bounded: a header line can be megabytes of one cell
        raise BiovizError(f"no column {shown(column)} in the file (its columns: {shown_list(frame.columns)})")
    try:
        return check_terms(frame[column].astype(str).tolist(), max_terms)
    except BiovizError as error:
        raise BiovizError(f"column {shown(column)}: {error}") from None


def resolve_terms(terms: Sequence[str], view, ontology: Ontology | None = None) -> list[QueryInfo]:
    """Each term located in the level, an exact concept id or name resolved to its concept."""
    return [resolve_query(term, view, ontology) for term in terms]


def encode_terms(texts: Sequence[str], model: ModelSpec, progress: Progress | None = None) -> np.ndarray:
    """Unit vectors of ``texts`` under ``model``, in one batch (not one call per term).

    Not stored in the disk vector cache: a dataset's terms are the user's, and would only
    fill the cache with vectors no other view asks for.
    """
    return answer_vectors(texts, model, progress=progress, use_cache=False)  # a vectors file: nearest names stand in


def term_vectors(texts: Sequence[str], model: ModelSpec,
                 progress: Progress | None = None) -> tuple[np.ndarray, dict[int, str]]:
    """:func:`encode_terms`, but a term a vectors file cannot answer is a zero row and a note, not an error.

    Parameters
    ----------
    texts : sequence of str
    model : ModelSpec
    progress : callable, optional
        ``progress(done, total)`` in terms.

    Returns
    -------
    (vectors, lacking)
        Unit rows (zero where lacking), and ``{position: one-line note}`` of the terms that have
        no vector: under a vectors file (or a run on one), those sharing no word with any file name.

    Raises
    ------
    ModelError
        The model cannot be loaded (as :func:`encode_terms`).
    """
    texts = list(texts)
    if not vectors_models([model]):
        return encode_terms(texts, model, progress), {}
    out = np.zeros((len(texts), load_encoder(model).dim), np.float32)  # loaded once, before any term
    lacking: dict[int, str] = {}
    for i, text in enumerate(texts):
        try:
            out[i] = query_answer(text, model).vector
        except ModelError as error:  # the model loaded: this one term has nothing near in the file
            lacking[i] = str(error)
    if progress is not None:
        progress(len(texts), len(texts))
    return out, lacking


def _lacking_row(term: str, note: str, n_models: int) -> dict:
    """The row of a term with no vector: no concept under any model, flagged for review, the note as its reading."""
    row: dict = {"term": term, "match": NO_VECTOR, "reading": note}
    for suffix in "ab"[:n_models]:
        row |= {f"code_{suffix}": "", f"name_{suffix}": "", f"class_{suffix}": "", f"score_{suffix}": np.nan,
                f"margin_{suffix}": np.nan, f"others_{suffix}": ""}
    if n_models == 2:
        row |= {"agree": False, "overlap": 0}
    return row | {"low_confidence": True}


def exact_concepts(info: QueryInfo) -> tuple[str, ...]:
    """The concepts a resolved term stands for: the typed id's concept, or every concept carrying the typed name."""
    if info.resolved_by == "id":
        return info.concept_ids[:1]
    if info.resolved_by == "name":
        return info.concept_ids
    return ()


@dataclass(frozen=True)
class CodingModel:
    """One model's side of a coding: its readable label, its index over the level, the terms' vectors.

    Attributes
    ----------
    label : str
        For column names in exports (``score (label)``) and titles.
    index : NeighbourIndex
        Over the level's names, with their concepts (:meth:`NeighbourIndex.from_view`).
    vectors : numpy.ndarray
        ``(n_terms, dim)`` unit vectors of the resolved terms (:func:`encode_terms`).
    sparse : SparseNames, optional
        The index's names under the level's char-tfidf: needed by a hybrid ranking.
    forms : ExpandedForms, optional
        Synonym expansions of the terms under this model (:mod:`bioviz.search.lexicon`): a name's
        score is then the best over a term and its forms.
    """

    label: str
    index: NeighbourIndex
    vectors: np.ndarray
    sparse: SparseNames | None = None
    forms: ExpandedForms | None = None


class _NameConcepts:
    """The concept of each name of an index, and the names of each concept.

    Coding scores a batch of terms against every name with one matrix product (BLAS over
    all names is much faster for a batch than an index search per term); a term's top
    concepts are then read from its best names, and any concept's score is its best name's.
    """

    def __init__(self, index: NeighbourIndex) -> None:
        if index.concept_ids is None:
            raise BiovizError("the index has no concepts: build it over a level view")
        self.vectors = index.vectors
        self.concept_of = list(index.concept_ids)
        rows: dict[str, list[int]] = {}
        for row, concept in enumerate(self.concept_of):
            rows.setdefault(concept, []).append(row)
        self.rows = {concept: np.asarray(found, dtype=np.int64) for concept, found in rows.items()}

    @staticmethod
    def heads(scores: np.ndarray, fetch: int) -> np.ndarray:
        """Per row of name ``scores``, its ``fetch`` best names (unordered): one partition for a whole chunk."""
        fetch = min(fetch, scores.shape[1])
        if fetch >= scores.shape[1]:
            return np.broadcast_to(np.arange(scores.shape[1]), scores.shape)
        return np.argpartition(-scores, fetch - 1, axis=1)[:, :fetch]

    def top(self, scores: np.ndarray, head: np.ndarray, k: int, skip: list[str]) -> list[str]:
        """The ``k`` concepts whose best names score highest in one row of name ``scores``, skipping ``skip``.

        Names are read best first, from ``head`` (that row's best names, :meth:`heads`), until ``k``
        distinct concepts are found: a concept whose names all come later cannot score above the
        last one read, so the result is exact. When ``head`` holds fewer concepts, the whole row
        is read.
        """
        for candidates in (head, None):
            rows = candidates if candidates is not None else np.arange(len(scores))
            found: list[str] = []
            for row in rows[np.argsort(-scores[rows], kind="stable")]:
                concept = self.concept_of[row]
                if concept not in found and concept not in skip:
                    found.append(concept)
                    if len(found) == k:
                        return found
            if len(head) >= len(scores):
                break
        return found

    def score(self, scores: np.ndarray, concept: str) -> float:
        """A concept's score in one row of name ``scores``: its best name's (NaN without names here)."""
        rows = self.rows.get(concept)
        return float(scores[rows].max()) if rows is not None else np.nan


# Names fetched per wanted concept on the first look (most concepts have one to a few names).
_NAMES_PER_CONCEPT = 4
# Terms per matrix product: (chunk x names) float32 scores stay near 50 MB on a 100k-name level.
_CHUNK_CELLS = 12_000_000


def _class_of(concept: str, view, ontology: Ontology | None,
              by_concept: dict[str, int]) -> tuple[str | None, str | None]:
    """The level class a concept belongs to: from its names in the level, else its nearest class ancestor."""
    if concept in by_concept:
        label = by_concept[concept]
        return view.classes[label], view.class_labels[label]
    classes = {c: i for i, c in enumerate(view.classes)}
    if ontology is not None and concept in ontology.concepts:
        for ancestor in ontology.path_to_root(concept):
            if ancestor in classes:
                return ancestor, view.class_labels[classes[ancestor]]
    return None, None


def _exact_lists(terms: Sequence[str], infos: Sequence[QueryInfo], index: NeighbourIndex, ranking: Ranking,
                 k: int) -> list[list[str]]:
    """Per term, the concepts it matches exactly (at most ``k``): its code or name; under a hybrid ranking also
    a name equal but for case, spacing and punctuation."""
    exact = [list(exact_concepts(info))[:k] for info in infos]
    if not ranking.hybrid:
        return exact
    matcher = NameMatcher(index.space.names, index.concept_ids or ())
    return [list(dict.fromkeys([*found, *matcher.concepts(term, info.text)]))[:k]
            for found, term, info in zip(exact, terms, infos)]


def _check_coding(terms: Sequence[str], infos: Sequence[QueryInfo], models: Sequence[CodingModel], k: int) -> None:
    """Raise a :class:`BiovizError` for a bad ``k``, no or more than two models, or vectors not aligned with the terms."""
    if not 1 <= k <= MAX_K:
        raise BiovizError(f"k must be between 1 and {MAX_K} (got {k})")
    if not 1 <= len(models) <= 2:
        raise BiovizError(f"code with one or two models (got {len(models)})")
    if len(infos) != len(terms) or any(len(m.vectors) != len(terms) for m in models):
        raise BiovizError(f"{len(terms)} terms but {len(infos)} resolutions and "
                          f"{', '.join(str(len(m.vectors)) for m in models)} vectors")


class _Describer:
    """A concept's name and class label, looked up once per concept."""

    def __init__(self, view, ontology: Ontology | None, index: NeighbourIndex) -> None:
        self.view, self.ontology, self.found = view, ontology, {}
        self.first_name: dict[str, str] = {}  # a concept's name where the ontology has none
        for name, concept in zip(index.space.names, index.concept_ids or ()):
            self.first_name.setdefault(concept, name)
        self.by_concept: dict[str, int] = {}
        for concept, label in zip(view.name_concepts, view.labels):
            self.by_concept.setdefault(concept, int(label))

    def __call__(self, concept: str) -> tuple[str, str]:
        if concept not in self.found:
            known = self.ontology is not None and concept in self.ontology.concepts
            name = self.ontology.concepts[concept].name if known else self.first_name.get(concept, concept)
            self.found[concept] = (name, _class_of(concept, self.view, self.ontology, self.by_concept)[1] or "")
        return self.found[concept]


def _placed_first(lookup: _NameConcepts, scores: np.ndarray, placed: tuple[tuple[str, ...], ...],
                  skip: list[str]) -> list[str]:
    """The placed concepts the level has names of, tier by tier, each tier best scoring first."""
    out: list[str] = []
    for tier in placed:
        present = [c for c in dict.fromkeys(tier) if c in lookup.rows and c not in skip and c not in out]
        out += sorted(present, key=lambda c: -lookup.score(scores, c))
    return out


def _model_tops(models: Sequence[CodingModel], names: Sequence[_NameConcepts], exact: Sequence[list[str]],
                texts: Sequence[str], lo: int, hi: int, want: int, ranking: Ranking, regrain: OntologyReranker,
                placed: Sequence[tuple[tuple[str, ...], ...]] = ()):
    """Per model, per term of ``terms[lo:hi]``: its ``want`` best concepts (exact ones first, then those the
    clinical vocabulary placed) with their scores, re-ordered by the re-ranker (which looks at more
    candidates than are kept, and moves neither exact nor placed concepts)."""
    out = []
    look = max(want, regrain.reranker.k) if regrain.active else want
    for model, lookup in zip(models, names):
        scores = name_scores(model.vectors[lo:hi], lookup.vectors, ranking, sparse=model.sparse, texts=texts[lo:hi],
                             forms=model.forms.between(lo, hi) if model.forms is not None else None)
        heads = _NameConcepts.heads(scores, look * _NAMES_PER_CONCEPT + max(map(len, exact[lo:hi]), default=0))
        tops = []
        for i, found in enumerate(exact[lo:hi]):
            tiers = placed[lo + i] if placed else ()
            fixed = found[:look] + _placed_first(lookup, scores[i], tiers, found)[:max(look - len(found), 0)]
            rest = look - len(fixed)
            top = fixed + (lookup.top(scores[i], heads[i], rest, fixed) if rest > 0 else [])
            # an exact concept scores 1.0; the others their best name's score under this ranking
            scored = [(c, 1.0 if c in found else round(lookup.score(scores[i], c), 4)) for c in top]
            tops.append(regrain(scored, fixed, texts[lo + i])[:want])
        out.append(tops)
    return out


def _term_row(term: str, exact: list[str], tops: Sequence[list[tuple[str, float]]], k: int,
              describe: _Describer, confidence: Sequence[Confidence], reading=None) -> dict:
    """One term's row: under each model its first concept, score, margin and other top-k codes; agreement; flag.

    ``match`` says what placed the first concept: ``exact``, a rule of the clinical vocabulary
    (``abbreviation``, ``vocabulary`` ...; ``reading`` says from where) or ``nearest``.
    """
    in_place = {c for tier in (reading.placed if reading is not None else ()) for c in tier}
    first_placed = bool(tops and tops[0] and tops[0][0][0] in in_place)
    match = EXACT if exact else (reading.rule if first_placed else NEAREST)
    row: dict = {"term": term, "match": match, "reading": reading.note if first_placed else ""}
    low = []
    for suffix, top, rule in zip("ab", tops, confidence):
        code, score = top[0] if top else ("", np.nan)
        margin = round(score - top[1][1], 4) if len(top) > 1 else np.nan
        name, class_label = describe(code) if code else ("", "")
        row |= {f"code_{suffix}": code, f"name_{suffix}": name, f"class_{suffix}": class_label,
                f"score_{suffix}": score, f"margin_{suffix}": margin,
                f"others_{suffix}": "; ".join(c for c, _ in top[1:k])}
        low.append(not exact and needs_review(match, rule, score, margin))
    if len(tops) == 2:
        row["agree"] = bool(tops[0] and tops[1] and tops[0][0][0] == tops[1][0][0])
        row["overlap"] = len({c for c, _ in tops[0][:k]} & {c for c, _ in tops[1][:k]})
    row["low_confidence"] = any(low)
    return row


def code_terms(terms: Sequence[str], infos: Sequence[QueryInfo], models: Sequence[CodingModel], view, *,
               ontology: Ontology | None = None, k: int = 5, progress: Progress | None = None,
               ranking: Ranking = Ranking(), reranker: Reranker = DEFAULT_RERANKER,
               readings: Sequence | None = None) -> pd.DataFrame:
    """Each term's first concept of the level under one or two models, its score and margin, agreement, a flag.

    Each model ranks the level's concepts by its own scores (two models' scores are on different
    scales, so they are never averaged): one row per term gives each model's first concept.

    Parameters
    ----------
    terms : sequence of str
        The terms as given (the ``term`` column).
    infos : sequence of QueryInfo
        :func:`resolve_terms` of ``terms``; ``models[i].vectors`` encode their ``text``.
    models : sequence of CodingModel
        One or two; the columns of the first end in ``_a``, of the second in ``_b``.
    view : LevelView
    ontology : Ontology, optional
        Concept names and, for exact ids outside the level's names, their class.
    k : int
        Concepts per term and model (1 to :data:`MAX_K`): the first, and ``k - 1`` others.
    progress : callable, optional
        ``progress(done, total)`` in terms, after each batch of terms.
    ranking : Ranking
        ``dense`` (cosine; exact ids and names first) or ``hybrid`` (:mod:`bioviz.search.hybrid`:
        also names equal but for case, spacing and punctuation first, then cosine plus the
        weighted char-tfidf cosine; the models need their ``sparse`` rows). Both models are
        ranked the same way; the scores are the ranking's.
    reranker : Reranker
        Re-orders each term's top candidates for granularity (:mod:`bioviz.search.rerank`: a
        parent of the first concept that scores almost as well comes first); needs ``ontology``.
    readings : sequence of QueryReading or None, optional
        Per term, what the clinical vocabulary made of it (:mod:`bioviz.search.query_reading`):
        the concepts it places come right after exact ones, tier by tier, the same for both models.

    Returns
    -------
    pandas.DataFrame
        One row per term, in the given order. Columns: ``term``, ``match`` (``exact``: the term
        is a code or name of the ontology; a rule of :mod:`bioviz.search.query_reading` when the
        clinical vocabulary placed the first concept; else ``nearest``), ``reading`` (that rule's
        note: which long form, from which source), per model ``code_a, name_a, class_a,
        score_a`` (its first concept and that concept's score: its best name's; 1.0 for an exact
        concept), ``margin_a`` (that score minus the second concept's), ``others_a`` (the other
        codes of its top k, best first, ``; ``-separated), with two models ``agree`` (the same first
        concept) and ``overlap`` (concepts in both top k), and ``low_confidence``: under some model
        the first concept's score or margin is below that model's
        :func:`~bioviz.search.coding_confidence.confidence_for` thresholds (never for an exact match).

    Raises
    ------
    BiovizError
        Bad ``k``, no or more than two models, or vectors not aligned with the terms.
    """
    _check_coding(terms, infos, models, k)
    texts = [info.text for info in infos]
    exact = _exact_lists(terms, infos, models[0].index, ranking, k)
    names = [_NameConcepts(m.index) for m in models]
    describe = _Describer(view, ontology, models[0].index)
    confidence = [confidence_for(m.label, ranking) for m in models]
    regrain = OntologyReranker(reranker, ontology)
    chunk = max(1, _CHUNK_CELLS // max(len(models[0].index), 1))
    rows = []
    for lo in range(0, len(terms), chunk):
        hi = min(lo + chunk, len(terms))
        placed = [r.placed if r is not None else () for r in readings] if readings else ()
        tops = _model_tops(models, names, exact, texts, lo, hi, max(k, 2), ranking, regrain,  # 2: the margin's
                           placed)
        rows += [_term_row(terms[t], exact[t], [top[t - lo] for top in tops], k, describe, confidence,
                           readings[t] if readings else None)
                 for t in range(lo, hi)]
        if progress is not None:
            progress(hi, len(terms))
    frame = pd.DataFrame.from_records(rows, columns=coding_columns(len(models)))
    frame.attrs.update(models=[m.label for m in models], k=k, ranking=ranking.label)
    return frame


def coding_columns(n_models: int) -> list[str]:
    """The columns of a :func:`code_terms` frame for one or two models."""
    columns = ["term", "match", "reading"]
    for suffix in "ab"[:n_models]:
        columns += [f"{key}_{suffix}" for key in MODEL_COLUMNS]
    return columns + (["agree", "overlap"] if n_models == 2 else []) + ["low_confidence"]


def agreement(frame: pd.DataFrame) -> dict:
    """Per-list figures of a :func:`code_terms` frame.

    Returns
    -------
    dict
        ``terms``, ``exact`` (terms resolved to a concept by code or name), ``low_confidence``
        (terms flagged for review), and with two models ``same_top1`` (terms whose first concept
        is the same under both models) and ``mean_overlap`` (mean number of shared concepts in the top k).
    """
    out = {"terms": len(frame), "exact": int((frame["match"] == EXACT).sum()),
           "low_confidence": int(frame["low_confidence"].sum())}
    lacking = int((frame["match"] == NO_VECTOR).sum())
    if lacking:  # said only when some term has none (a vectors file's list): older outputs keep their keys
        out["no_vector"] = lacking
    if "agree" in frame.columns:
        out["same_top1"] = int(frame["agree"].sum())
        out["mean_overlap"] = round(float(frame["overlap"].mean()), 3) if len(frame) else 0.0
    return out


def export_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """The :func:`code_terms` frame for a CSV, its per-model columns named by the models' labels.

    ``code_a``/``score_a`` become ``code (minilm)``/``score (minilm)``; two equal labels are told
    apart with ``(A)`` and ``(B)``; ``others`` becomes ``other codes``. The parent columns of
    :func:`bioviz.search.granularity.with_parents`, where present, become ``parent (minilm)`` and
    ``parent name (minilm)``.
    """
    labels = list(frame.attrs.get("models") or [])
    if len(labels) == 2 and labels[0] == labels[1]:
        labels = [f"{labels[0]} (A)", f"{labels[1]} (B)"]
    renames = {f"{key}_{suffix}": f"{EXPORT_NAMES.get(key, key)} ({label})"
               for suffix, label in zip("ab", labels) for key in (*MODEL_COLUMNS, *PARENT_COLUMNS)}
    export = frame.rename(columns=renames)
    export["ranking"] = frame.attrs.get("ranking", "dense")  # which scores these are, in the file itself
    return export


def code_term_list(terms: Sequence[str], view, ontology: Ontology | None,
                   models: Sequence[tuple[ModelSpec, NeighbourIndex]], *, k: int = 5, progress: Progress | None = None,
                   ranking: Ranking = Ranking(), expansion: Expansion = NO_EXPANSION,
                   vocabulary=None) -> pd.DataFrame:
    """Resolve, encode (one batch per model) and code ``terms``: :func:`code_terms` from plain inputs.

    Parameters
    ----------
    terms : sequence of str
        Checked terms (:func:`check_terms`).
    view : LevelView
    ontology : Ontology, optional
    models : sequence of (ModelSpec, NeighbourIndex)
        The index over the level's names under that model (``candidate_index(..., "names")``).
    k : int
    progress : callable, optional
        ``progress(done, total)`` in steps: each model encodes every term, then every term is coded
        (``total`` is the number of terms times one more than the models).
    ranking : Ranking
        Dense or hybrid (:func:`code_terms`); a hybrid ranking fits char-tfidf on the level's names.
    expansion : Expansion
        Which ontology synonyms a term that the level's ontology does not name is also ranked as its
        concept's preferred name for (:func:`bioviz.search.lexicon.expand_queries`); the frame's
        ``attrs["expansions"]`` lists the notes.
    vocabulary : ClinicalVocabulary, optional
        The level ontology's clinical vocabulary (:func:`bioviz.search.vocabulary.vocabulary_for`): with
        ``expansion`` on, each term it reads is placed by its rule (:mod:`bioviz.search.query_reading`).
    """
    every = list(terms)
    infos = resolve_terms(every, view, ontology)
    texts = [info.text for info in infos]
    steps = (len(models) + 1) * len(texts)

    def report_from(offset: int) -> Progress | None:
        return None if progress is None else (lambda done, _total: progress(offset + done, steps))

    encoded = [term_vectors(texts, model, report_from(m * len(texts))) for m, (model, _) in enumerate(models)]
    lacking = {i: note for _, notes in reversed(encoded) for i, note in notes.items()}  # the first model's note
    keep = [i for i in range(len(every)) if i not in lacking]
    # Only the terms with a vector under every model are coded; the others get a marked row below.
    terms, infos, texts = [every[i] for i in keep], [infos[i] for i in keep], [texts[i] for i in keep]
    vectors = [v[keep] for v, _ in encoded]
    expanded = expand_queries(infos, expansion, vocabulary=vocabulary)
    # a phrasing near a term the sources list (the first model's vectors; placement is shared by both models)
    expanded = with_similar_terms(expanded, infos, vectors[0], models[0][1].vectors, vocabulary=vocabulary,
                                  model=models[0][0])
    coding = [CodingModel(index.space.model_id, index, vectors[m],
                          SparseNames.build(view.names, index.space.names) if ranking.hybrid else None,
                          expanded_forms(expanded, model))
              for m, (model, index) in enumerate(models)]
    frame = code_terms(terms, infos, coding, view, ontology=ontology, k=k,
                       progress=report_from(len(models) * len(every)),
                       ranking=ranking, readings=[e.reading for e in expanded])
    if lacking:
        frame = _with_lacking(frame, every, keep, lacking)
        if progress is not None:
            progress(steps, steps)
    frame.attrs["expansions"] = expansion_notes(expanded)
    # A level too small or odd for char-tfidf is ranked dense: the frame says so for the page and the CLI.
    frame.attrs["ranking_note"] = next((c.sparse.note for c in coding if c.sparse is not None and c.sparse.note), "")
    return frame


def _with_lacking(frame: pd.DataFrame, every: list[str], keep: list[int], lacking: dict[int, str]) -> pd.DataFrame:
    """``frame`` (the coded terms, in order) with a :data:`NO_VECTOR` row for each lacking term, in the given order."""
    coded = iter(frame.to_dict("records"))
    n_models = len(frame.attrs.get("models") or [])
    kept = set(keep)
    rows = [next(coded) if i in kept else _lacking_row(term, lacking[i], n_models) for i, term in enumerate(every)]
    out = pd.DataFrame.from_records(rows, columns=frame.columns)
    out.attrs.update(frame.attrs)
    return out
