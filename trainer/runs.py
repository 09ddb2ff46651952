"""Writing a run directory: train, export, then ``run.json`` last, then one rename.

Everything is written into a temporary sibling of the target (``.<name>.partial-*``) and
renamed onto it at the very end, so a killed or cancelled job never leaves a directory
that looks complete (``run.json`` is the completeness marker, see :mod:`bioviz.models.runs`).
The sibling records its writer (:mod:`bioviz.models.run_partials`): one left by a killed
process is removed by the next export into the same folder, or the next listing of the runs.
Every file is flushed to the disk before the rename and the parent directory after it, so
a power loss cannot leave a complete-looking run with an empty ``run.json`` either.
Large files the run has in common with other runs (its base model's weights and tokenizer) are
hard links to one stored copy (:mod:`bioviz.models.blob_store`), not a copy per run.
"""

from __future__ import annotations

import datetime as _dt
import json
import logging
import os
import shutil
import tempfile
import time
from pathlib import Path

from bioviz.errors import BiovizError
from bioviz.models.blob_store import share_files, sweep_blobs
from bioviz.models.cached_encoding import encode_cached
from bioviz.models.encoders import HeadRunEncoder
from bioviz.models.registry import load_encoder
from bioviz.models.encoding_estimate import RateWindow
from bioviz.models.model_spec import ModelSpec
from bioviz.models.run_partials import drop_owner, record_owner, sweep_partials
from bioviz.paths import fsync_dir, fsync_tree, share_tree
from trainer.config import TrainConfig, validate
from trainer.crash_points import crash_point
from trainer.data import check_models, prepare
from trainer.events import CancelFlag, TrainResult
from trainer.export import save_fine_tuned, save_head_model
from trainer.loop import Trainer

logger = logging.getLogger(__name__)

RUN_FILE = "run.json"
SPLIT_FILE = "split.json"


def check_out_dir(out: str | Path) -> Path:
    """Refuse an output directory that already holds something.

    Raises
    ------
    BiovizError
        If ``out`` exists and is not an empty directory.
    """
    out = Path(out).expanduser()
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise BiovizError(f"output directory {out} already exists and is not empty: choose another --out")
    return out


def _round(value):
    if isinstance(value, float):
        return round(value, 6)
    if isinstance(value, dict):
        return {k: _round(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_round(v) for v in value]
    return value


def run_record(config: TrainConfig, data, result: TrainResult, *, run_id: str, export_s: float) -> dict:
    """The content of ``run.json``: config, metrics and timings."""
    split = data.split
    return _round({
        "run_id": run_id,
        "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "config": {
            **config.to_dict(),
            "base_fingerprint": data.input_fingerprint,
            "input_model": config.input_model,
            "input_label": data.input_label,
            "dim": data.dim,
            "split": {"seed": split.seed, "shots": split.shots, "test_per_class": split.test_per_class,
                      "zero_shot_classes": list(split.zero_shot_classes), "sizes": split.sizes()},
            "view": data.view.stats(),
        },
        "metrics": {
            "history": result.history,
            "best_epoch": result.best_epoch,
            "stopped_early": result.stopped_early,
            **result.metrics,
        },
        "timings": {
            "embedding_s": data.embedding_s,
            "training_s": result.training_s,
            "per_epoch_s": result.per_epoch_s,
            "export_s": export_s,
        },
        "device": result.device,
    })


def summary(record: dict, run_dir: Path) -> dict:
    """The one-line JSON summary the command line prints."""
    metrics = record["metrics"]
    out = {
        "run_dir": str(run_dir),
        "run_id": record["run_id"],
        "encoder": record["config"]["encoder"],
        "epochs": len(metrics["history"]),
        "best_epoch": metrics["best_epoch"],
        "seconds": round(record["timings"]["training_s"] + record["timings"]["embedding_s"]
                         + record["timings"]["export_s"], 2),
        "baseline": metrics["baseline"],
        "trained": metrics["trained"],
    }
    if "cca_projection" in metrics:
        out["cca_projection"] = metrics["cca_projection"]
    if "base_mix" in metrics:
        out["base_weight"] = metrics["base_mix"]["weight"]
    return out


