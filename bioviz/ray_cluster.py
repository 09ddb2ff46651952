"""Which executor runs long work, and connecting to a Ray cluster: address, reachability, free resources.

Shared by the Ray training executor (:mod:`trainer.jobs.ray_executor`), Ray Data embedding
(:mod:`bioviz.models.ray_embedding`) and the Train page's executor line. ``ray`` is an
optional dependency (``requirements-ray.txt``): it is imported only here, on first use.

The cluster is named by Ray's own ``RAY_ADDRESS`` (``host:port`` of the head's GCS, as
``ray start --head`` prints it). A cluster started with token authentication needs
``RAY_AUTH_MODE=token`` and its token (``RAY_AUTH_TOKEN``, or the file ``~/.ray/auth_token``)
in the environment of the app and of the command line: Ray reads them itself, and bioviz
never prints or logs them.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from bioviz.errors import BiovizError

logger = logging.getLogger(__name__)

EXECUTOR_ENV = "BIOVIZ_EXECUTOR"  # local (default) or ray
EXECUTORS = ("local", "ray")
ADDRESS_ENV = "RAY_ADDRESS"
# Set to 1 to upload the bioviz and trainer packages with every job (runtime_env py_modules),
# for workers that do not have this version of bioviz installed (docs/cluster.md).
SHIP_CODE_ENV = "BIOVIZ_RAY_SHIP_CODE"
CONNECT_TIMEOUT_S = 3.0
# Free resources change as jobs start and end; the page refreshes every 2 s, so one look at
# the cluster serves a few refreshes.
RESOURCES_TTL_S = 5.0

_LOCK = threading.Lock()
_resources: tuple[str, float, dict, dict] | None = None
_connected: str | None = None  # the address this process's ray.init connected to


class ClusterError(BiovizError):
    """The Ray cluster cannot be used (ray not installed, no address, unreachable)."""


@dataclass(frozen=True)
class ClusterResources:
    """What a Ray cluster has, and what of it is free now."""

    address: str
    cpus: float
    gpus: float
    free_cpus: float
    free_gpus: float


def executor_name(name: str | None = None) -> str:
    """``name``, else ``BIOVIZ_EXECUTOR``, else ``local``; lower-cased and checked.

    Raises
    ------
    BiovizError
        If it names no executor.
    """
    chosen = (name or os.environ.get(EXECUTOR_ENV) or "local").strip().lower()
    if chosen not in EXECUTORS:
        raise BiovizError(f"unknown executor {chosen!r} ({EXECUTOR_ENV}): use {' or '.join(EXECUTORS)}")
    return chosen


def import_ray():
    """The ``ray`` module, or a one-line :class:`ClusterError` saying how to install it."""
    try:
        import ray
    except ImportError as error:
        raise ClusterError(f"the Ray executor needs ray ({error}): pip install -r requirements-ray.txt") from error
    return ray


def cluster_address(address: str | None = None) -> str:
    """``address``, else ``RAY_ADDRESS``; a one-line error when neither is set or it is not host:port."""
    address = (address or os.environ.get(ADDRESS_ENV) or "").strip()
    if not address:
        raise ClusterError(f"BIOVIZ_EXECUTOR=ray needs the cluster's address in {ADDRESS_ENV} "
                           "(host:port, as `ray start --head` prints it)")
    host, _, port = address.rpartition(":")
    if address.startswith("ray://") or not host or not port.isdigit():
        raise ClusterError(f"{ADDRESS_ENV}={address!r} is not host:port of a Ray head "
                           "(Ray Client ray:// addresses are not supported)")
    return address


def check_reachable(address: str, timeout_s: float = CONNECT_TIMEOUT_S) -> None:
    """Raise :class:`ClusterError` unless a TCP connection to ``address`` opens within ``timeout_s``.

    Why not let ``ray.init`` find out: it retries an unreachable head for a minute before
    failing, which would freeze a page.
    """
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s):
            pass
    except OSError as error:
        raise ClusterError(f"the Ray cluster at {address} is unreachable ({error.strerror or error})") from error


def runtime_env() -> dict:
    """The runtime environment of bioviz's Ray workers: the code when asked to ship it, quiet progress bars."""
    env: dict = {"env_vars": {"TOKENIZERS_PARALLELISM": "false", "HF_HUB_DISABLE_PROGRESS_BARS": "1",
                              "TQDM_DISABLE": "1"}}
    if os.environ.get(SHIP_CODE_ENV, "").strip() in ("1", "true", "yes"):
        root = Path(__file__).resolve().parents[1]
        env["py_modules"] = [str(root / "bioviz"), str(root / "trainer")]
    return env


