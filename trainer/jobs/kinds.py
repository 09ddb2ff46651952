"""The kinds of job the queue runs: a training run (``train``) and a pretraining (``pretrain``).

A job's kind is decided once, here, from its config (:func:`kind_of`: ``"kind": "pretrain"``
marks a pretraining job, any other config is a training run's, as in every job file written
so far). The queue, the runner, the Ray executor, the job table and the Train page ask the
kind what to do instead of looking into the config themselves:

- :meth:`JobKind.validate`: the config a submit stores (paths made absolute, defaults filled);
- :attr:`JobKind.module`: the program the runner starts (``python -m MODULE train ...``);
- :meth:`JobKind.describe`, :meth:`JobKind.start_text`, :meth:`JobKind.settings_caption`:
  how the job table and the page describe it;
- :attr:`JobKind.publishes`: the run it publishes (a run directory of that ``kind``);
- :meth:`JobKind.typed`: the config as its dataclass (:class:`~trainer.config.TrainConfig`,
  :class:`~trainer.pretrain.config.PretrainConfig`), read leniently so that old job files open.

Every job's runner imports this module: the configs' modules (the ontology stack, scipy) are
imported inside the methods that need them.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from trainer.jobs import pretrain_job
from trainer.jobs.store import SUCCEEDED

# The settings named under a training run's curves, by their human titles.
CURVE_CAPTION_FIELDS = ("lr", "batch_size", "epochs", "patience", "hidden", "margin", "seed")


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


class JobKind:
    """What the job system needs to know about one kind of job (see the module docstring).

    Attributes
    ----------
    name : str
        ``train`` or ``pretrain``.
    module : str or None
        The program the runner starts; None: the job's own (its row's ``module``, ``trainer``).
    publishes : str
        The ``kind`` of the run a successful job publishes.
    resumable : bool
        An unfinished job can be continued by a new one (:meth:`trainer.jobs.queue.Worker.resume`).
    path_fields : tuple of str
        Config fields naming files the Ray executor ships with the job.
    """

    name = ""
    module: str | None = None
    publishes = ""
    resumable = False
    path_fields: tuple[str, ...] = ()

    def typed(self, config: Mapping):
        """The job's config as its dataclass; unknown fields left out, missing ones defaulted."""
        raise NotImplementedError

    def prepare(self, config: dict) -> dict:
        """The submitted config before validation (paths made absolute where the kind needs it)."""
        return dict(config)

    def validate(self, config: dict) -> dict:
        """The config a job stores: validated, every field filled in (BiovizError, one line, when refused)."""
        raise NotImplementedError

    def module_of(self, job) -> str:
        """The module the runner starts for ``job`` (a :class:`~trainer.jobs.store.Job`)."""
        return self.module or job.module

    def describe(self, config: Mapping) -> str:
        """One line for tables and titles."""
        raise NotImplementedError

    def input_model(self, config: Mapping) -> str:
        """The MODEL the job starts from (what *Open in views* compares its run with)."""
        return str(self.typed(config).base)

    def start_text(self, config: Mapping) -> str:
        """The job table's *base* column."""
        return self.input_model(config)

    def settings_caption(self, config: Mapping) -> str | None:
        """The settings named under the job's curves; None when there is nothing to say."""
        raise NotImplementedError

    def input_paths(self, config: Mapping) -> dict[str, Path]:
        """``field -> path`` of the absolute paths among :attr:`path_fields` that exist here."""
        typed = self.typed(config)
        values = {name: getattr(typed, name) for name in self.path_fields}
        return {name: Path(v) for name, v in values.items()
                if isinstance(v, str) and Path(v).is_absolute() and Path(v).exists()}

    def can_resume(self, job) -> bool:
        """Whether the finished, unsuccessful ``job`` left something a new job can continue."""
        return False

    def resume_request(self, job) -> dict:
        """The config of the job that continues ``job``."""
        raise NotImplementedError(f"{self.name} jobs do not resume")


