"""What a training run reads: the level view, its split, and the input model's vectors.

Also the checks of a configuration that need the machine or the data (:func:`check_feasible`):
:func:`trainer.config.validate` is pure, so whatever loads a model or a source is here.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from bioviz.errors import BiovizError, ModelError, SplitError
from bioviz.models.model_spec import PRESET_MODELS, ModelSpec
from bioviz.models.registry import load_encoder, model_dimension
from bioviz.models.runs import is_run_dir
from bioviz.models.encoding_session import EncodingSession
from bioviz.models.vectors_coverage import load_level, with_coverage
from bioviz.ontology import LevelSpec, Ontology, Split
from bioviz.ontology.levels import LevelView
from bioviz.ontology.sources import BUNDLED
from trainer.config import TrainConfig

logger = logging.getLogger(__name__)


def check_models(config: TrainConfig) -> ModelSpec:
    """Refuse a base or ``init`` model that is missing or cannot be trained on, and an absent CUDA.

    Cheap (reads configuration files, loads no weights). The config keeps its models as text
    (``run.json`` writes them so); they are parsed here, after argparse and :func:`validate`,
    so a bad one is one ``error`` event in the job's progress file like any other bad setting.

    Returns
    -------
    ModelSpec
        The input model (the ``init`` run, else the base), parsed.

    Raises
    ------
    BiovizError
        With a one-line reason.
    """
    if config.device == "cuda":
        import torch

        if not torch.cuda.is_available():
            raise BiovizError("device cuda requested but no CUDA GPU is available (use --device auto or cpu)")
    ref = ModelSpec.parse(config.base)  # raises ModelError with a one-line reason
    if ref.kind == "char-tfidf" and config.init is None:
        raise ModelError("char-tfidf cannot be a training base: a run must be a sentence-transformers "
                         "model (use minilm, a model directory or a hub id)")
    if ref.kind in ("bundled", "directory", "run") and ref.path is not None and not Path(ref.path).is_dir():
        raise ModelError(f"base model {config.base} not found")
    if ref.kind == "vectors" and (config.finetune or config.encoder == "definitions"):
        raise ModelError(f"{ref.label} is a vectors file: a head trains on its fixed vectors, but there is no "
                         "transformer to fine-tune (drop --finetune)")
    if config.init is not None and not is_run_dir(config.init):
        raise ModelError(f"--init {config.init} is not a complete trained run (no run.json)")
    return ModelSpec.parse(config.init) if config.init is not None else ref


def training_view(level: LevelSpec, input_model: ModelSpec, ontology: Ontology | None = None) -> LevelView:
    """The level a run trains on: cut to the names a vectors file (the input, or its input's) has vectors for.

    The views cut the level the same way for the run (:func:`bioviz.models.vectors_coverage.vectors_models`
    follows its input chain), so the run's split is drawn on the same names there.
    """
    return load_level(with_coverage(level, [input_model]), ontology)


def check_split_feasible(sizes, shots: int | None, test_per_class: int) -> None:
    """Refuse ``shots`` that (almost) no class can provide.

    Parameters
    ----------
    sizes : sequence of int
        Names per class of the level view.
    shots : int or None
    test_per_class : int

    Raises
    ------
    SplitError
        When fewer than two classes hold ``test_per_class + shots + 1`` names (the shots,
        a test name and at least one validation name), since nothing can be learnt.
    """
    if shots is None:
        return
    need = test_per_class + shots + 1
    able = sum(1 for s in sizes if s >= need)
    if able < 2:
        raise SplitError(
            f"shots {shots} is larger than the classes allow: {able} of {len(sizes)} classes have the "
            f"{need} names needed (largest class: {max(sizes) if len(sizes) else 0} names)"
        )


def check_view(config: TrainConfig, view: LevelView, input_model: ModelSpec) -> None:
    """Refuse a config the level view or the input model's width cannot serve.

    The shots must fit the classes (:func:`check_split_feasible`), and an identity start
    needs a hidden layer at least twice the input model's dimension (read from its files).

    Parameters
    ----------
    config : TrainConfig
    view : LevelView
    input_model : ModelSpec
        The model whose vectors the encoder reads (:func:`check_models`).

    Raises
    ------
    BiovizError
        With a one-line reason.
    """
    check_split_feasible(view.class_sizes(), config.shots, config.test_per_class)
    if config.identity_start:
        dim = model_dimension(input_model)
        if config.hidden < 2 * dim:
            raise BiovizError(f"an identity start needs hidden >= 2 x {dim} = {2 * dim} for the "
                              f"{dim}-dimensional vectors of {config.input_model} (got {config.hidden})")


# Config fields that may name a file or directory, and the names each accepts instead.
PATH_FIELDS = {"source": BUNDLED, "base": PRESET_MODELS, "init": ()}


def absolute_paths(values: Mapping, cwd: str | Path | None = None) -> dict:
    """Training options with relative paths among source, base and init made absolute.

    A job is submitted in one directory and runs in another: a relative path that exists
    from ``cwd`` (default: the current directory) becomes absolute, so the trainer reads the
    file that was validated. Names (``icd10``, ``minilm``, a hub id that is not a local
    folder) and paths that do not exist here stay as they are (validation names them).

    Parameters
    ----------
    values : mapping
        Options, as in a job's config (``source``, ``base``, ``init`` ...).
    cwd : path-like, optional
        The directory the paths are relative to.

    Returns
    -------
    dict
        A copy; the other options untouched.
    """
    out = dict(values)
    here = Path(cwd) if cwd is not None else Path.cwd()
    for name, names in PATH_FIELDS.items():
        value = out.get(name)
        if not isinstance(value, str) or not value.strip() or value in names:
            continue
        path = Path(value).expanduser()
        if path.is_absolute():
            out[name] = str(path)
        elif (here / path).exists():
            out[name] = os.path.normpath(here / path)
    return out


def check_feasible(config: TrainConfig) -> None:
    """Everything :func:`trainer.config.validate` cannot know: the models, the device, the data.

    Loads the source and cuts the level (seconds for large sources; cached after the first
    call). The job queue calls it before a job is created, so no job is queued in vain.

    Parameters
    ----------
    config : TrainConfig
        A validated configuration.

    Raises
    ------
    BiovizError
        With a one-line reason (missing model or source, level too deep, shots larger than
        the classes allow, an identity start wider than the hidden layer allows).
    """
    input_model = check_models(config)  # the models first: cheaper than loading the source
    check_view(config, training_view(config.level, input_model), input_model)


@dataclass
class TrainingData:
    """Inputs of one run.

    Attributes
    ----------
    ontology : Ontology
    view : LevelView
    split : Split
    vectors : numpy.ndarray
        ``(len(view.names), dim)`` L2-normalised input vectors (base model or ``init`` run).
    input_label, input_fingerprint : str
        Readable name and content hash of the input model.
    embedding_s : float
        Seconds spent obtaining ``vectors`` (cache hits included).
    input_model : ModelSpec or None
        The input model, parsed (what the exported run's first modules are copied from).
    """

    ontology: Ontology
    view: LevelView
    split: Split
    vectors: np.ndarray
    input_label: str
    input_fingerprint: str
    embedding_s: float
    input_model: ModelSpec | None = None

    @property
    def dim(self) -> int:
        """Dimensionality of the input vectors."""
        return int(self.vectors.shape[1])

    def parents(self) -> dict[str, list[str]]:
        """``concept -> parent ids`` for the view's concepts (HiPrBERT categories)."""
        if self.ontology is None:  # synthetic data (benchmarks): no hierarchy beyond the classes
            return {}
        graph = self.ontology.graph
        return {c: sorted(graph.predecessors(c)) for c in set(self.view.name_concepts) if c in graph}


def prepare(config: TrainConfig, progress=None, *, report=None, input_model: ModelSpec | None = None) -> TrainingData:
    """Load the source, cut the level, draw the split and embed every name of the view.

    The level is checked (:func:`check_view`) before any name is embedded.

    Parameters
    ----------
    config : TrainConfig
        A validated configuration.
    progress : callable, optional
        ``progress(done, total)`` while names are embedded.
    report : callable, optional
        ``report(EncodingProgress)`` before each ``progress`` of a level encoded under a claim:
        whether another process encodes it (and this job waits), with that encoding's time left.
    input_model : ModelSpec, optional
        The input model as :func:`check_models` parsed it (parsed here when not given).
    """
    input_model = input_model or ModelSpec.parse(config.input_model)
    level = config.level
    ontology = level.ontology()
    view = training_view(level, input_model, ontology)
    check_view(config, view, input_model)
    split = config.split.make(view)
    started = time.perf_counter()
    # torch whatever the default backend: a head run's vectors come from its input model in torch
    # (runs keep torch, bioviz.models.quantized.default_int8), so its head is trained on those
    encoder = load_encoder(input_model, backend="torch")
    # a level the warm-up or a page is encoding already is waited for, not encoded a second time
    session = EncodingSession.of(encoder, view.names, owner="a training job")
    vectors, _ = session.encode(progress=progress, report=report)
    embedding_s = time.perf_counter() - started
    logger.info("embedded %d names with %s in %.1fs", len(view.names), encoder.label, embedding_s)
    return TrainingData(ontology, view, split, np.ascontiguousarray(vectors, dtype=np.float32),
                        encoder.label, encoder.fingerprint, embedding_s, input_model)
