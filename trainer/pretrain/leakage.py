"""The leakage rule: a level's held-out names never reach the pretraining pairs.

When a pretrained model will be evaluated on a level, the split of that level (the
trainer's :class:`~bioviz.ontology.splits.SplitSpec`: shots, seed, test names per class,
zero-shot classes) decides which names are unseen. A pair is dropped when

* any name it was built from, or either of its texts, is (after
  :func:`~bioviz.ontology.model.normalise_name`) a validation or test name of the level, or
  a name of a zero-shot class concept or of any concept below one (whatever the source
  of the pair: the same name in another source is the same leak);
* it comes from the level's own source and any concept it was built from is a zero-shot
  class or lies below one.

Training names of the level stay: the few-shot run sees them anyway. Definitions are free
text: a definition that merely contains a held-out name as a substring is kept (only the
names a pair was built from count).
"""

from __future__ import annotations

import dataclasses
import hashlib
from dataclasses import dataclass
from pathlib import Path

import networkx as nx

from bioviz.errors import BiovizError
from bioviz.ontology.level_spec import LevelSpec
from bioviz.ontology.model import Ontology, normalise_name
from bioviz.ontology.sources import BUNDLED
from bioviz.ontology.splits import SplitSpec
from trainer.pretrain.pairs import Pair


def source_key(source: str) -> str:
    """A SOURCE string compared by what it names (a path resolved, a bundled name as is)."""
    return source if source in BUNDLED else str(Path(source).expanduser().resolve())


def parse_level(text: str) -> LevelSpec:
    """A level from ``SOURCE:ROOT:DEPTH`` (ROOT may be empty for the source's default root).

    ROOT may itself hold colons (``hpo:HP:0000118:1``): the source is everything before
    the first colon, the depth everything after the last.

    Raises
    ------
    BiovizError
        Not of that form, or a depth that is not a positive integer.
    """
    if text.count(":") < 2:
        raise BiovizError(f"--exclude-level {text!r}: expected SOURCE:ROOT:DEPTH (ROOT may be empty, e.g. icd10::1)")
    source, rest = text.split(":", 1)
    root, depth = rest.rsplit(":", 1)
    if not source or not depth.isdigit() or int(depth) < 1:
        raise BiovizError(f"--exclude-level {text!r}: expected SOURCE:ROOT:DEPTH with a depth of at least 1")
    return LevelSpec(source, root=root or None, depth=int(depth))


@dataclass
class HeldOut:
    """What one level's split keeps unseen."""

    level: LevelSpec
    split: SplitSpec
    names: set[str]  # normalised
    concepts: set[str]  # zero-shot class concepts and everything below them, in the level's source
    counts: dict

    def leaks(self, pair: Pair) -> bool:
        """Whether ``pair`` mentions a held-out name or a zero-shot concept."""
        texts = (pair.anchor, pair.positive, *pair.names)
        if any(normalise_name(t) in self.names for t in texts):
            return True
        return bool(self.concepts) and source_key(pair.source) == source_key(self.level.source) and \
            any(c in self.concepts for c in pair.concepts)

    def record(self) -> dict:
        """The level, the split and the sizes held out, for ``pretrain.json``."""
        return {"level": self.level.to_query(), "level_label": self.level.label,
                "split": dataclasses.asdict(self.split), **self.counts}


