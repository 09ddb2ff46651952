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

from trainer.jobs.store import QUEUED, RUNNING, STARTING, Job

# What each summarised field must be; a progress line that says otherwise (a damaged file,
# another program's output) is left out of the summary instead of breaking the job table.
_NUMBER = (int, float)
_FIELD_TYPES = {"epoch": int, "max_epochs": int, "val_metric": _NUMBER, "elapsed_s": _NUMBER, "eta_s": _NUMBER,
                "val_name": str, "device": str, "losses": dict}


def _valid(key: str, value) -> bool:
    if value is None:
        return key in ("val_metric", "eta_s")  # None: not measured (yet)
    kind = _FIELD_TYPES.get(key)
    if kind is None or isinstance(value, bool) or not isinstance(value, kind):
        return False
    return not isinstance(value, float) or math.isfinite(value) or key == "val_metric"


def _count(event: dict) -> dict | None:
    """``{"done": n, "total": m}`` from an embedding or base-weight event, None when they are not counts."""
    done, total = event.get("done", 0), event.get("total", 0)
    if any(isinstance(v, bool) or not isinstance(v, int) or v < 0 for v in (done, total)):
        return None
    return {"done": done, "total": total}


def read_progress(path: str | Path) -> list[dict]:
    """The events of a progress file, in order.

    A half-written last line, a line that is not JSON or not a JSON object, and bytes that
    are not UTF-8 are skipped: the file is the trainer's, and a damaged one must not take
    the job table down. An unreadable file reads as no events.
    """
    try:
        text = Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError:  # not there yet, or not a readable file
        return []
    events = []
    for line in text.splitlines():
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
                summary["embedding"] = counts
                summary["eta_s"] = event.get("eta_s") if _valid("eta_s", event.get("eta_s")) else None
        elif kind == "start":
            summary.update({k: event[k] for k in ("max_epochs", "device") if k in event and _valid(k, event[k])})
            summary["epoch"] = 0
            summary["eta_s"] = None  # the embedding's estimate no longer holds
            summary.pop("embedding", None)
        elif kind == "epoch":
            summary.update({k: event[k] for k in ("epoch", "max_epochs", "losses", "val_metric", "val_name",
                                                   "elapsed_s", "eta_s") if k in event and _valid(k, event[k])})
        elif kind == "base_weight":  # after the last epoch: the weight of the input is chosen
            if (counts := _count(event)) is not None:
                summary["base_weight"] = counts
                summary["eta_s"] = None  # the epochs' estimate does not cover it (and early stopping ended them)
        elif kind == "done":
            summary["done"] = True
            summary["eta_s"] = 0
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
    """``residual on icd10 d1 · 15 shots · base minilm`` for tables and titles."""
    # The level and split helpers bring the ontology stack (networkx, scipy): loaded when a
    # table is drawn, not by every job's runner, which imports this module for its events.
    from bioviz.models.runs import shots_text
    from bioviz.ontology.level_spec import LevelSpec
    from bioviz.ontology.splits import DEFAULT_SHOTS

    level = LevelSpec.from_config(config).label  # a field left out means the TrainConfig default
    start = f"init {Path(str(config['init'])).name}" if config.get("init") else f"base {config.get('base', 'minilm')}"
    shots = shots_text(config.get("shots", DEFAULT_SHOTS))
    return f"{config.get('encoder', 'residual')} on {level} · {shots} · {start}"


def queue_position(jobs: list[Job], job: Job) -> int | None:
    """1-based place of a queued ``job`` among the queued ``jobs`` (oldest first), else None."""
    queued = sorted((j for j in jobs if j.status == QUEUED), key=lambda j: (j.created_at, j.id))
    ids = [j.id for j in queued]
    return ids.index(job.id) + 1 if job.id in ids else None


def progress_stage(job: Job) -> tuple[str, float]:
    """What a started job is doing and the share of that stage done: ``("epoch 3/10", 0.3)``.

    Stages in order: embedding the level's names, epochs, then choosing the base weight;
    a finished job keeps its last epoch count.
    """
    p = job.progress or {}
    running = job.status == RUNNING
    if p.get("base_weight") and running:
        done, total = p["base_weight"]["done"], p["base_weight"]["total"]
        return f"choosing the base weight {done}/{total}", done / max(total, 1)
    if job.status == STARTING:
        return "starting", 0.0
    if p.get("max_epochs"):
        return f"epoch {p.get('epoch', 0)}/{p['max_epochs']}", p.get("epoch", 0) / p["max_epochs"]
    if p.get("embedding") and running:
        done, total = p["embedding"]["done"], p["embedding"]["total"]
        return f"embedding {done:,}/{total:,} names", done / max(total, 1)
    return ("preparing data" if running else ""), 0.0


def job_row(job: Job, jobs: list[Job] | None = None, now: float | None = None) -> dict:
    """One line of the job table: status, progress, device, duration, key metric, ETA, what."""
    p = job.progress or {}
    if job.status == QUEUED:
        place = queue_position(jobs or [job], job)
        progress = f"waiting (#{place} in queue)" if place else "waiting"
    else:
        progress = progress_stage(job)[0]
    metric = ""
    if p.get("val_metric") is not None:
        metric = f"{p.get('val_name', 'val')} {p['val_metric']:.4g}"
    return {
        "job": job.id,
        "status": job.status,
        "progress": progress,
        "device": job.device or job.requested_device,
        "duration": _clock(job.duration_s(now)),
        "metric": metric,
        "eta": _clock(p.get("eta_s")) if job.status == RUNNING else "",
        "what": describe_config(job.config),
    }
