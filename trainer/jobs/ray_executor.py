"""Training jobs on a Ray cluster: :class:`RayExecutor` (``BIOVIZ_EXECUTOR=ray``, ``RAY_ADDRESS``).

What runs where (docs/cluster.md):

- On the app's machine, as for local jobs: the queue, the job table, and each job's small
  *runner* process (:mod:`trainer.jobs.runner`, started, polled and cancelled exactly as by
  :class:`~trainer.jobs.executor.LocalProcessExecutor`). The runner is the Ray driver of its job.
- On a cluster worker: one Ray task per job (:func:`train_task`, a streaming generator). It
  runs the trainer (``python -m trainer train ...``) in a scratch folder and yields, every
  half second, what the trainer appended to its log and progress file; at the end the run
  directory as a tar, then the exit code. The runner's thread (:class:`RemoteTrainer`)
  appends the chunks to the job's log and progress file, so the page and ``jobs list``
  follow the job as they follow a local one, and publishes the run atomically in
  ``BIOVIZ_HOME/runs`` (no shared filesystem assumed).

The task asks for one CPU, and one GPU when the job got a GPU slot (the config says ``cuda``
or ``auto`` and the cluster has GPUs). Cancel: the runner gets SIGTERM as for a local job and
calls ``ray.cancel(force=True)``, which kills the worker process; the trainer dies with it
(it is started with ``PR_SET_PDEATHSIG``). A worker or node that dies ends the task with a
Ray error: the job becomes ``interrupted`` with that reason. The task is never retried (a
retry would train twice into one job). The runner owns the task (Ray's ownership), so a
runner that dies takes its task with it, and an app that restarts finds the job through its
runner as for a local job; the job's handle also records the Ray task id, worker pid and
node (``handle["ray"]``; the log names them too) for tracing it on the cluster.
"""

from __future__ import annotations

import contextlib
import ctypes
import io
import json
import logging
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from pathlib import Path

from bioviz.models.blob_store import share_files
from bioviz.models.run_partials import record_owner
from bioviz.paths import fsync_dir, fsync_tree
from bioviz.ray_cluster import cluster_address, connect, resources
from trainer.jobs.executor import CANCEL_EXIT_CODE, JOB_ID_ENV, LocalProcessExecutor
from trainer.jobs.kinds import kind_of
from trainer.jobs.store import DB_FILE, RUN_FILE, JobStore

logger = logging.getLogger(__name__)

# Where a worker keeps bioviz's home between jobs (its vector cache above all): the base
# model's vectors of a level are encoded once per worker node, not once per job.
WORKER_HOME_ENV = "BIOVIZ_RAY_WORKER_HOME"
# The worker's environment reaches the trainer, plus these of the job's (never the app's
# paths, tokens or CUDA_VISIBLE_DEVICES: Ray sets the GPU the task got).
_FORWARDED_PREFIXES = ("BIOVIZ_", "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "TOKENIZERS_PARALLELISM",
                       "TQDM_DISABLE", "HF_HUB_DISABLE_PROGRESS_BARS", "PYTHONUNBUFFERED")
_NOT_FORWARDED = {"BIOVIZ_HOME", "BIOVIZ_EXECUTOR", "BIOVIZ_RAY_SHIP_CODE"}
TAIL_EVERY_S = 0.5


# -- on the worker ------------------------------------------------------------------------
def _die_with_parent() -> None:  # pragma: no cover - runs in the child between fork and exec
    """Make the trainer die with the Ray worker that started it (Linux), so a force-cancel kills it."""
    with contextlib.suppress(Exception):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def _read_new(path: Path, offset: int) -> tuple[bytes, int]:
    """Bytes appended to ``path`` since ``offset`` (nothing while it does not exist)."""
    try:
        with open(path, "rb") as file:
            file.seek(offset)
            data = file.read()
    except OSError:
        return b"", offset
    return data, offset + len(data)


