"""Pretraining a base model as a background job (``python -m trainer pretrain`` through the job queue).

A pretrain job is a job whose config says ``"kind": "pretrain"`` (its other fields are
:class:`trainer.pretrain.config.PretrainConfig`'s). The runner starts this module with the
same command line as the trainer (``train --config FILE --out RUN --json --progress-file P
--device D``), so every executor starts it the same way. It

1. trains into ``jobs/<id>/pretrain`` (the *work* directory, with its checkpoints): not under
   ``runs/``, which the queue empties when a job does not succeed, so an interrupted or
   cancelled job keeps its checkpoints;
2. writes each pretraining event (pairs, start, step with loss and ETA, done, error) to the
   job's progress file, for the job table;
3. has the texts it trained on recorded (``pretrain-terms.json``, written by the pretraining
   itself, :mod:`trainer.pretrain.terms`);
4. publishes the model: writes ``run.json`` (``kind: pretrain``, so the model is a run every
   model picker lists, named ``pretrained minilm: synonyms+hierarchy, 20k pairs``) and renames
   the work directory to ``runs/<id>`` in one step.

**Resume.** A job that did not finish (its trainer or runner killed, the machine restarted,
cancelled) leaves its work directory. :meth:`trainer.jobs.queue.Worker.resume` (the Train
page's *Resume*, ``python -m trainer jobs resume ID``) queues a new job with ``resume_from``
naming it: the new job moves it into its own job folder (one rename) and continues from its
last complete checkpoint with the interrupted run's own settings (``pretrain --resume``).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import datetime as dt
import json
import os
import shutil
import sys
from pathlib import Path

from bioviz.errors import BiovizError
from bioviz.paths import append_line, fsync_dir, fsync_tree, write_text_atomic
from trainer.cli_common import EXIT_CANCELLED
from trainer.events import Cancelled, cancel_on_signals

# Every job's runner imports this module (trainer.jobs.runner.train_command): the library's
# model and ontology modules (seconds) are imported inside the functions that need them.
PRETRAIN_KIND = "pretrain"  # = bioviz.models.runs.PRETRAIN_KIND (tests/trainer/test_pretrain_job.py checks)
MODULE = "trainer.jobs.pretrain_job"  # what the runner starts for a pretrain job
WORK_DIR = "pretrain"  # jobs/<id>/pretrain: the model being trained and its checkpoints
TRAINER_STATE = "trainer_state.json"  # written last into a checkpoint by transformers' Trainer
# Config fields of a pretrain job besides PretrainConfig's.
JOB_FIELDS = ("kind", "resume_from")


def kind_name(config) -> str | None:
    """The ``kind`` a job config names (``pretrain``), None when it names none (a training run's).

    The one look at the marker; :func:`trainer.jobs.kinds.kind_of` turns it into the job's kind.
    """
    return config.get("kind") if isinstance(config, dict) else None


def resumed_from(config) -> str | None:
    """The work directory a pretrain job continues (its ``resume_from``), None for a fresh one."""
    return config.get("resume_from") if isinstance(config, dict) else None


def work_dir(config_path: str | Path) -> Path:
    """The work directory of the job whose ``config.json`` is ``config_path``."""
    return Path(config_path).parent / WORK_DIR


def _absolute(entry: str) -> str:
    """A source or base named by a path that exists here, made absolute (the job runs elsewhere)."""
    from bioviz.ontology.sources import BUNDLED  # the ontology stack (networkx): the job queue imports this module

    path = Path(str(entry)).expanduser()
    return str(path.resolve()) if entry not in BUNDLED and path.exists() else str(entry)


def job_config(values: dict) -> dict:
    """The validated config of a pretrain job: every :class:`PretrainConfig` field, defaults filled in.

    Parameters
    ----------
    values : dict
        ``PretrainConfig`` fields (``sources``, ``objectives``, ``max_pairs``, ``base``,
        ``exclude_levels``, ``split_seed``, ``shots``, ``seed`` ...), optionally ``resume_from``.
        The device is the job's slot, not a field here.

    Raises
    ------
    BiovizError
        One line: an unknown field, objective or source, a bad excluded level, a value out of range.
    """
    from bioviz.ontology.sources import BUNDLED  # the ontology stack (networkx): the job queue imports this module
    from trainer.pretrain.config import PretrainConfig, validate  # scipy and the ontology stack, as BUNDLED
    from trainer.pretrain.leakage import parse_level  # the ontology stack, as BUNDLED

    fields = {f.name for f in dataclasses.fields(PretrainConfig)} - {"device"}
    unknown = sorted(set(values) - fields - set(JOB_FIELDS))
    if unknown:
        raise BiovizError(f"unknown pretraining option {unknown[0]!r}")
    settings = {k: v for k, v in values.items() if k in fields}
    sources = [_absolute(s) for s in settings.get("sources") or []]
    for source in sources:
        if source not in BUNDLED and not Path(source).exists():
            raise BiovizError(f"unknown source {source!r}: use one of {', '.join(BUNDLED)}, an .obo file or a "
                              "UMLS directory")
    paths = {key: _absolute(settings[key]) for key in ("base", "pairs_file", "exclude_names") if settings.get(key)}
    # No objective given: every objective of a pair file, else refused in one line.
    config = validate(PretrainConfig(**{"objectives": [], **settings, **paths, "sources": sources}))
    for level in config.exclude_levels:
        parse_level(level)  # a malformed level is refused here, in one line
    excluded = [f"{_absolute(level.split(':', 1)[0])}:{level.split(':', 1)[1]}" for level in config.exclude_levels]
    out = {"kind": PRETRAIN_KIND, **dataclasses.replace(config, exclude_levels=excluded).to_dict()}
    del out["device"]
    if resume := resumed_from(values):
        out["resume_from"] = str(resume)
    return out


def resume_request(config: dict, config_path: str | Path) -> dict:
    """The config of a job that continues the job of ``config`` (its work directory as ``resume_from``)."""
    return {**config, "resume_from": str(work_dir(config_path))}


def describe(config, resumed: bool = False) -> str:
    """``pretrain on hpo, mini.obo · synonyms+hierarchy · 20k pairs · base minilm`` for tables and titles.

    ``config`` is a :class:`~trainer.pretrain.config.PretrainConfig` (a job's, read by
    :class:`trainer.jobs.kinds.PretrainKind`); ``resumed``: the job continues an interrupted one.
    """
    from bioviz.models.runs import pairs_text  # the ontology stack: the job queue imports this module

    sources = ", ".join(Path(str(s)).name for s in config.sources or [])
    if config.pairs_file:
        sources = f"pair file {Path(str(config.pairs_file)).name}" + (f" ({sources})" if sources else "")
    objectives = "+".join(config.objectives or []) or ("every objective" if config.pairs_file else "?")
    sources = sources or "?"
    return (f"pretrain on {sources} · {objectives} · {pairs_text(config.max_pairs)} pairs · "
            f"base {Path(str(config.base)).name}{' · resumed' if resumed else ''}")


def resumable(config_path: str | Path) -> bool:
    """Whether the job of ``config_path`` left an interrupted pretraining run to resume."""
    from bioviz.evaluation.overlap import PRETRAIN_FILE  # the ontology stack: the job queue imports this module
    from trainer.pretrain.config import CONFIG_FILE  # scipy and the ontology stack, as PRETRAIN_FILE

    work = work_dir(config_path)
    return (work / CONFIG_FILE).is_file() or (work / PRETRAIN_FILE).is_file()


def drop_incomplete_checkpoints(work: Path) -> list[str]:
    """Remove checkpoints a kill interrupted while they were written; return their names.

    transformers writes ``trainer_state.json`` last and removes the older checkpoint only after
    it, so a checkpoint without a readable one was cut short, and the one before it is whole.
    """
    from trainer.pretrain.fit import CHECKPOINTS  # torch and sentence-transformers: a resume's only

    dropped = []
    for checkpoint in sorted((work / CHECKPOINTS).glob("checkpoint-*")):
        try:
            json.loads((checkpoint / TRAINER_STATE).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            shutil.rmtree(checkpoint, ignore_errors=True)
            dropped.append(checkpoint.name)
    return dropped


def adopt(resume_from: str | None, work: Path) -> bool:
    """Move the interrupted run ``resume_from`` into ``work`` (once: a crash after the rename finds it there).

    Returns
    -------
    bool
        True when ``work`` holds a run to continue.

    Raises
    ------
    BiovizError
        ``resume_from`` is gone and ``work`` holds nothing (already resumed by another job, or deleted).
    """
    if work.is_dir() and any(work.iterdir()):
        return True
    if not resume_from:
        return False
    source = Path(resume_from)
    if not source.is_dir():
        raise BiovizError(f"nothing to resume: {source.parent.name}'s interrupted pretraining run is gone "
                          "(resumed by another job, or deleted)")
    if work.exists():
        work.rmdir()  # empty (checked above)
    os.replace(source, work)
    return True


class ProgressFile:
    """Appends each pretraining event to the job's progress file (one JSON object a line)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    def __call__(self, event: dict) -> None:
        append_line(self.path, json.dumps(event, default=str))  # whole or not at all, even on a full disk


def publish(work: Path, out: Path, result: dict) -> None:
    """Write ``run.json`` into ``work`` and rename it to ``out`` (flushed first: absent or complete, never half)."""
    from bioviz.models.runs import RUN_FILE  # the ontology stack: the job queue imports this module
    from trainer.options import from_stored  # beside PretrainConfig, imported here for its ontology stack
    from trainer.pretrain.config import PretrainConfig  # scipy and the ontology stack, as RUN_FILE

    c = from_stored(PretrainConfig, result.get("config") or {}, sources=[], objectives=[])
    record = {
        "run_id": out.name,
        "created": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        # No "shots" here: the split fields are the excluded levels' (exclude_split), not a
        # split this model was trained with (bioviz.evaluation.splits reads "shots" as one).
        "config": {"kind": PRETRAIN_KIND, "encoder": PRETRAIN_KIND, "finetune": True,
                   "base": c.base, "sources": c.sources, "objectives": c.objectives, "max_pairs": c.max_pairs,
                   "train_pairs": (result.get("pairs") or {}).get("train"), "exclude_levels": c.exclude_levels,
                   "exclude_split": {"shots": c.shots, "split_seed": c.split_seed,
                                     "test_per_class": c.test_per_class, "zero_shot_classes": c.zero_shot_classes},
                   "seed": c.seed, "epochs": c.epochs},
        "metrics": {"validation": result.get("validation"), "steps": result.get("steps"),
                    "resumed_from_step": result.get("resumed_from_step"), "seconds": result.get("seconds")},
    }
    write_text_atomic(work / RUN_FILE, json.dumps(record, indent=1, default=str))
    fsync_tree(work)
    out.parent.mkdir(parents=True, exist_ok=True)
    os.replace(work, out)
    fsync_dir(out.parent)


def run(config_file: str | Path, out: str | Path, progress_file: str | Path, device: str) -> int:
    """Train (or resume) the job's model into its work directory and publish it; return the exit code.

    Exit codes as the trainer's: 0 published, 2 bad input (one line, also an ``error`` event),
    130 stopped by SIGTERM (a checkpoint is kept for *Resume*).
    """
    from bioviz.evaluation.overlap import PRETRAIN_FILE, TERMS_FILE  # the ontology stack: the queue imports this module
    from trainer.pretrain.command import ProgressPrinter  # scipy and the ontology stack, as PRETRAIN_FILE
    from trainer.pretrain.config import PretrainConfig, validate  # scipy and the ontology stack, as BUNDLED

    out, work = Path(out), work_dir(config_file)
    progress, printer = ProgressFile(progress_file), ProgressPrinter()
    cancel, restore_signals = cancel_on_signals()
    try:
        values = json.loads(Path(config_file).read_text(encoding="utf-8"))
        resuming = adopt(resumed_from(values), work)
        if not (work / PRETRAIN_FILE).is_file():  # else trained already: killed before it was published
            from trainer.pretrain.config import CONFIG_FILE  # scipy and the ontology stack, as PRETRAIN_FILE
            from trainer.pretrain.fit import pretrain  # torch and sentence-transformers: a run's only

            resume = resuming and (work / CONFIG_FILE).is_file()
            if resume:
                for name in drop_incomplete_checkpoints(work):
                    sys.stderr.write(f"dropped {name}: it was cut short while being written\n")
                config = PretrainConfig.read(work)  # the interrupted run's own settings
            else:
                config = PretrainConfig(**{k: v for k, v in values.items() if k not in JOB_FIELDS})
            config = validate(dataclasses.replace(config, device=device))
            if not resume and work.exists():
                shutil.rmtree(work)  # a run that never wrote its config: nothing worth keeping
            with contextlib.redirect_stdout(sys.stderr):
                pretrain(config, work, callbacks=[printer, progress], cancel=cancel, resume=resume)
        result = json.loads((work / PRETRAIN_FILE).read_text(encoding="utf-8"))
        if not (work / TERMS_FILE).is_file():  # trained before pretrain() wrote it itself: draw the pairs again
            from trainer.pretrain.fit import prepare  # torch and sentence-transformers: a run's only
            from trainer.pretrain.terms import write_terms  # the ontology stack, as PRETRAIN_FILE

            write_terms(prepare(PretrainConfig(**result["config"])).train, work)
        publish(work, out, result)
    except Cancelled as why:
        sys.stderr.write(f"{why}\n")  # the job says cancelled (exit code); no error event
        return EXIT_CANCELLED
    except BiovizError as error:
        for report in (printer, progress):
            report({"event": "error", "message": str(error)})
        return 2
    finally:
        restore_signals()  # kept after a cancel: see cancel_on_signals
    progress({"event": "done", "run_dir": str(out), "summary": {"validation": result.get("validation")}})
    return 0


def main(argv: list[str] | None = None) -> int:
    """``python -m trainer.jobs.pretrain_job train --config FILE --out RUN --progress-file P --device D [--json]``."""
    parser = argparse.ArgumentParser(prog=f"python -m {MODULE}", description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=["train"], help="the trainer's command line shape (see the runner)")
    parser.add_argument("--config", required=True, help="the job's config.json (kind: pretrain)")
    parser.add_argument("--out", required=True, help="the run directory the model is published to")
    parser.add_argument("--progress-file", required=True)
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--json", action="store_true", help="print the run directory as JSON when done")
    args = parser.parse_args(argv)
    code = run(args.config, args.out, args.progress_file, args.device)
    if code == 0 and args.json:
        sys.stdout.write(json.dumps({"run_dir": args.out}) + "\n")
    return code


if __name__ == "__main__":
    sys.exit(main())
