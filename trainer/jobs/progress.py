"""Following a job: its progress events, the stage it is in, its ETA, and its line in a table.

The trainer appends one JSON event per line to the job's progress file
(``embedding``, ``start``, ``epoch``, ``base_weight``, ``done``, ``error``);
:func:`summarise_progress` keeps the latest state for the job table, :func:`progress_stage`
says what a running job is doing, and :func:`job_row` is one line of the table the page
and ``jobs list`` show.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

from bioviz.errors import BiovizError
from bioviz.models.encoding_estimate import format_duration
from trainer.jobs.kinds import kind_of
from trainer.jobs.store import QUEUED, RUNNING, STARTING, SUCCEEDED, Job

# What each summarised field must be; a progress line that says otherwise (a damaged file,
# another program's output) is left out of the summary instead of breaking the job table.
_NUMBER = (int, float)
_FIELD_TYPES = {"epoch": int, "max_epochs": int, "val_metric": _NUMBER, "elapsed_s": _NUMBER, "eta_s": _NUMBER,
                "val_name": str, "device": str, "losses": dict, "val_mAP": _NUMBER, "best_epoch": int,
                "stop_by": int, "eta_stop_s": _NUMBER, "step": int, "total_steps": int, "loss": _NUMBER,
                "train": int, "waiting_for": str}
# Fields where None means "not measured (yet)"; val_mAP may also be NaN (no validation names).
_MAY_BE_NONE = ("val_metric", "val_mAP", "eta_s", "eta_stop_s", "loss")
# A pretraining job's step event (trainer.pretrain.fit): steps instead of epochs.
_STEP_FIELDS = ("step", "total_steps", "loss", "elapsed_s", "eta_s")
_EPOCH_FIELDS = ("epoch", "max_epochs", "losses", "val_metric", "val_name", "val_mAP", "elapsed_s", "eta_s",
                 "best_epoch", "stop_by", "eta_stop_s")


def _valid(key: str, value) -> bool:
    if value is None:
        return key in _MAY_BE_NONE
    kind = _FIELD_TYPES.get(key)
    if kind is None or isinstance(value, bool) or not isinstance(value, kind):
        return False
    return not isinstance(value, float) or math.isfinite(value) or key in ("val_metric", "val_mAP")


def _count(event: dict) -> dict | None:
    """``{"done": n, "total": m}`` from an embedding or base-weight event, None when they are not counts."""
    done, total = event.get("done", 0), event.get("total", 0)
    if any(isinstance(v, bool) or not isinstance(v, int) or v < 0 for v in (done, total)):
        return None
    return {"done": done, "total": total}


def read_progress(path: str | Path) -> list[dict]:
    """The events of a progress file, in order.

    A last line without its newline (half-written), a line that is not JSON or not a JSON object, and bytes that
    are not UTF-8 are skipped: the file is the trainer's, and a damaged one must not take
    the job table down. An unreadable file reads as no events.
    """
    try:
        text = Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError:  # not there yet, or not a readable file
        return []
    events = []
    # Only lines that end in a newline: the last one may be half an event (the trainer is writing it,
    # or its disk filled up), and half a line can be valid JSON that says something else ("1" of "12").
    for line in text.split("\n")[:-1]:
        try:
            event = json.loads(line)
        except ValueError:
            continue  # the trainer may be in the middle of writing this line
        if isinstance(event, dict):
            events.append(event)
    return events


def summarise_progress(events: list[dict]) -> dict:
    """Latest state from progress events: epoch, max_epochs, losses, val metric, ETA, device.

    The result is what the job table shows; the full curves come from :func:`read_progress`.
    Fields of the wrong type are left out.
    """
    summary: dict = {}
    for event in events:
        kind = event.get("event")
        if kind == "embedding":
            if (counts := _count(event)) is not None:
                if _valid("waiting_for", event.get("waiting_for")):  # another process encodes the level
                    counts["waiting_for"] = event["waiting_for"]
                summary["embedding"] = counts
                summary["eta_s"] = event.get("eta_s") if _valid("eta_s", event.get("eta_s")) else None
        elif kind == "pairs":  # a pretraining job has drawn its pairs
            if _valid("train", event.get("train")):
                summary["pairs"] = event["train"]
        elif kind == "step":
            summary.update({k: event[k] for k in _STEP_FIELDS if k in event and _valid(k, event[k])})
        elif kind == "start":
            if _valid("total_steps", event.get("total_steps")):  # pretraining: its progress is in steps
                summary.update({"total_steps": event["total_steps"], "step": event.get("resumed_from_step") or 0})
            summary.update({k: event[k] for k in ("max_epochs", "device") if k in event and _valid(k, event[k])})
            summary["epoch"] = 0
            summary["eta_s"] = None  # the embedding's estimate no longer holds
            summary.pop("embedding", None)
        elif kind == "epoch":
            summary.update({k: event[k] for k in _EPOCH_FIELDS if k in event and _valid(k, event[k])})
        elif kind == "base_weight":  # after the last epoch: the weight of the input is chosen
            if (counts := _count(event)) is not None:
                summary["base_weight"] = counts
                # the epochs' estimate does not cover it (and early stopping ended them)
                summary["eta_s"] = summary["eta_stop_s"] = None
        elif kind == "done":
            summary["done"] = True
            summary["eta_s"] = 0
            summary.pop("eta_stop_s", None)
            if "summary" in event:
                summary["summary"] = event["summary"]
        elif kind == "error":
            message = event.get("message")
            summary["error"] = None if message is None else str(message)
    return summary


def tail(path: str | Path, lines: int = 200, max_bytes: int = 256_000) -> str:
    """The last ``lines`` lines of a text file (empty if it does not exist yet)."""
    try:
        with open(path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            size = handle.tell()
            handle.seek(max(0, size - max_bytes))
            data = handle.read()
    except FileNotFoundError:
        return ""
    return "\n".join(data.decode("utf-8", errors="replace").splitlines()[-lines:])


def _clock(seconds: float | None) -> str:
    if seconds is None:
        return ""
    seconds = int(round(seconds))
    hours, rest = divmod(seconds, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}" if hours else f"{rest // 60}:{rest % 60:02d}"


def describe_config(config: dict) -> str:
    """``residual on icd10 d1 · 15 shots · base minilm`` for tables and titles (the job's kind says)."""
    return kind_of(config).describe(config)


def queue_position(jobs: list[Job], job: Job) -> int | None:
    """1-based place of a queued ``job`` among the queued ``jobs`` (oldest first), else None."""
    queued = sorted((j for j in jobs if j.status == QUEUED), key=lambda j: (j.created_at, j.id))
    ids = [j.id for j in queued]
    return ids.index(job.id) + 1 if job.id in ids else None


def progress_stage(job: Job) -> tuple[str, float]:
    """What a job is doing, or how its epochs ended, and the share done: ``("epoch 3/10", 0.3)``.

    Stages in order: embedding the level's names, epochs, then choosing the base weight.
    A running head says by which epoch early stopping ends it unless validation improves
    (``stop_by``); a finished job says how its epochs ended: ``stopped early at epoch 46
    (best 40)`` rather than ``epoch 46/100``.
    """
    p = job.progress or {}
    running = job.status == RUNNING
    if p.get("base_weight") and running:
        done, total = p["base_weight"]["done"], p["base_weight"]["total"]
        return f"choosing the base weight {done}/{total}", done / max(total, 1)
    if job.status == STARTING:
        return "starting", 0.0
    if p.get("total_steps"):  # a pretraining job
        step, most = p.get("step", 0), p["total_steps"]
        if job.finished and job.status != SUCCEEDED:
            return f"{job.status} at step {step}/{most}", step / most
        loss = f" · loss {p['loss']:.3f}" if isinstance(p.get("loss"), (int, float)) else ""
        return f"step {step}/{most}{loss}", 1.0 if job.status == SUCCEEDED else step / most
    if p.get("pairs") is not None and running:
        return f"{p['pairs']:,} pairs drawn: loading the base model", 0.0
    if p.get("max_epochs"):
        epoch, most = p.get("epoch", 0), p["max_epochs"]
        if job.finished:
            return _epochs_ended(job, epoch, most), 1.0 if job.status == SUCCEEDED else epoch / most
        text = f"epoch {epoch}/{most}"
        stop_by = p.get("stop_by")
        if stop_by is not None and epoch < stop_by < most:
            text += f" · stops at epoch {stop_by} unless validation improves"
        # The share of the epochs that can still run: up to stop_by, the honest nearer end.
        return text, epoch / most
    if p.get("embedding") and running:
        done, total = p["embedding"]["done"], p["embedding"]["total"]
        owner = p["embedding"].get("waiting_for")
        if owner:  # the level is being encoded by the warm-up or a page: the job waits for it, not encodes it
            left = f", {format_duration(p['eta_s'])} left" if p.get("eta_s") is not None and done < total else ""
            return f"waiting for {_possessive(owner)} encoding: {done:,} / {total:,} names{left}", done / max(total, 1)
        return f"embedding {done:,}/{total:,} names", done / max(total, 1)
    return ("preparing data" if running else ""), 0.0


def _possessive(owner: str) -> str:
    """``the background warm-up`` -> ``the warm-up's``, ``another process`` -> ``another process's``."""
    return owner.replace("the background ", "the ") + "'s"


def _epochs_ended(job: Job, epoch: int, most: int) -> str:
    """How a finished job's epochs ended: ``stopped early at epoch 46 (best 40)``, ``epoch 2/2 (best 2)``."""
    p = job.progress or {}
    summary = p.get("summary") if isinstance(p.get("summary"), dict) else {}
    best = summary.get("best_epoch", p.get("best_epoch"))
    best_text = f" (best {best})" if isinstance(best, int) and not isinstance(best, bool) and best > 0 else ""
    if job.status != SUCCEEDED:
        return f"{job.status} at epoch {epoch}/{most}"
    if epoch < most:
        return f"stopped early at epoch {epoch}{best_text}"
    return f"epoch {epoch}/{most}{best_text}"


def eta_text(progress: dict) -> str:
    """The time left of a running job, as a range when early stopping may end it sooner.

    ``0:16 (at most 2:56)``: training stops in 0:16 unless the validation figure improves
    again, and never runs past all its epochs (2:56). A plain ``0:40`` where only one
    estimate exists (embedding names, fine-tuning, a progress file of an older trainer,
    or the two ends meeting).

    >>> eta_text({"eta_s": 176.0, "eta_stop_s": 16.0}), eta_text({"eta_s": 40}), eta_text({})
    ('0:16 (at most 2:56)', '0:40', '')
    """
    most, soon = progress.get("eta_s"), progress.get("eta_stop_s")
    if most is None:
        return ""
    if soon is None or round(soon) >= round(most):
        return _clock(most)
    return f"{_clock(soon)} (at most {_clock(most)})"


def score_text(value) -> str:
    """A score as the page and the tables show every score: three decimals (``0.442``); empty if none."""
    if value is None or isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
        return ""
    return f"{value:.3f}"


def class_retrieval_text(job: Job) -> str:
    """The class-retrieval mAP users compare jobs by: the trained run's test figure once finished,
    else the latest validation figure (``0.704 (test)``, ``0.612 (validation)``)."""
    p = job.progress or {}
    summary = p.get("summary") if isinstance(p.get("summary"), dict) else {}
    trained = summary.get("trained") if isinstance(summary.get("trained"), dict) else {}
    test = trained.get("test") if isinstance(trained.get("test"), dict) else {}
    if score_text(test.get("mAP")):
        return f"{score_text(test['mAP'])} (test)"
    # Heads report the mAP at every epoch whatever they stop on; older progress files only
    # their stopping figure, which is the mAP when they stop on it.
    value = p.get("val_mAP", p.get("val_metric") if p.get("val_name") == "mAP" else None)
    return f"{score_text(value)} (validation)" if score_text(value) else ""


def job_run_label(job: Job) -> str:
    """The label of the job's run (``residual · HPO d1 · 15-shot (ecd5)``), with the user's name once it has one.

    Before the run exists, the default name its config will give it, with the job's short id.
    """
    from bioviz.models.runs import default_run_name, is_run_dir, read_run, short_run_id  # ontology stack: tables'

    if job.status == SUCCEEDED and job.run_dir and is_run_dir(job.run_dir):
        try:
            return read_run(job.run_dir).label
        except BiovizError:  # damaged or deleted meanwhile: the job's own words below
            pass
    return f"{default_run_name(job.config)} ({short_run_id(job.id)})"


def job_row(job: Job, jobs: list[Job] | None = None, now: float | None = None) -> dict:
    """One line of the job table: run, status, progress, device, duration, class-retrieval mAP, ETA, base."""
    p = job.progress or {}
    if job.status == QUEUED:
        place = queue_position(jobs or [job], job)
        progress = f"waiting (#{place} in queue)" if place else "waiting"
    else:
        progress = progress_stage(job)[0]
    config = job.config
    return {
        "job": job.id,
        "run": job_run_label(job),
        "status": job.status,
        "progress": progress,
        "device": job.device or job.requested_device,
        "duration": _clock(job.duration_s(now)),
        "class-retrieval mAP": class_retrieval_text(job),
        "eta": eta_text(p) if job.status == RUNNING else "",
        "base": kind_of(config).start_text(config),
    }