def _pack(path: Path) -> bytes:
    """A file or folder as the bytes of an uncompressed tar (its name at the top)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        tar.add(path, arcname=path.name)
    return buffer.getvalue()


def _unpack(data: bytes, into: Path) -> Path:
    """Extract a :func:`_pack` tar into ``into``; return the path of its top entry."""
    with tarfile.open(fileobj=io.BytesIO(data), mode="r") as tar:
        names = tar.getnames()
        tar.extractall(into, filter="data")  # "data": no absolute paths, links out, devices
    return into / names[0].split("/")[0]


def train_task(payload: dict):
    """Body of the Ray task of one job (a generator: each yield is one chunk back to the runner).

    ``payload``: ``job`` id, ``module``, ``config`` (with shipped inputs in ``files``: option ->
    tar bytes), ``device`` (``cpu``/``cuda``) and ``env``. Yields dicts: ``started`` (the worker's
    pid, node and task id), ``log``/``progress`` (bytes), ``run`` (the run directory as a tar),
    ``exit`` (the trainer's exit code).
    """
    import ray  # on the worker

    context = ray.get_runtime_context()
    scratch = Path(tempfile.mkdtemp(prefix=f"bioviz-job-{payload['job']}-"))
    yield {"kind": "started", "pid": os.getpid(), "node": context.get_node_id(), "task": context.get_task_id(),
           "run_dir": str(scratch / "runs" / payload["job"])}
    process = None
    try:
        shipped = {option: str(_unpack(data, scratch / "inputs" / option)) for option, data in payload["files"].items()}
        config = {**payload["config"], **shipped}
        (scratch / "config.json").write_text(json.dumps(config, sort_keys=True, indent=1))
        run_dir, log_path, progress_path = scratch / "runs" / payload["job"], scratch / "log.txt", scratch / "progress.jsonl"
        import trainer  # where this worker has the code: the trainer subprocess imports the same

        code_root = str(Path(trainer.__file__).resolve().parents[1])
        env = {**os.environ, **payload["env"]}
        env["PYTHONPATH"] = os.pathsep.join(p for p in (code_root, os.environ.get("PYTHONPATH", "")) if p)
        env["BIOVIZ_HOME"] = os.environ.get(WORKER_HOME_ENV) or payload["env"].get(WORKER_HOME_ENV) or \
            str(Path.home() / ".bioviz-ray-worker")
        env["BIOVIZ_EXECUTOR"] = "local"  # already on the cluster: encode where the trainer runs
        command = [sys.executable, "-m", payload["module"], "train", "--config", str(scratch / "config.json"),
                   "--out", str(run_dir), "--json", "--progress-file", str(progress_path), "--device", payload["device"]]
        with open(log_path, "ab") as log:
            process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                       env=env, cwd=str(scratch), preexec_fn=_die_with_parent)
        offsets = {"log": 0, "progress": 0}

        def chunks():
            for kind, path in (("log", log_path), ("progress", progress_path)):
                data, offsets[kind] = _read_new(path, offsets[kind])
                if data:
                    yield {"kind": kind, "data": data}

        while process.poll() is None:
            time.sleep(TAIL_EVERY_S)
            yield from chunks()
        yield from chunks()
        if (run_dir / RUN_FILE).is_file():
            yield {"kind": "run", "data": _pack(run_dir)}
        yield {"kind": "exit", "code": process.returncode}
    finally:
        if process is not None and process.poll() is None:
            process.kill()
            process.wait()
        shutil.rmtree(scratch, ignore_errors=True)


# -- on the app's machine -------------------------------------------------------------------
def publish_run(data: bytes, run_dir: Path) -> None:
    """Unpack a shipped run into a hidden sibling of ``run_dir``, flush it, rename it into place.

    The sibling's name (``.<id>.partial-ray-*``) is one :func:`trainer.jobs.queue.discard_run`
    removes, so a crash halfway leaves nothing that looks like a run.
    """
    staging = run_dir.parent / f".{run_dir.name}.partial-ray-{secrets.token_hex(4)}"
    staging.mkdir(parents=True)
    try:
        record_owner(staging)  # a runner killed while unpacking leaves it to the next sweep (run_partials)
        unpacked = _unpack(data, staging)
        if not (unpacked / RUN_FILE).is_file():
            raise OSError(f"the shipped run of {run_dir.name} has no {RUN_FILE}")
        share_files(unpacked)  # the base weights it shares with other runs: one stored copy (blob_store)
        fsync_tree(unpacked)
        os.replace(unpacked, run_dir)
        fsync_dir(run_dir.parent)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _describe_lost(error: Exception) -> str:
    """One line for a task that ended with a Ray error (its worker or node died)."""
    first = next((line.strip() for line in str(error).splitlines() if line.strip()), "")
    return f"the Ray worker running the job died ({type(error).__name__}: {first[:200]})"


class RemoteTrainer:
    """The runner's view of a job's Ray task, shaped like :class:`subprocess.Popen`.

    A thread reads the task's chunks as they come: log and progress bytes are appended to the
    job's files, the run is published, the ``started`` chunk is recorded in the job's handle.
    """

    def __init__(self, ray, generator, job, log, store: JobStore | None, address: str):
        self._ray, self._generator, self._job, self._log, self._store = ray, generator, job, log, store
        self.address = address
        self.returncode: int | None = None
        self.lost_reason: str | None = None
        self.remote: dict | None = None
        self._remote_run_dir = b""
        self._cancelled = False
        self._thread = threading.Thread(target=self._follow, name=f"ray-job-{job.id}", daemon=True)
        self._thread.start()

    def _follow(self) -> None:
        ray = self._ray
        code = None
        try:
            with open(self._job.progress_path, "ab") as progress:
                for ref in self._generator:
                    chunk = ray.get(ref)
                    kind = chunk["kind"]
                    if kind in ("log", "progress") and self._remote_run_dir:
                        # The trainer names its run directory (the worker's scratch folder): name
                        # the one on this machine instead, as a local job's progress does.
                        chunk["data"] = chunk["data"].replace(self._remote_run_dir, self._job.run_dir.encode())
                    if kind == "log":
                        self._log.write(chunk["data"])
                        self._log.flush()
                    elif kind == "progress":
                        progress.write(chunk["data"])
                        progress.flush()
                    elif kind == "run":
                        publish_run(chunk["data"], Path(self._job.run_dir))
                    elif kind == "started":
                        self._record_started(chunk)
                    elif kind == "exit":
                        code = chunk["code"]
        except ray.exceptions.TaskCancelledError:
            code = CANCEL_EXIT_CODE
        except ray.exceptions.RayError as error:
            if self._cancelled:
                code = CANCEL_EXIT_CODE
            else:
                self.lost_reason = _describe_lost(error)
                logger.warning("job %s: %s", self._job.id, self.lost_reason)
        except Exception as error:  # noqa: BLE001 - a local failure (disk full publishing the run): one line
            self.lost_reason = f"the job's results could not be received from the Ray cluster: {error}"
            logger.exception("job %s", self._job.id)
        self.returncode = CANCEL_EXIT_CODE if self._cancelled and code is None else code

    def _record_started(self, chunk: dict) -> None:
        """Write where the task runs into the job's handle (kept beside the runner's own pid)."""
        self.remote = {"address": self.address, "task": chunk["task"], "node": chunk["node"], "pid": chunk["pid"]}
        self._remote_run_dir = chunk["run_dir"].encode()
        self._log.write(f"[job {self._job.id}] on the Ray cluster at {self.address}: node {chunk['node'][:12]}, "
                        f"worker pid {chunk['pid']}\n".encode())
        self._log.flush()
        if self._store is None:
            return
        try:
            handle = json.loads(self._store.get(self._job.id).handle or "{}")
            self._store.update(self._job.id, handle=json.dumps({**handle, "ray": self.remote}))
        except Exception:  # noqa: BLE001 - the handle is informational; the job runs on
            logger.warning("job %s: could not record its Ray task in the job table", self._job.id, exc_info=True)

    # -- the subprocess.Popen surface the runner uses --
    def poll(self) -> int | None:
        """The exit code once the task's chunks are all in (None before, and for a lost task)."""
        return None if self._thread.is_alive() else self.returncode

    def wait(self, timeout: float | None = None) -> int | None:
        """Wait for the task's last chunk; :class:`subprocess.TimeoutExpired` after ``timeout``."""
        self._thread.join(timeout)
        if self._thread.is_alive():
            raise subprocess.TimeoutExpired(f"ray task of job {self._job.id}", timeout)
        return self.returncode

    def send_signal(self, signum: int) -> None:
        """Stop the remote work: ``ray.cancel(force=True)`` kills the worker process and its trainer."""
        if self._thread.is_alive():
            self._cancelled = True
            with contextlib.suppress(Exception):
                self._ray.cancel(self._generator, force=True)

    def kill(self) -> None:
        """As :meth:`send_signal` (a force-cancel leaves nothing to kill afterwards)."""
        self.send_signal(signal.SIGKILL)