def held_out(level: LevelSpec, split: SplitSpec, ontology: Ontology | None = None) -> HeldOut:
    """The names and concepts that ``split`` of ``level`` keeps out of training.

    Parameters
    ----------
    level : LevelSpec
    split : SplitSpec
    ontology : Ontology, optional
        The level's source, already loaded.
    """
    ontology = ontology if ontology is not None else level.ontology()
    view = level.load(ontology)
    drawn = split.make(view)
    rows = [*drawn.validation.tolist(), *drawn.test.tolist(), *drawn.zero_shot.tolist()]
    names = {normalise_name(view.names[r]) for r in rows}
    taxonomy = ontology.taxonomy()[0]
    concepts: set[str] = set()
    for c in drawn.zero_shot_classes:
        class_id = view.classes[c]
        concepts |= {class_id, *nx.descendants(taxonomy, class_id)}
    for concept_id in concepts:
        if concept_id in ontology.concepts:
            names |= {normalise_name(n) for n in ontology.concepts[concept_id].names}
    counts = {"validation_names": len(drawn.validation), "test_names": len(drawn.test),
              "zero_shot_names": len(drawn.zero_shot), "zero_shot_classes": len(drawn.zero_shot_classes),
              "zero_shot_concepts": len(concepts), "held_out_names": len(names)}
    return HeldOut(level, split, names, concepts, counts)


@dataclass
class HeldOutNames:
    """Names kept out of every pair whatever level they belong to (``--exclude-names FILE``).

    For protocols that are not a level's split: the queries of ICD-10-CM's leaf-to-parent
    mapping, a hospital's own test terms. Only names count; no concept is held out.
    """

    label: str
    names: set[str]  # normalised
    concepts: frozenset = frozenset()
    hashes: frozenset = frozenset()  # sha256 of normalised names: texts a file must not show (development data)

    def leaks(self, pair: Pair) -> bool:
        """Whether ``pair`` mentions one of the names (given as text or as the hash of its normalised form)."""
        for text in (pair.anchor, pair.positive, *pair.names):
            name = normalise_name(text)
            if name in self.names or (self.hashes and name_hash(name) in self.hashes):
                return True
        return False

    def record(self) -> dict:
        """What was held out, for ``pretrain.json`` (``excluded.names``)."""
        return {"names_from": self.label, "held_out_names": len(self.names) + len(self.hashes)}


HASH_PREFIX = "sha256:"


def name_hash(name: str) -> str:
    """``sha256:<hex>`` of an already normalised name: how an exclusion file lists a text it must not show.

    >>> name_hash("seizure")[:19]
    'sha256:4b879e9f69bb'
    """
    return HASH_PREFIX + hashlib.sha256(name.encode("utf-8")).hexdigest()


MAX_NAMES_FILE_BYTES = 64 * 1024 * 1024


def held_out_names(path: str | Path) -> HeldOutNames:
    """The names of a UTF-8 text file, one per line (blank lines skipped), to keep out of every pair.

    A line ``sha256:<hex>`` is a name given by the hash of its normalised form (:func:`name_hash`):
    how a shipped exclusion file keeps development texts out of training without showing them.

    Raises
    ------
    BiovizError
        Missing, too large, or not UTF-8 text.
    """
    path = Path(path)
    try:
        if path.stat().st_size > MAX_NAMES_FILE_BYTES:
            raise BiovizError(f"--exclude-names {path}: larger than {MAX_NAMES_FILE_BYTES // 2**20} MiB")
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise BiovizError(f"--exclude-names {path}: no such file") from None
    except (OSError, UnicodeDecodeError):
        raise BiovizError(f"--exclude-names {path}: not a UTF-8 text file of names, one per line") from None
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    # a development file's texts are listed by hash: kept out of training without being shipped
    hashes = frozenset(line.lower() for line in lines if line.lower().startswith(HASH_PREFIX))
    names = {normalise_name(line) for line in lines if not line.lower().startswith(HASH_PREFIX)}
    return HeldOutNames(path.name, names, hashes=hashes)


def exclude(pairs: list[Pair], held: list[HeldOut]) -> tuple[list[Pair], dict]:
    """``pairs`` without those that leak any level's held-out data, and the count dropped per objective."""
    if not held:
        return pairs, {}
    kept, dropped = [], {}
    for pair in pairs:
        if any(h.leaks(pair) for h in held):
            dropped[pair.objective] = dropped.get(pair.objective, 0) + 1
        else:
            kept.append(pair)
    return kept, dropped