def _split_names(data) -> dict:
    names = data.view.names
    return {part: [names[i] for i in getattr(data.split, part)]
            for part in ("train", "validation", "test", "zero_shot")}


class _EmbeddingProgress:
    """``progress(done, total)`` for embedding the names: honours a cancel, reports to callbacks.

    Embedding a large level takes minutes on a CPU; a cancel must not wait for it, and the
    job page shows how far it got. Events go out at most every ``every_s`` seconds, and at
    the end. The time left is worked out from the rate over the last half minute
    (:class:`~bioviz.models.encoding_estimate.RateWindow`): names found cached count as done
    at once and would make a whole-run rate say seconds where minutes are left.

    While another process (the warm-up, a page) encodes the level and the job waits for it,
    :meth:`encoding` hears so first: the events then count that encoding's names, say whom
    the job waits for (``waiting_for``) and carry *its* time left, not a rate of polled counts.
    """

    def __init__(self, callbacks, cancel: CancelFlag | None, progress=None, every_s: float = 1.0) -> None:
        self.callbacks, self.cancel, self.progress, self.every_s = callbacks, cancel, progress, every_s
        self.window = RateWindow(prior=None)
        self.last = float("-inf")
        self.waiting: tuple[str, float | None] | None = None  # (whom, their seconds left) while waiting

    def encoding(self, state) -> None:
        """``report(EncodingProgress)`` of :func:`~bioviz.models.shared_encoding.encode_shared`."""
        was_waiting = self.waiting is not None
        self.waiting = (state.owner, state.seconds_left) if state.waiting else None
        if was_waiting and self.waiting is None:  # this job encodes now: its own rate from here
            self.window = RateWindow(prior=None)
            self.last = float("-inf")

    def __call__(self, done: int, total: int) -> None:
        if self.cancel is not None:
            self.cancel.check()
        if self.progress is not None:
            self.progress(done, total)
        if self.waiting is None:
            self.window.add(done)
        now = time.perf_counter()
        if now - self.last < self.every_s and done < total:
            return
        self.last = now
        event = {"event": "embedding", "done": int(done), "total": int(total)}
        if self.waiting is not None:
            event.update(waiting_for=self.waiting[0], eta_s=self.waiting[1] if done < total else 0.0)
        else:
            event["eta_s"] = self.window.seconds_left(total) if done < total else 0.0
        for callback in self.callbacks:
            callback(event)


def encode_level(run_dir: Path, names) -> bool:
    """Cache a published head run's vectors of its level's names, so the views open it at once.

    "Open in views" asks for the run's vectors of every name of the level it was trained on:
    computed here, as the job's last step (the input model's vectors are cached already, the
    head is a few matrix products), the page reads them back as one cached block instead of
    putting the level through the head while the user waits. Only head runs: a fine-tuned
    run's level takes minutes of transformer, which would hold the job back that long.

    A failure here never undoes the run: it is published already, and its vectors are
    computed when first asked for.

    Parameters
    ----------
    run_dir : pathlib.Path
        The published run (after the rename: the vectors are keyed by its files' fingerprint).
    names : sequence of str
        The level's names, in the level view's order (the cached block is keyed by the list).

    Returns
    -------
    bool
        True when the vectors were cached.
    """
    try:
        encoder = load_encoder(str(run_dir))
        if not isinstance(encoder, HeadRunEncoder):
            return False
        started = time.perf_counter()
        encode_cached(encoder, list(names))
        logger.info("cached run %s's vectors of %d names in %.1fs", encoder.label, len(names),
                    time.perf_counter() - started)
        return True
    except (BiovizError, OSError, ValueError) as error:
        logger.warning("run %s: its level's vectors were not cached (%s); they are computed when first asked for",
                       run_dir.name, error)
        return False


