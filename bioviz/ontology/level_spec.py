"""What names a concept level: one frozen value that every layer passes around.

A :class:`LevelSpec` is the app's selection, part of every cache key (it is hashable), the
level a training config trains on and what a command line's ``SOURCE --root --depth``
options describe. :meth:`LevelSpec.load` is the one place that decides between a level view
and a synonym-set view; :meth:`LevelSpec.to_query` / :meth:`LevelSpec.from_query` are its
URL form, with the parameter names links have always used.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from bioviz.ontology.levels import LevelView, level_view, synonym_view
from bioviz.ontology.model import Ontology
from bioviz.ontology.sources import load_source

# Loader options a source may take (today: a UMLS release's), as URL parameters.
SOURCE_OPTION_KEYS = ("sab", "semantic_group", "hierarchy")
TRUE_WORDS = ("1", "true", "yes", "on")


def _options_tuple(options) -> tuple[tuple[str, str], ...]:
    """Loader options as sorted ``(name, value)`` pairs, empty values left out."""
    items = options.items() if isinstance(options, Mapping) else (options or ())
    return tuple(sorted((str(k), str(v)) for k, v in items if v not in (None, "")))


@dataclass(frozen=True)
class LevelSpec:
    """A concept level of a source: what :func:`level_view` / :func:`synonym_view` are asked for.

    Attributes
    ----------
    source : str
        A bundled source name (``icd10``, ``icd10cm``, ``hpo``) or a path (OBO file, table,
        UMLS ``META`` directory).
    root : str or None
        Root concept id; None (or ``""``) is the source's default root.
    depth : int
        Levels below the root whose concepts are the classes (ignored for synonym sets).
    synonyms : bool
        Synonym-set mode: every concept under the root is its own class.
    keep_ambiguous : bool
        Keep names found under several classes instead of dropping them.
    options : tuple of (str, str)
        Loader options (UMLS ``sab``, ``semantic_group``, ``hierarchy``) as sorted pairs;
        a dict is accepted and normalised.
    covered_by : tuple of str
        MODEL texts of vectors files whose names the level keeps (the others have no vector
        and are left out). Not part of the URL (the links' models say it); applied by
        :func:`bioviz.models.vectors_coverage.load_level`, since this layer reads no models.

    Examples
    --------
    >>> spec = LevelSpec("hpo", root="HP:0000118", depth=2)
    >>> spec.to_query()
    {'source': 'hpo', 'depth': '2', 'root': 'HP:0000118'}
    >>> LevelSpec.from_query(spec.to_query()) == spec
    True
    >>> spec.label
    'hpo under HP:0000118 d2'
    """

    source: str
    root: str | None = None
    depth: int = 1
    synonyms: bool = False
    keep_ambiguous: bool = False
    options: tuple[tuple[str, str], ...] = ()
    covered_by: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        # Normalise so equal levels are equal values (and equal cache keys).
        set_ = object.__setattr__
        set_(self, "source", str(self.source).strip())
        set_(self, "root", (str(self.root).strip() or None) if self.root is not None else None)
        set_(self, "depth", int(self.depth))
        set_(self, "synonyms", bool(self.synonyms))
        set_(self, "keep_ambiguous", bool(self.keep_ambiguous))
        set_(self, "options", _options_tuple(self.options))
        set_(self, "covered_by", tuple(dict.fromkeys(str(m) for m in self.covered_by)))

    # -------------------------------------------------------------------------- building

    @classmethod
    def from_query(cls, params: Mapping[str, str], default_source: str = "icd10") -> "LevelSpec":
        """The level a URL's query parameters name; missing or unreadable values take defaults.

        Accepts the parameter names links have always used: ``source``, ``root``,
        ``depth``, ``synonyms`` and ``keep_ambiguous`` (``1``), and the UMLS loader options
        ``sab``, ``semantic_group`` and ``hierarchy``.
        """
        try:
            depth = max(1, int(params.get("depth", 1)))
        except (TypeError, ValueError):
            depth = 1
        options = {key: params.get(key, "") for key in SOURCE_OPTION_KEYS}
        return cls(
            source=params.get("source") or default_source,
            root=params.get("root") or None,
            depth=depth,
            synonyms=str(params.get("synonyms", "0")).lower() in TRUE_WORDS,
            keep_ambiguous=str(params.get("keep_ambiguous", "0")).lower() in TRUE_WORDS,
            options=options,
        )

    @classmethod
    def from_config(cls, fields: Mapping) -> "LevelSpec":
        """The level of a training config's flat fields (a job's config; a run's through
        :class:`bioviz.models.run_record.RunSettings`)."""
        return cls(source=fields.get("source", ""), root=fields.get("root"), depth=fields.get("depth", 1) or 1,
                   synonyms=bool(fields.get("synonyms")), keep_ambiguous=bool(fields.get("keep_ambiguous")),
                   options=fields.get("source_options") or ())

    def replace(self, **changes) -> "LevelSpec":
        """A copy with ``changes`` (e.g. another depth)."""
        return dataclasses.replace(self, **changes)

    # ------------------------------------------------------------------------ the forms

    @property
    def source_options(self) -> dict[str, str]:
        """Loader options as the keyword arguments of :func:`load_source`."""
        return dict(self.options)

    def to_query(self) -> dict[str, str]:
        """URL query parameters (only those that differ from the defaults, besides source and depth)."""
        query = {"source": self.source, "depth": str(self.depth)}
        if self.root:
            query["root"] = self.root
        if self.synonyms:
            query["synonyms"] = "1"
        if self.keep_ambiguous:
            query["keep_ambiguous"] = "1"
        query.update(self.options)
        return query

    def to_config(self) -> dict:
        """The flat fields of a training config (``source``, ``root``, ..., ``source_options``)."""
        return {"source": self.source, "root": self.root, "depth": self.depth, "synonyms": self.synonyms,
                "keep_ambiguous": self.keep_ambiguous, "source_options": self.source_options}

    @property
    def label(self) -> str:
        """``hpo under HP:0000118 d1``, ``icd10 d1`` or ``hpo synonym sets``; a path source by its file name."""
        source = Path(self.source).name if self.source else "?"
        under = f" under {self.root}" if self.root else ""
        return f"{source}{under} {'synonym sets' if self.synonyms else f'd{self.depth}'}"

    # --------------------------------------------------------------------------- loading

    def ontology(self) -> Ontology:
        """The parsed source, with its loader options (through the parsed-source cache)."""
        return load_source(self.source, **self.source_options)

    def load(self, ontology: Ontology | None = None) -> LevelView:
        """The level view (or synonym-set view) this spec names.

        Parameters
        ----------
        ontology : Ontology, optional
            The source already loaded (e.g. from a cache); loaded when omitted.

        Raises
        ------
        BiovizError
            Unknown source, unreadable file, unknown root, a level deeper than the tree.
        """
        ontology = ontology if ontology is not None else self.ontology()
        if self.synonyms:
            return synonym_view(ontology, root=self.root, keep_ambiguous=self.keep_ambiguous)
        return level_view(ontology, depth=self.depth, root=self.root, keep_ambiguous=self.keep_ambiguous)