def connect(address: str | None = None):
    """Connect this process to the cluster once (later calls reuse the connection); return ``ray``.

    Raises
    ------
    ClusterError
        If ray is missing, the address is unset or malformed, or the head does not answer.
    """
    global _connected
    ray = import_ray()
    address = cluster_address(address)
    if ray.is_initialized() and _connected == address:
        return ray
    check_reachable(address)
    with _LOCK, _keeping_signal_handlers():
        if ray.is_initialized() and _connected != address:
            ray.shutdown()  # RAY_ADDRESS now names another cluster
        if not ray.is_initialized():
            _connected = None
            try:
                host = address.rpartition(":")[0]
                # A head on loopback (a workstation's `ray start --head --node-ip-address 127.0.0.1`):
                # this process joins it on loopback too, else Ray picks the machine's interface.
                loopback = {"_node_ip_address": "127.0.0.1"} if host in ("127.0.0.1", "localhost") else {}
                ray.init(address=address, log_to_driver=False, logging_level=logging.WARNING,
                         runtime_env=runtime_env(), **loopback)
            except Exception as error:  # noqa: BLE001 - ray raises many kinds; each is one line here
                first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
                raise ClusterError(f"cannot connect to the Ray cluster at {address}: {first}") from error
            _connected = address
    return ray


@contextlib.contextmanager
def _keeping_signal_handlers():
    """Put back this process's SIGTERM/SIGINT handlers after ``ray.init`` replaced them.

    Why: ray installs a C-level handler that logs a stack and exits on SIGTERM; a job's runner
    must instead catch it, cancel its Ray task and record the job as cancelled.
    """
    main = threading.current_thread() is threading.main_thread()
    saved = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)} if main else {}
    try:
        yield
    finally:
        for sig, handler in saved.items():
            if handler is not None:
                signal.signal(sig, handler)


def resources(address: str | None = None, fresh: bool = False) -> ClusterResources:
    """The cluster's CPUs and GPUs, total and free (looked up at most every few seconds)."""
    global _resources
    ray = connect(address)
    address = cluster_address(address)
    now = time.monotonic()
    if fresh or _resources is None or _resources[0] != address or now - _resources[1] > RESOURCES_TTL_S:
        _resources = (address, now, ray.cluster_resources(), ray.available_resources())
    _, _, total, free = _resources
    return ClusterResources(address=address, cpus=total.get("CPU", 0.0), gpus=total.get("GPU", 0.0),
                            free_cpus=free.get("CPU", 0.0), free_gpus=free.get("GPU", 0.0))


def describe_executor(name: str | None = None) -> str:
    """Where training jobs run, in one line: ``this machine`` or ``Ray cluster at ADDRESS (free GPUs/CPUs)``.

    Raises
    ------
    ClusterError
        If the Ray executor is configured and its cluster cannot be used (one line why).
    """
    if executor_name(name) == "local":
        return "this machine"
    cluster = resources(fresh=True)
    gpus = f"{cluster.free_gpus:g} of {cluster.gpus:g} GPUs free, " if cluster.gpus else "no GPUs, "
    return f"Ray cluster at {cluster.address} ({gpus}{cluster.free_cpus:g} of {cluster.cpus:g} CPUs free)"
