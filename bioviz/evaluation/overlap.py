"""Whether an evaluation result's data overlapped a model's pretraining (issue 17).

A model pretrained with ``python -m trainer pretrain`` (a directory with ``pretrain.json``),
or a run trained on top of one (its ``base``/``init``/``input_model`` chain reaches one),
may have seen the evaluation's names during pretraining. The rule:

* an **ontology task** on a level overlaps unless the pretraining excluded that very level
  under that very split (``pretrain.json`` ``excluded.levels``: same source, root, depth,
  no synonym sets or loader options, and the same shots, seed, test names per class and
  zero-shot classes): only then were its validation, test and zero-shot names kept out;
* a **relatedness benchmark** overlaps when any of its terms is among the texts of the
  pretraining pairs (``pretrain-terms.json``: hashes of the normalised texts, written by
  the pretrain command); without that file it counts as overlapping (it cannot be told).

Overlap is not an error: the figure is still what the model does, but it is not a held-out
figure. The Evaluation page marks such results and says why.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from bioviz.evaluation.result import EvalResult
from bioviz.models.model_spec import ModelSpec
from bioviz.models.runs import is_run_dir, read_run
from bioviz.ontology.level_spec import LevelSpec
from bioviz.ontology.model import normalise_name
from bioviz.ontology.sources import BUNDLED
from bioviz.ontology.splits import SplitSpec

logger = logging.getLogger(__name__)

PRETRAIN_FILE = "pretrain.json"  # written by trainer.pretrain.fit
TERMS_FILE = "pretrain-terms.json"  # written by trainer.pretrain.terms
MARK = "†"  # appended to a marked figure in tables
MAX_CHAIN = 8  # runs stacked deeper than this are not followed (a cycle, or a damaged record)
_SPLIT_FIELDS = ("shots", "seed", "test_per_class", "zero_shot_classes")


def term_hash(text: str) -> str:
    """The key of a text in ``pretrain-terms.json``: 16 hex digits of BLAKE2b of its normalised form.

    Normalised as names are compared everywhere (:func:`bioviz.ontology.model.normalise_name`),
    hashed so the file does not republish the ontology's texts.

    >>> term_hash("Heart  Attack") == term_hash("heart attack")
    True
    """
    return hashlib.blake2b(normalise_name(text).encode("utf-8"), digest_size=8).hexdigest()


@dataclass(frozen=True)
class Pretraining:
    """What a model's pretraining recorded.

    Attributes
    ----------
    path : Path
        The pretrained model directory (the model itself, or the base of its chain).
    record : dict
        Its ``pretrain.json``.
    terms : frozenset of str or None
        :func:`term_hash` of every text of its training pairs; None when not recorded.
    """

    path: Path
    record: dict
    terms: frozenset | None

    @property
    def excluded_levels(self) -> list[dict]:
        """The ``excluded.levels`` records (level query, split, counts); empty when none."""
        excluded = self.record.get("excluded")
        levels = excluded.get("levels") if isinstance(excluded, dict) else None
        return [level for level in levels if isinstance(level, dict)] if isinstance(levels, list) else []

    @property
    def sources_text(self) -> str:
        """``hpo, mini.obo``: the pretraining sources by name (a path by its file name, never the server's path)."""
        settings = self.record.get("config") if isinstance(self.record.get("config"), dict) else {}
        sources = settings.get("sources") if isinstance(settings.get("sources"), list) else []
        return ", ".join(Path(str(s)).name or str(s) for s in sources) or "?"


def _read_json(path: Path):
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


@lru_cache(maxsize=16)
def _terms(file: str, modified: float) -> frozenset | None:
    """The hash set of a ``pretrain-terms.json`` (cached by path and mtime: a page reads it on every rerun)."""
    terms = _read_json(Path(file))
    hashes = terms.get("hashes") if isinstance(terms, dict) else None
    return frozenset(map(str, hashes)) if isinstance(hashes, list) else None


def read_pretraining(path: str | Path) -> Pretraining | None:
    """The pretraining recorded in model directory ``path``; None when it holds no readable ``pretrain.json``."""
    path = Path(path)
    record = _read_json(path / PRETRAIN_FILE)
    if not isinstance(record, dict):
        return None
    try:
        modified = (path / TERMS_FILE).stat().st_mtime
    except OSError:
        return Pretraining(path, record, None)
    return Pretraining(path, record, _terms(str(path / TERMS_FILE), modified))


def pretraining_of(model: str) -> Pretraining | None:
    """The pretraining behind MODEL string ``model``: its own, or that of the model it was trained on.

    A run directory is followed through its ``input_model``, ``init`` and ``base`` (a head run on
    a pretrained base, a run continued from such a run); a preset or hub id has none.
    """
    spec = str(model)
    for _ in range(MAX_CHAIN):
        path = Path(spec).expanduser()
        if not path.is_dir():
            return None
        found = read_pretraining(path)
        if found is not None:
            return found
        if not is_run_dir(path):
            return None
        try:
            source = read_run(path).input
        except Exception as error:  # noqa: BLE001 - a damaged run: nothing to follow, never fatal here
            logger.info("cannot follow %s for pretraining: %s", path.name, error)
            return None
        nxt = source.spec if source is not None else None
        if not nxt or nxt == spec:
            return None
        spec = nxt
    return None


def _source_key(source: str) -> str:
    """A SOURCE compared by what it names (a bundled name as is, a path resolved)."""
    return source if source in BUNDLED else str(Path(source).expanduser().resolve())


def level_was_excluded(pretraining: Pretraining, level: LevelSpec, split: SplitSpec) -> bool:
    """True when the pretraining kept ``level``'s held-out names under ``split`` out of its pairs."""
    if level.synonyms or level.options or level.keep_ambiguous:
        return False  # --exclude-level names source, root and depth only: another view is another split
    wanted = {f: getattr(split, f) for f in _SPLIT_FIELDS}
    for record in pretraining.excluded_levels:
        query = record.get("level") if isinstance(record.get("level"), dict) else {}
        recorded_split = record.get("split") if isinstance(record.get("split"), dict) else {}
        try:
            same_level = (_source_key(str(query.get("source", ""))) == _source_key(level.source)
                          and (query.get("root") or None) == (level.root or None)
                          and int(query.get("depth", -1)) == int(level.depth)
                          and not query.get("synonyms") and len(query) <= 3)
        except (TypeError, ValueError):
            continue
        if same_level and all(recorded_split.get(f) == wanted[f] for f in _SPLIT_FIELDS):
            return True
    return False


def terms_seen(pretraining: Pretraining, terms) -> int | None:
    """How many distinct ``terms`` (normalised) are texts of the pretraining pairs; None when not recorded."""
    if pretraining.terms is None:
        return None
    return sum(term_hash(t) in pretraining.terms for t in {normalise_name(t) for t in terms})


def level_reason(pretraining: Pretraining, level: LevelSpec, split: SplitSpec) -> str | None:
    """Why an ontology task on ``level`` overlaps the pretraining (one sentence), or None when it does not."""
    if level_was_excluded(pretraining, level, split):
        return None
    shots = "all names" if split.shots is None else f"{split.shots} shots"
    return (f"pretrained on {pretraining.sources_text} without keeping this level's held-out names out "
            f"(split {shots}, seed {split.seed}): its test names may have been pretraining pairs")


def benchmark_reason(pretraining: Pretraining, terms) -> str | None:
    """Why a relatedness benchmark with ``terms`` overlaps the pretraining (one sentence), or None."""
    distinct = {normalise_name(t) for t in terms}
    seen = terms_seen(pretraining, distinct)
    if seen is None:
        return (f"pretrained on {pretraining.sources_text}; which texts it saw was not recorded, so the "
                "benchmark's terms may have been pretraining pairs")
    if seen == 0:
        return None
    return f"{seen} of its {len(distinct)} terms are texts of the pretraining pairs ({pretraining.sources_text})"


def result_marks(results: list[EvalResult], level: LevelSpec | None, split: SplitSpec | None,
                 benchmark_terms: dict[str, list[str]]) -> dict[tuple[str, str], str]:
    """The results whose data overlapped their model's pretraining, and why.

    Parameters
    ----------
    results : list of EvalResult
        Benchmark results carry ``data["benchmark"]``.
    level : LevelSpec or None
        The level the ontology tasks ran on.
    split : SplitSpec or None
        The split they used.
    benchmark_terms : dict
        ``benchmark label -> its terms`` for the benchmark results.

    Returns
    -------
    dict
        ``(model label, task) -> reason`` (``task`` as in the result) for each marked result.
    """
    marks: dict[tuple[str, str], str] = {}
    found: dict[str, Pretraining | None] = {}
    for result in results:
        spec = str(result.model_spec or "")
        if spec not in found:
            found[spec] = pretraining_of(spec)
        pretraining = found[spec]
        if pretraining is None:
            continue
        task = result.task
        if "benchmark" in result.data:
            reason = benchmark_reason(pretraining, benchmark_terms.get(task, ())) if task in benchmark_terms else None
        else:
            reason = level_reason(pretraining, level, split) if level is not None and split is not None else None
        if reason:
            marks[(result.model, task)] = reason
    return marks


def cross_level_reasons(models: Sequence[ModelSpec], labels: list[str], level: LevelSpec, depths, *,
                        split: SplitSpec) -> list[str]:
    """One line per model whose pretraining did not keep some of ``depths`` (levels under ``level``'s root) out.

    Parameters
    ----------
    models : sequence of ModelSpec
    labels : list of str
        The models' labels, in the same order.
    level : LevelSpec
        The selected level (its source and root; its depth is replaced by each of ``depths``).
    depths : iterable of int
    split : SplitSpec
    """
    lines = []
    for model, label in zip(models, labels):
        pretraining = pretraining_of(model.spec)
        if pretraining is None:
            continue
        overlapping = [d for d in depths if level_reason(pretraining, level.replace(depth=int(d)), split)]
        if overlapping:
            lines.append(f"{MARK} {label} in the cross-level table, level(s) {', '.join(map(str, overlapping))}: "
                         f"pretrained on {pretraining.sources_text} without keeping those levels' held-out names out.")
    return lines


def mark_table(table, marks: dict[tuple[str, str], str], task_label) -> object:
    """A display table (models x ``task · metric`` strings) with :data:`MARK` after each marked figure.

    Parameters
    ----------
    table : pandas.DataFrame
        :func:`bioviz.evaluation.tables.display_table`'s output.
    marks : dict
        :func:`result_marks`' output.
    task_label : callable
        The readable label of a result's task, as the table's columns show it.
    """
    table = table.copy()
    for (model, task), _reason in marks.items():
        prefix = f"{task_label(task)} · "
        for column in table.columns:
            if str(column).startswith(prefix) and model in table.index:
                table.at[model, column] = f"{table.at[model, column]} {MARK}"
    return table


def marks_caption(marks: dict[tuple[str, str], str], task_label) -> str:
    """One caption line per marked result: ``† minilm-pre on MayoSRS: 12 of its 101 terms ...``."""
    lines = [f"{MARK} {model} on {task_label(task)}: {reason}." for (model, task), reason in sorted(marks.items())]
    return "  \n".join(lines)
