"""One evaluation result: a model's figures on one task, as a frozen value with its stored form.

:class:`EvalResult` is what :func:`bioviz.evaluation.run.evaluate` and its siblings return and
what the tables, paired differences, seed groups and pretraining marks read. On disk (the
result cache, ``<run>/.eval.json``) and in ``python -m bioviz eval --json`` it is the dict of
:meth:`EvalResult.to_dict`; :meth:`EvalResult.from_dict` reads that form back, including
results stored before this class existed (the same keys).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace

# Written only when set: ranking's per-class mAP and normalisation's identity (its ranking and gold file).
_OPTIONAL = ("per_class", "base_model", "ranking", "gold", "level")


@dataclass(frozen=True, kw_only=True)
class EvalResult:
    """A model's figures on one task.

    Attributes
    ----------
    model : str
        The model's readable label as it is now (a run's name and short id; for mention
        normalisation with its ranking: ``minilm · hybrid w=0.3``).
    task : str
        The task key (``ranking``, ``synonym``, ..., ``normalisation``) or a benchmark's label.
    metrics : dict
        ``figure -> value`` (``map``, ``test.acc1``, ``spearman``, ``mean_auc``, ``0-2``, ...;
        None where nothing was scored).
    ci : dict
        ``figure -> [low, high]``: the 95% bootstrap interval of each figure that has one.
    sizes : dict
        Sample sizes: ``queries``, ``skipped``, ``references`` (per part with a prefix),
        ``pairs.dK``, benchmark ``pairs`` and ``covered``.
    model_spec : str or None
        The MODEL string evaluated.
    run_id : str or None
        A trained run's id.
    fingerprint : str or None
        The model's fingerprint (part of the cache key).
    data : dict
        What was evaluated: the cache key's data (settings, view, split, benchmark digest, ...).
    per_item : dict
        One value per query or pair in a fixed order (``ap``/``rank``, ``test.ap``,
        ``similarity``/``distance``, ``cosine``/``human``): what paired differences resample.
    per_class : dict or None
        Ranking: mAP of each class.
    seconds : float or None
        Time to compute it (not counting loading the model).
    cached : bool
        Served from the result cache.
    base_model, ranking, gold, level : str or None
        Mention normalisation: the model's own label, the ranking's label, the gold file and the
        level's title.
    """

    # Declared in the order of the stored keys (kw_only: none is positional).
    model: str
    base_model: str | None = None
    model_spec: str | None = None
    ranking: str | None = None
    run_id: str | None = None
    fingerprint: str | None = None
    task: str
    metrics: dict
    ci: dict = field(default_factory=dict)
    sizes: dict = field(default_factory=dict)
    data: dict = field(default_factory=dict)
    gold: str | None = None
    level: str | None = None
    seconds: float | None = None
    cached: bool = False
    per_item: dict = field(default_factory=dict)
    per_class: dict | None = None

    def to_dict(self) -> dict:
        """The stored and ``--json`` form (keys in the order results have always had).

        Examples
        --------
        >>> EvalResult(model="m", task="ranking", metrics={"map": 0.5}).to_dict()["metrics"]
        {'map': 0.5}
        """
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        return {key: value for key, value in out.items() if key not in _OPTIONAL or value is not None}

    @classmethod
    def from_dict(cls, value: dict) -> EvalResult:
        """Read :meth:`to_dict`'s form back; unknown keys are ignored, missing ones take their defaults.

        Examples
        --------
        >>> stored = {"model": "m", "task": "MayoSRS", "metrics": {"spearman": 0.4}, "cached": True}
        >>> EvalResult.from_dict(stored).cached, EvalResult.from_dict(stored).per_item
        (True, {})
        """
        known = {f.name for f in fields(cls)}
        return cls(**{key: item for key, item in value.items() if key in known})

    def relabelled(self, model: str, run_id: str | None, *, cached: bool) -> EvalResult:
        """The same figures under a model's current label (a run may have been renamed since it was stored)."""
        return replace(self, model=model, run_id=run_id, cached=cached)