def train_run(config: TrainConfig, out: str | Path, *, callbacks=(), cancel: CancelFlag | None = None,
              progress=None, validated: bool = False, input_model: ModelSpec | None = None) -> dict:
    """Validate, train, export and atomically publish one run directory.

    Parameters
    ----------
    config : TrainConfig
    out : path-like
        The run directory to create (must not exist, or be empty).
    callbacks : sequence of callable
        Receive ``start``/``epoch`` events from the loop and a final ``done`` event.
    cancel : CancelFlag, optional
        Set it (e.g. from a SIGTERM handler) to stop between batches; :class:`Cancelled`
        propagates and nothing is left at ``out``.
    progress : callable, optional
        ``progress(done, total)`` while the names are embedded.
    validated : bool
        Skip :func:`validate` and the model checks when the caller already did them (the
        level is checked while the data is prepared, before anything is embedded).
    input_model : ModelSpec, optional
        The input model as the caller's :func:`~trainer.data.check_models` parsed it.

    Returns
    -------
    dict
        The summary (run_dir, epochs, seconds, baseline and trained figures).
    """
    if not validated:
        config = validate(config)
        input_model = check_models(config)
    out = check_out_dir(out)
    embedding = _EmbeddingProgress(callbacks, cancel, progress)
    data = prepare(config, progress=embedding, report=embedding.encoding, input_model=input_model)
    if cancel is not None:
        cancel.check()
    result = Trainer(config, data, callbacks, cancel).run()
    out.parent.mkdir(parents=True, exist_ok=True)
    # What a killed export left here (its writer gone): ~100 MB each. Only those with an owner record:
    # --out may name any folder of the user's (list_runs also ages out record-less ones under runs/).
    sweep_partials(out.parent, orphan_age_s=None)
    sweep_blobs()  # the stored files of the runs deleted since (their partials' too)
    partial = Path(tempfile.mkdtemp(prefix=f".{out.name}.partial-", dir=out.parent))
    try:
        record_owner(partial)  # first: a sweep while this export runs must see that it lives
        started = time.perf_counter()
        if result.head is not None:
            save_head_model(result.head, data.input_model, partial)
            if result.projection is not None:
                save_head_model(result.projection, data.input_model, partial / "cca_projection")
        else:
            save_fine_tuned(result.model, partial)
        (partial / SPLIT_FILE).write_text(json.dumps(_split_names(data)), encoding="utf-8")
        record = run_record(config, data, result, run_id=out.name, export_s=time.perf_counter() - started)
        (partial / RUN_FILE).write_text(json.dumps(record, indent=1, default=str), encoding="utf-8")
        share_tree(partial)  # mkdtemp made it 0700: a run reads as any file the user writes (0755/0644)
        # The base model's files, the same bytes in every run on it (91 MB of minilm): one copy on the disk,
        # hard-linked from BIOVIZ_HOME/blobs; where the disk refuses a link the run keeps its own copy.
        share_files(partial)
        # On disk before the rename, the rename on disk after it: a power loss leaves either
        # no run or a complete one, never a run.json of zeros (ext4 and xfs may reorder them).
        fsync_tree(partial)
        crash_point("export:before-rename")
        if out.exists():
            out.rmdir()  # empty (checked above); os.replace cannot replace a directory otherwise
        os.replace(partial, out)
        # Kept until the rename (a partial killed just before it is still seen as abandoned); a crash
        # right here leaves a small hidden file in a complete run, which nothing reads.
        drop_owner(out)
        fsync_dir(out.parent)
        crash_point("export:after-rename")
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    encode_level(out, data.view.names)
    result_summary = summary(record, out)
    for callback in callbacks:
        callback({"event": "done", "run_dir": str(out), "summary": result_summary})
    return result_summary
