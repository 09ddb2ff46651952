"""Weight interpolation of two encoders of one architecture (WiSE-FT).

Wortsman et al. (2022), *Robust fine-tuning of zero-shot models*: the weights
``θ = (1 - α)·θ_base + α·θ_tuned`` of a model and its fine-tuned descendant keep most of the
fine-tuning's in-domain gain and most of the base's robustness on data neither was tuned on.
For bioviz that is the general-domain all-MiniLM-L6-v2 and a model pretrained from it on the
ontologies' names (docs/models.md): α = 0 is the base, α = 1 the tuned model.

``python -m bioviz.models.merge BASE TUNED --alpha 0.5 --out DIR`` writes a loadable
sentence-transformers directory: the tuned model's files (modules, tokenizer, pooling, its
``pretrain.json``/``pretrain-terms.json``: the merged model has seen every text the tuned one
saw, so the Evaluation page's † mark still applies) with the interpolated weights, and
``merge.json`` recording the ingredients by content.

The merge is written into a folder of its own making (``tempfile.mkdtemp`` beside ``--out``,
its owner recorded as a run export's is, so a killed merge is swept like one) and renamed onto
``--out`` at the end: it deletes nothing it did not make, and any failure removes that folder.
An ``--out`` that is a file, a symbolic link or a non-empty folder is refused in one line
before any work (issue 41).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from bioviz.errors import BiovizError
from bioviz.models.model_files import directory_fingerprint
from bioviz.models.model_spec import ModelSpec
from bioviz.models.run_partials import PARTIAL_MARK, drop_owner, record_owner
from bioviz.paths import current_umask

WEIGHTS_FILE = "model.safetensors"
MERGE_FILE = "merge.json"
_DTYPES = ("float32", "float16")


@dataclass(frozen=True)
class MergeRecord:
    """What a merged directory was made of (``merge.json``).

    Attributes
    ----------
    base, tuned : str
        The two MODEL texts as given.
    base_fingerprint, tuned_fingerprint : str
        Their directories' content fingerprints (:func:`~bioviz.models.model_files.directory_fingerprint`).
    alpha : float
        The tuned model's share of every weight.
    dtype : str
        How the weights are stored (``float16`` halves the file; loaded as float32).
    """

    base: str
    tuned: str
    base_fingerprint: str
    tuned_fingerprint: str
    alpha: float
    dtype: str


def _weights(directory: Path) -> dict[str, np.ndarray]:
    from safetensors.numpy import load_file  # here: only merging needs it, and it is quick to import

    path = directory / WEIGHTS_FILE
    if not path.is_file():
        raise BiovizError(f"{directory} has no {WEIGHTS_FILE}: only safetensors models can be merged")
    return load_file(str(path))


def interpolate(base: dict[str, np.ndarray], tuned: dict[str, np.ndarray], *, alpha: float) -> dict[str, np.ndarray]:
    """``(1 - alpha)·base + alpha·tuned`` for every tensor, in float32.

    Parameters
    ----------
    base, tuned : dict of str to ndarray
        State dicts with the same floating-point tensors (names and shapes); an integer
        buffer only one of them saved is kept as the tuned model has it.
    alpha : float
        In [0, 1].

    Returns
    -------
    dict of str to ndarray

    Raises
    ------
    BiovizError
        The two do not share an architecture (names or shapes differ) or ``alpha`` is out of range.
    """
    if not 0.0 <= alpha <= 1.0:
        raise BiovizError(f"--alpha must be within [0, 1], not {alpha}")
    # Integer buffers (BERT's position_ids) are saved by some transformers versions only: not weights.
    differ = sorted(n for n in set(base) ^ set(tuned) if np.issubdtype((base.get(n, tuned.get(n))).dtype, np.floating))
    if differ:
        raise BiovizError(f"the two models do not share an architecture (tensors {', '.join(differ[:3])} differ)")
    merged = {}
    for name, t in tuned.items():
        if name not in base:
            merged[name] = t
            continue
        b = base[name]
        if b.shape != t.shape:
            raise BiovizError(f"the two models do not share an architecture ({name}: {b.shape} vs {t.shape})")
        if not np.issubdtype(b.dtype, np.floating):  # position ids and other integer buffers: the tuned one's
            merged[name] = t
            continue
        merged[name] = ((1.0 - alpha) * b.astype(np.float32) + alpha * t.astype(np.float32)).astype(np.float32)
    return merged


def _save_weights(weights: dict[str, np.ndarray], path: Path, dtype: str) -> None:
    """Write merged weights as safetensors, floating tensors in ``dtype`` (integer buffers as they are)."""
    from safetensors.numpy import save_file  # here: only merging needs it

    save_file({k: v.astype(dtype) if np.issubdtype(v.dtype, np.floating) else v for k, v in weights.items()},
              str(path), metadata={"format": "pt"})


def merge_models(base: ModelSpec, tuned: ModelSpec, *, alpha: float, out: Path,
                 dtype: str = "float16") -> MergeRecord:
    """Write the interpolation of ``base`` and ``tuned`` as a sentence-transformers directory.

    Parameters
    ----------
    base, tuned : ModelSpec
        Local models (presets, directories or runs' exported models) of one architecture.
    alpha : float
        The tuned model's share, in [0, 1].
    out : Path
        A new or empty directory.
    dtype : {"float16", "float32"}
        How the weights are stored.

    Returns
    -------
    MergeRecord

    Raises
    ------
    BiovizError
        A model is not local or has no weights (a vectors file, char-tfidf), the architectures
        differ, or ``out`` is a file, a symbolic link or a non-empty folder (:func:`check_out`).
    OSError
        The disk refused the write; the merge's own folder is removed, nothing else touched.
    """
    if dtype not in _DTYPES:
        raise BiovizError(f"--dtype must be one of {', '.join(_DTYPES)}")
    for model in (base, tuned):
        check_mergeable(model)
    out = Path(out)
    check_out(out)
    base_dir, tuned_dir = base.files(), tuned.files()
    merged = interpolate(_weights(base_dir), _weights(tuned_dir), alpha=alpha)
    record = MergeRecord(base=base.spec, tuned=tuned.spec, base_fingerprint=base.fingerprint(),
                         tuned_fingerprint=tuned.fingerprint(), alpha=float(alpha), dtype=dtype)
    # A folder of its own making, beside out (one file system for the rename): never one a user had.
    own = Path(tempfile.mkdtemp(prefix=f".{out.name}{PARTIAL_MARK}merge-", dir=out.parent))
    try:
        record_owner(own)  # first: a killed merge is swept like a killed run export (run_partials)
        # Why the tuned model's files: its modules (Normalize), tokenizer and card describe what the merge is.
        shutil.copytree(tuned_dir, own, dirs_exist_ok=True,
                        ignore=shutil.ignore_patterns(WEIGHTS_FILE, MERGE_FILE, ".*"))
        _save_weights(merged, own / WEIGHTS_FILE, dtype)
        (own / MERGE_FILE).write_text(json.dumps(asdict(record), indent=1) + "\n", encoding="utf-8")
        os.chmod(own, 0o777 & ~current_umask())  # mkdtemp's folder is private (0o700); a model folder is not
        # rename(2) replaces an empty folder and refuses a non-empty one: all or nothing, and a
        # folder filled since the check is never overwritten.
        os.rename(own, out)
    except BaseException:
        shutil.rmtree(own, ignore_errors=True)
        raise
    drop_owner(out)
    return record


def check_mergeable(model: ModelSpec) -> None:
    """Refuse a model with no weights to merge, naming what it is.

    Raises
    ------
    BiovizError
        A vectors file or char-tfidf.
    """
    if model.kind == "vectors":
        raise BiovizError(f"{model.path.name} is a vectors file: only trained runs/models with weights can be merged")
    if not model.is_neural:
        raise BiovizError("char-tfidf has no weights to merge")


def check_out(out: Path) -> None:
    """Refuse an ``--out`` the merge could not become without touching what a user has there.

    Raises
    ------
    BiovizError
        ``out`` is a symbolic link, a file, a non-empty folder, or its folder does not exist.
    """
    if out.is_symlink():
        raise BiovizError(f"--out {out} is a symbolic link: give a new directory")
    if out.exists() and not out.is_dir():
        raise BiovizError(f"--out {out} is a file: give a new directory")
    if out.is_dir() and any(out.iterdir()):
        raise BiovizError(f"{out} is not empty: give a new directory")
    if not out.parent.is_dir():
        raise BiovizError(f"--out {out}: its folder {out.parent} does not exist")


def merge_into(base: ModelSpec, directory: Path, *, alpha: float) -> MergeRecord:
    """Replace the weights of the model in ``directory`` by their interpolation with ``base``'s.

    What ``python -m trainer pretrain --interpolate ALPHA`` publishes: the trained model's
    directory, as saved, with ``(1 - alpha)·base + alpha·trained`` as its weights (float32;
    written beside and renamed over, so the file is never half written). No ``merge.json``
    is written: the run's ``pretrain.json`` records the ingredients.

    Parameters
    ----------
    base : ModelSpec
        A local model of the same architecture (a preset, a directory, a cached hub id).
    directory : Path
        A sentence-transformers directory with a ``model.safetensors``.
    alpha : float
        The trained model's share, in [0, 1].

    Returns
    -------
    MergeRecord
        ``tuned`` is ``directory`` and its fingerprint the one before the merge.

    Raises
    ------
    BiovizError
        As :func:`merge_models`.
    """
    check_mergeable(base)
    directory = Path(directory)
    tuned_fingerprint = directory_fingerprint(directory)
    merged = interpolate(_weights(base.files()), _weights(directory), alpha=alpha)
    partial = directory / (WEIGHTS_FILE + ".partial")
    _save_weights(merged, partial, "float32")
    partial.replace(directory / WEIGHTS_FILE)
    return MergeRecord(base=base.spec, tuned=str(directory), base_fingerprint=base.fingerprint(),
                       tuned_fingerprint=tuned_fingerprint, alpha=float(alpha), dtype="float32")


def main(argv: list[str] | None = None) -> int:
    """``python -m bioviz.models.merge BASE TUNED --alpha A --out DIR``."""
    p = argparse.ArgumentParser(prog="python -m bioviz.models.merge", description=__doc__.split("\n\n")[0])
    p.add_argument("base", help="MODEL at alpha = 0 (e.g. minilm)")
    p.add_argument("tuned", help="MODEL at alpha = 1 (e.g. a pretraining run's model directory)")
    p.add_argument("--alpha", type=float, required=True, help="the tuned model's share of each weight, in [0, 1]")
    p.add_argument("--out", required=True, help="new directory for the merged model")
    p.add_argument("--dtype", default="float16", choices=_DTYPES, help="stored precision (float16: half the size)")
    args = p.parse_args(argv)
    try:
        record = merge_models(ModelSpec.parse(args.base), ModelSpec.parse(args.tuned), alpha=args.alpha,
                              out=Path(args.out), dtype=args.dtype)
    except BiovizError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except OSError as e:  # the disk refused the write (full, read-only): one line, the merge's folder removed
        print(f"error: cannot write the merged model: {e.strerror or e} ({e.filename or args.out})", file=sys.stderr)
        return 2
    print(json.dumps(asdict(record)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
