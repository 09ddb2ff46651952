"""A run's temporary export folder as a trainer leaves it: what the partial-run sweep tests build."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path


def partial_folder(runs: Path, name: str, owner: dict | None, age_s: float = 0.0) -> Path:
    """``runs/.<name>.partial-abcd1234`` with a weights file, the owner record ``owner`` and an age of ``age_s``."""
    partial = runs / f".{name}.partial-abcd1234"
    partial.mkdir()
    (partial / "model.safetensors").write_bytes(b"\0" * 1024)
    if owner is not None:
        (partial / ".owner.json").write_text(json.dumps(owner))
    if age_s:
        then = time.time() - age_s
        os.utime(partial, (then, then))
    return partial
