"""The first encoding, done in the background: the bundled levels' names under the bundled model.

Encoding a whole level through MiniLM takes minutes on a laptop CPU (ICD-10 chapters' 12k
names, HPO level 1's 24k), and a first visitor would otherwise pay for it behind a progress
bar on their first Neighbours or Projection query. When the app starts, :func:`start_background`
runs :func:`warm_up` in a separate process (not a thread of the Streamlit server, whose
pages stay responsive; at a lower CPU priority) that fills the vector cache
(:mod:`bioviz.models.vector_cache`) with exactly the vectors the pages ask for, so they find
them there.

What it encodes (:data:`DEFAULT_LEVELS`), in this order: ICD-10 chapters (the level the home
page opens on), HPO depth 1 under *Phenotypic abnormality* (the HPO default, and the level of
the few-shot training journey), ICD-10-CM chapters (the clinical coding vocabulary, largest:
last). A deeper level of the same source mostly holds the same names, which the cache then
serves per name.

Its progress (names done and total, names per second, seconds left) is a small JSON file,
``BIOVIZ_HOME/warmup.json``, replaced atomically, which the app's banner reads. One
warm-up runs per ``BIOVIZ_HOME`` at a time (a file lock the system releases when its process
dies). Nothing is encoded for a level whose vectors are all cached. Killing the process at
any moment is safe: names are encoded and stored in chunks, each stored in one transaction
of the cache, and the next warm-up continues with the names still missing.

The same start also compiles umap-learn's numba code in a background thread of the server
(:func:`start_umap_warm_up`), so the first UMAP layout does not pay 10-40 s of compilation.

``BIOVIZ_WARMUP=0`` turns both off (the tests do).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from filelock import FileLock, Timeout

from bioviz.models import model_spec
from bioviz.models.encoding_session import EncodingSession
from bioviz.models.registry import load_encoder
from bioviz.ontology.level_spec import LevelSpec
from bioviz.paths import atomic_path, home
from bioviz.views import fast_umap

logger = logging.getLogger(__name__)

ENABLED_ENV = "BIOVIZ_WARMUP"
STATE_FILE, LOCK_FILE, LOG_FILE = "warmup.json", "warmup.lock", "warmup.log"
# The pages open with med-minilm compared with minilm: its vectors first, then the baseline's.
DEFAULT_MODELS = (model_spec.DEFAULT_MODEL, model_spec.BASELINE_MODEL)
DEFAULT_MODEL = DEFAULT_MODELS[0]
DEFAULT_LEVELS = (LevelSpec("icd10", depth=1), LevelSpec("hpo", depth=1), LevelSpec("icd10cm", depth=1))
LEVEL_NAMES = {LevelSpec("icd10", depth=1): "ICD-10 chapters", LevelSpec("hpo", depth=1): "HPO level 1",
               LevelSpec("icd10cm", depth=1): "ICD-10-CM chapters"}
# The most names encoded and stored per step (steps take about 2 s at the recent rate): a killed
# warm-up loses at most one step. Below the vector cache's BLOCK_MIN, so the steps store rows
# only; the level's block is written once, at its end.
CHUNK = 1024
BATCH_SIZE = 32  # names per forward pass
WRITE_EVERY_S = 1.0  # the state file is rewritten at most this often while names are encoded
# A "running" state not updated for this long belongs to a process that hangs or is gone.
STALE_S = 600.0
NICENESS = 10  # the warm-up yields the CPU to the server's requests
WATCH_S = 2.0  # how often the warm-up process looks whether its server still runs


def level_name(spec: LevelSpec) -> str:
    """How the banner names a level: ``ICD-10 chapters`` for the bundled ones, else the spec's label."""
    return LEVEL_NAMES.get(spec, spec.label)


def enabled() -> bool:
    """Whether the app starts a warm-up (``BIOVIZ_WARMUP``: anything but ``0``/``false``/``no``/``off``)."""
    return os.environ.get(ENABLED_ENV, "1").strip().lower() not in ("0", "false", "no", "off")


def state_path() -> Path:
    """``BIOVIZ_HOME/warmup.json``: the progress of the last (or current) warm-up."""
    return home() / STATE_FILE


