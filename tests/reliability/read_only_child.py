"""Run in a private mount namespace by test_read_only_home.py: fill a home, make it read-only, use it.

``python tests/reliability/read_only_child.py HOME OUT``: with the trigram encoder (no model
download) and no synonym expansion (its lexicon takes a minute to build on a busy machine), runs ``neighbours``/``code``/``embed`` on a writable HOME, then bind-mounts HOME onto
itself read-only (a real EROFS, even for root) and runs them again, and writes what it saw
to OUT as JSON.
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "reliability")]

from state_support import use_trigram_encoder  # noqa: E402

from bioviz.cli import main  # noqa: E402

MINI = ROOT / "tests" / "data" / "mini.obo"


def run(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    logging.root.handlers.clear()  # the CLI sets up its stderr handler on each call
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as leaving:
            code = leaving.code
    return code, out.getvalue(), err.getvalue()


def commands(terms: Path) -> dict[str, list[str]]:
    return {"neighbours": ["neighbours", "heart attack", "--source", str(MINI), "-k", "3", "--no-expand", "--quiet",
                           "--json"],
            "code": ["code", str(terms), "--source", str(MINI), "--no-expand", "--quiet", "--json"],
            "embed": ["embed", str(MINI), "--quiet"]}


def main_child(home: Path, out: Path) -> None:
    patch = pytest.MonkeyPatch()
    encoder = use_trigram_encoder(patch)
    terms = out.with_suffix(".terms.txt")
    terms.write_text("heart attack\nfever\n")
    seen = {"writable": {}, "read_only": {}}
    for name, argv in commands(terms).items():
        seen["writable"][name] = run(argv)
    shutil.rmtree(home / "runs", ignore_errors=True)  # a folder the read-only half must not create
    subprocess.run(f"mount --bind {home} {home} && mount -o remount,bind,ro {home}", shell=True, check=True)
    from bioviz import paths  # noqa: E402  here: the notice is per process, reset for the read-only half

    before = encoder.encoded
    for name, argv in commands(terms).items():
        getattr(paths, "_refusal", []).clear()  # each command is its own process in real use: each says it
        seen["read_only"][name] = run(argv)
    seen["encoded_read_only"] = encoder.encoded - before
    from bioviz.models.runs import list_runs  # noqa: E402  here: after the mount, as a page would

    try:
        seen["runs"] = len(list_runs())
    except OSError as error:
        seen["runs"] = f"{type(error).__name__}: {error}"
    out.write_text(json.dumps(seen))


if __name__ == "__main__":
    main_child(Path(sys.argv[1]), Path(sys.argv[2]))