class RayExecutor(LocalProcessExecutor):
    """Runs each job's trainer as a Ray task on the cluster at ``RAY_ADDRESS``.

    The runner half is the local executor's: the runner is a process on this machine
    (module docstring). The trainer half submits :func:`train_task`; the device slots are the
    cluster's: ``cpu`` (``BIOVIZ_JOB_SLOTS`` cpu=N jobs at once) and ``cuda`` (cuda=N jobs per
    GPU of the whole cluster, Ray placing each on a node with a free GPU).
    """

    name = "ray"

    def __init__(self, address: str | None = None):
        super().__init__()
        self.address = address

    def capacity(self, slots: dict[str, int]) -> dict[str, int]:
        """``{"cpu": n}`` plus ``{"cuda": n * GPUs}`` when the cluster has GPUs (not with ``BIOVIZ_JOB_DEVICES=cpu``)."""
        capacity = {"cpu": slots["cpu"]}
        if os.environ.get("BIOVIZ_JOB_DEVICES", "").strip().lower() != "cpu":
            gpus = int(resources(self.address).gpus)
            if gpus:
                capacity["cuda"] = slots["cuda"] * gpus
        return capacity

    def start_trainer(self, job, command: list[str], env: dict[str, str], cwd: str, *, log) -> RemoteTrainer:
        """Submit the job's Ray task (its inputs shipped with it) and follow it."""
        ray = connect(self.address)
        address = cluster_address(self.address)
        config = json.loads(Path(job.config_path).read_text())
        kind = kind_of(config)
        files = {option: _pack(path) for option, path in kind.input_paths(config).items()}
        forwarded = {key: value for key, value in env.items()
                     if key.startswith(_FORWARDED_PREFIXES) and key not in _NOT_FORWARDED}
        forwarded[JOB_ID_ENV] = job.id
        gpu = (job.device or "cpu") != "cpu"
        # A pretrain job's checkpoints stay in the worker's scratch: on Ray, Resume starts it over.
        payload = {"job": job.id, "module": kind.module_of(job), "config": config, "files": files,
                   "device": "cuda" if gpu else "cpu", "env": forwarded}
        task = ray.remote(train_task).options(
            num_returns="streaming", num_cpus=1, num_gpus=1 if gpu else 0, max_retries=0, retry_exceptions=False,
            name=f"bioviz-job-{job.id}")
        generator = task.remote(payload)
        log.write(f"[job {job.id}] submitted to the Ray cluster at {address}"
                  f" ({'1 GPU' if gpu else 'CPU'}; {sum(map(len, files.values())):,} bytes of inputs shipped)\n".encode())
        log.flush()
        return RemoteTrainer(ray, generator, job, log, JobStore(Path(env["BIOVIZ_HOME"]) / DB_FILE), address)