def read_state() -> dict | None:
    """The warm-up's last written state, or None when there is none (or it cannot be read).

    Keys: ``state`` (``running``, ``done``, ``failed``, ``stopped``), ``pid``, ``model``,
    ``levels`` (their names, :func:`level_name`), ``level`` and ``level_index`` (the one
    being prepared), ``done`` and ``total`` (its names; ``total`` is 0 while it loads),
    ``encoded`` (names encoded by this warm-up, not found cached), ``rate`` (names encoded
    per second), ``eta_s`` (seconds left for this level, None until a rate is known),
    ``started``, ``updated`` (epoch seconds) and ``error`` (one line, when it failed).
    """
    try:
        state = json.loads(state_path().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return state if isinstance(state, dict) else None


def _alive(pid) -> bool:
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except (PermissionError, TypeError, ValueError, OverflowError):
        return isinstance(pid, int)
    return True


def is_running(state: dict | None, now: float | None = None) -> bool:
    """Whether ``state`` is a warm-up still at work: says ``running``, its process lives, updated lately.

    A killed warm-up leaves ``running`` behind; its dead process (or a state not updated for
    :data:`STALE_S` seconds) tells it apart.
    """
    if not state or state.get("state") != "running":
        return False
    now = time.time() if now is None else now
    return _alive(state.get("pid")) and now - float(state.get("updated") or 0) < STALE_S


class _Progress:
    """The state file of one warm-up: written at most every second, the rate and time left its encoding's."""

    def __init__(self, model: model_spec.ModelSpec, levels, report=None) -> None:
        self.state = {"state": "running", "pid": os.getpid(), "model": model.spec,
                      "levels": [level_name(spec) for spec in levels], "level": None, "level_index": 0,
                      "done": 0, "total": 0,
                      "encoded": 0, "rate": None, "eta_s": None, "started": time.time(), "updated": None,
                      "error": None, "waiting_for": None}
        self.report = report
        self.written = 0.0

    def write(self, force: bool = True, **changes) -> None:
        self.state.update(changes)
        now = time.time()
        if not force and now - self.written < WRITE_EVERY_S:
            return
        if self.state["state"] != "running":
            self.state["eta_s"] = None
        self.state["updated"] = now
        with atomic_path(state_path()) as tmp:
            tmp.write_text(json.dumps(self.state), encoding="utf-8")
        self.written = now
        if self.report is not None:
            self.report(dict(self.state))


class _Stopped(Exception):
    """The server that started the warm-up has exited."""


def _level_progress(progress: _Progress, names: list[str], parent_pid: int | None):
    """``report(EncodingProgress)`` for one level: the banner's counts, the rate and time left of its encoding."""
    duplicates = len(names) - len(dict.fromkeys(names))  # the banner counts every name of the level
    first: list[int] = []  # distinct names found cached: not encoded by this warm-up
    encoded_before = progress.state["encoded"]

    def report(step) -> None:
        if _server_gone(parent_pid):
            raise _Stopped
        changes = {"done": duplicates + step.done, "total": len(names),
                   "rate": round(step.rate, 1) if step.rate else None,
                   "eta_s": round(step.seconds_left, 1) if step.seconds_left is not None else None,
                   "waiting_for": step.owner if step.waiting else None}
        if not step.waiting:
            first[:1] = first or [step.done]
            changes["encoded"] = encoded_before + step.done - first[0]
        progress.write(force=False, **changes)

    return report


def _server_gone(parent_pid: int | None) -> bool:
    """Whether the server that started this warm-up has exited (the warm-up was reparented)."""
    return parent_pid is not None and os.getppid() != parent_pid


def warm_up(*, levels=DEFAULT_LEVELS, model: model_spec.ModelSpec | None = None, chunk: int = CHUNK,
            parent_pid: int | None = None, report=None) -> dict | None:
    """Encode every name of ``levels`` under ``model`` into the vector cache, writing progress as it goes.

    Parameters
    ----------
    levels : sequence of LevelSpec
        The levels, encoded in this order (:data:`DEFAULT_LEVELS`).
    model : ModelSpec, optional
        The MODEL (None: :data:`DEFAULT_MODEL`, the bundled biomedical MiniLM).
    chunk : int
        Names encoded and stored per step.
    parent_pid : int, optional
        The server's process: the warm-up stops (state ``stopped``) once it has exited.
    report : callable, optional
        ``report(state)`` with a copy of every state written (for tests and the command line).

    Returns
    -------
    dict or None
        The final state; None when another warm-up holds this ``BIOVIZ_HOME``'s lock (nothing
        is written then).
    """
    levels = list(levels)
    model = model_spec.ModelSpec.parse(DEFAULT_MODEL) if model is None else model
    lock = FileLock(str(home() / LOCK_FILE))
    try:
        lock.acquire(timeout=0)
    except Timeout:
        logger.info("another warm-up is running for %s", home())
        return None
    progress = _Progress(model, levels, report)
    try:
        progress.write()
        encoder = load_encoder(model)  # the fingerprint only: weights load on the first name encoded
        for index, spec in enumerate(levels):  # one level after the other: the first is ready soonest
            progress.write(level=level_name(spec), level_index=index, done=0, total=0, rate=None, eta_s=None)
            names = spec.load().names
            # the same road as the pages, jobs and commands (bioviz.models.encoding_session): its claim keeps
            # one process encoding a level (a page or job already at it is waited for, a hung one taken
            # over), and the chunks it stores are what progressive answers read meanwhile
            session = EncodingSession.of(encoder, names, owner="the background warm-up")
            if session.ready():
                progress.write(done=len(names), total=len(names))
                continue
            session.encode(report=_level_progress(progress, names, parent_pid), batch_size=BATCH_SIZE,
                           max_chunk=chunk, claim_min=0)
            progress.write(done=len(names), waiting_for=None)
        progress.write(state="done", level=None)
        logger.info("warm-up done: %d levels, %d names encoded", len(levels), progress.state["encoded"])
        return progress.state
    except _Stopped:
        progress.write(state="stopped")
        return progress.state
    except Exception as error:  # noqa: BLE001 - reported in the state file; the app keeps working without it
        logger.exception("warm-up failed")
        progress.write(state="failed", error=str(error).splitlines()[0] if str(error) else type(error).__name__)
        return progress.state
    finally:
        lock.release()


def start_umap_warm_up() -> None:
    """Compile umap-learn's numba code in a background thread of this process (the server's).

    The Projection page lays UMAP out in the server's own process, so the compiled code must
    be there, not in the encoding warm-up's process: a thread (numba's compiler releases the
    interpreter lock in LLVM) that also fills numba's on-disk cache for later servers
    (:func:`bioviz.views.fast_umap.start_warm_up`; it logs its failures, never raises).
    """
    fast_umap.start_warm_up()


def start_background(levels=DEFAULT_LEVELS, models=DEFAULT_MODELS) -> subprocess.Popen | None:
    """Start :func:`warm_up` in its own process (``python -m bioviz.warmup``); None when turned off.

    ``models`` are warmed up one after the other, every level of the first before the next.

    The process writes its log to ``BIOVIZ_HOME/warmup.log``, runs at a lower CPU priority
    and stops when the calling process (the server) has exited. A second warm-up for the
    same ``BIOVIZ_HOME`` exits at once (the lock). Also starts :func:`start_umap_warm_up`.
    """
    if not enabled():
        return None
    models = (models,) if isinstance(models, str) else tuple(models)
    start_umap_warm_up()
    args = [sys.executable, "-m", "bioviz.warmup", "--model", *models, "--parent", str(os.getpid()),
            "--levels", json.dumps([spec.to_config() for spec in levels])]
    root = Path(__file__).resolve().parents[1]  # the bioviz package importable in the child, wherever it runs
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")])),
           "BIOVIZ_HOME": str(home()), "TOKENIZERS_PARALLELISM": "false"}
    with open(home() / LOG_FILE, "ab") as log:
        return subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=env,
                                start_new_session=True)


