"""Reading trained runs: directories with a ``run.json`` under ``BIOVIZ_HOME/runs``.

The trainer writes runs; the library only reads them, so a run directory can be used as
a MODEL everywhere (embed, neighbours, eval, views). A run directory is complete only when
``run.json`` exists: the trainer writes into a temporary directory and renames at the end.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from bioviz.paths import subdir

RUN_FILE = "run.json"


def runs_dir() -> Path:
    """``BIOVIZ_HOME/runs`` (created if missing)."""
    return subdir("runs")


def is_run_dir(path: str | Path) -> bool:
    """True when ``path`` is a complete trained run (has ``run.json``)."""
    return (Path(path) / RUN_FILE).is_file()


@dataclass(frozen=True)
class RunInfo:
    """What the views need to know about a run without loading it."""

    path: Path
    run_id: str
    config: dict
    metrics: dict

    @property
    def label(self) -> str:
        """``run-id (encoder on source depth k)`` for pickers and titles."""
        c = self.config
        what = f"{c.get('encoder', '?')} on {c.get('source', '?')}"
        if c.get("depth"):
            what += f" d{c['depth']}"
        return f"{self.run_id} ({what})"


def read_run(path: str | Path) -> RunInfo:
    """Read ``run.json`` of a run directory."""
    path = Path(path)
    data = json.loads((path / RUN_FILE).read_text(encoding="utf-8"))
    return RunInfo(path, data.get("run_id", path.name), data.get("config", {}), data.get("metrics", {}))


def list_runs(base: str | Path | None = None) -> list[RunInfo]:
    """Complete runs under ``base`` (default ``BIOVIZ_HOME/runs``), newest first."""
    base = Path(base) if base else runs_dir()
    runs = []
    for child in base.iterdir() if base.is_dir() else []:
        if child.is_dir() and is_run_dir(child):
            try:
                runs.append(read_run(child))
            except (OSError, ValueError):
                continue  # a damaged run.json: skip rather than break every picker
    return sorted(runs, key=lambda r: r.path.stat().st_mtime, reverse=True)