class TrainKind(JobKind):
    """A training run: ``python -m trainer train --config FILE`` (:class:`~trainer.config.TrainConfig`)."""

    name = "train"
    publishes = "train"
    path_fields = ("source", "base", "init")

    def typed(self, config: Mapping):
        from trainer.config import TrainConfig  # scipy, the ontology stack: when a config is read, not per runner
        from trainer.options import from_stored  # beside the config it reads (kept together for clarity)

        return from_stored(TrainConfig, config, source="")

    def prepare(self, config: dict) -> dict:
        # Paths are the submitter's: the trainer runs elsewhere.
        from trainer.data import absolute_paths  # scipy, the hub client, the ontology stack: a submit's only

        return absolute_paths(config)

    def validate(self, config: dict) -> dict:
        from trainer.config import TrainConfig, validate  # scipy and the ontology stack: a submit's only
        from trainer.data import check_feasible  # scipy, the hub client, the ontology stack: a submit's only

        validated = validate(TrainConfig.from_dict(config))
        check_feasible(validated)
        return {name: value for name, value in validated.to_dict().items() if name != "device"}

    def describe(self, config: Mapping) -> str:
        """``residual on icd10 d1 · 15 shots · base minilm``."""
        from bioviz.models.runs import shots_text  # the ontology stack (networkx): when a table is drawn

        c = self.typed(config)
        start = f"init {Path(str(c.init)).name}" if c.init else f"base {c.base}"
        return f"{c.encoder} on {c.level.label} · {shots_text(c.shots)} · {start}"

    def input_model(self, config: Mapping) -> str:
        return str(self.typed(config).input_model)

    def start_text(self, config: Mapping) -> str:
        c = self.typed(config)
        return f"init {Path(str(c.init)).name}" if c.init else str(c.base)

    def settings_caption(self, config: Mapping) -> str | None:
        from trainer.config import OPTIONS  # the ontology stack, as in typed()

        c = self.typed(config)
        values = {name: getattr(c, name) for name in CURVE_CAPTION_FIELDS}
        return " · ".join(f"{OPTIONS[k].title.lower()} {v:g}" for k, v in values.items() if _number(v)) or None


class PretrainKind(JobKind):
    """A pretraining: :mod:`trainer.jobs.pretrain_job` (:class:`~trainer.pretrain.config.PretrainConfig`)."""

    name = pretrain_job.PRETRAIN_KIND
    module = pretrain_job.MODULE
    publishes = pretrain_job.PRETRAIN_KIND
    resumable = True
    # The sources stay where they are: on Ray, a pretraining reads bundled sources or a pair file there.
    path_fields = ("base",)

    def typed(self, config: Mapping):
        from trainer.pretrain.config import PretrainConfig  # the ontology stack, as TrainKind.typed
        from trainer.options import from_stored  # beside the config it reads (kept together for clarity)

        return from_stored(PretrainConfig, config, sources=[], objectives=[])

    def validate(self, config: dict) -> dict:
        return pretrain_job.job_config(config)

    def describe(self, config: Mapping) -> str:
        """``pretrain on hpo, mini.obo · synonyms+hierarchy · 20k pairs · base minilm``."""
        return pretrain_job.describe(self.typed(config), resumed=bool(pretrain_job.resumed_from(config)))

    def start_text(self, config: Mapping) -> str:
        return str(self.typed(config).base)

    def settings_caption(self, config: Mapping) -> str | None:
        c = self.typed(config)
        if not _number(c.lr):
            return None
        return f"batch {c.batch_size} · lr {c.lr:g} · {c.epochs} epoch(s) · seed {c.seed}"

    def can_resume(self, job) -> bool:
        return job.finished and job.status != SUCCEEDED and pretrain_job.resumable(job.config_path)

    def resume_request(self, job) -> dict:
        return pretrain_job.resume_request(job.config, job.config_path)


TRAIN = TrainKind()
PRETRAIN = PretrainKind()
KINDS = {kind.name: kind for kind in (TRAIN, PRETRAIN)}


def kind_of(config) -> JobKind:
    """The kind of the job whose config is ``config`` (a training run's unless it says ``pretrain``).

    >>> kind_of({"kind": "pretrain", "sources": ["hpo"]}).name, kind_of({"source": "icd10"}).name
    ('pretrain', 'train')
    """
    return KINDS.get(pretrain_job.kind_name(config), TRAIN)