def _stop_now() -> None:
    """Mark the state file ``stopped`` and exit at once (whatever is being encoded: the cache keeps what it stored)."""
    state = read_state()
    if state and state.get("state") == "running" and state.get("pid") == os.getpid():
        state.update(state="stopped", eta_s=None, updated=time.time())
        with atomic_path(state_path()) as tmp:
            tmp.write_text(json.dumps(state), encoding="utf-8")
    os._exit(0)


def _watch_server(parent_pid: int) -> None:
    """Stop the warm-up process within seconds of its server's exit (not only between two chunks)."""
    while not _server_gone(parent_pid):
        time.sleep(WATCH_S)
    logger.info("the server (pid %d) has exited: the warm-up stops", parent_pid)
    _stop_now()


def main(argv=None) -> int:
    """``python -m bioviz.warmup [--model M ...] [--levels JSON] [--parent PID]``: one warm-up per model, then exit."""
    parser = argparse.ArgumentParser(description="Encode the bundled levels' names into the vector cache.")
    parser.add_argument("--model", nargs="+", default=list(DEFAULT_MODELS))
    parser.add_argument("--levels", help="JSON list of level configs (LevelSpec.to_config); default: the bundled")
    parser.add_argument("--parent", type=int, help="stop once this process (the server) has exited")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    levels = [LevelSpec.from_config(c) for c in json.loads(args.levels)] if args.levels else DEFAULT_LEVELS
    try:
        os.nice(NICENESS)
    except OSError:  # not permitted here: run at the normal priority
        pass
    signal.signal(signal.SIGTERM, lambda *_: _stop_now())
    if args.parent is not None:
        threading.Thread(target=_watch_server, args=(args.parent,), daemon=True).start()
    state = None
    for model in args.model:
        state = warm_up(levels=levels, model=model_spec.ModelSpec.parse(model), parent_pid=args.parent)
        if state is None or state["state"] != "done":
            break
    return 0 if state is None or state["state"] in ("done", "stopped") else 1


if __name__ == "__main__":
    sys.exit(main())
