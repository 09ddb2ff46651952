"""A real Ray head on 127.0.0.1 for the whole session (tests/cluster/), stopped afterwards.

The head is ``ray start --head --block`` in its own process group on free ports, with a
short temporary folder of its own; the session ends by signalling that group only (never
``ray stop``, which stops every Ray process of the user on the machine).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from cluster_support import free_port, stop_group

HEAD_START_TIMEOUT_S = 180.0
# Every Ray process on 127.0.0.1 (ISSUE15: Ray otherwise binds the machine's interface).
ON_LOOPBACK = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}


@pytest.fixture(scope="session")
def ray_head(tmp_path_factory):
    """``host:port`` of a Ray head started for this session (2 CPUs), set as ``RAY_ADDRESS``."""
    saved = {key: os.environ.get(key) for key in ("RAY_ADDRESS", "BIOVIZ_RAY_WORKER_HOME", *ON_LOOPBACK)}
    os.environ.update(ON_LOOPBACK)  # read by ray when imported
    ray = pytest.importorskip("ray", reason="ray is not installed (pip install -r requirements-ray.txt; CI has it)")
    port = free_port()
    temp = tempfile.mkdtemp(prefix="rt", dir="/tmp")  # short: Ray's socket paths must fit in 107 characters
    log_path = tmp_path_factory.mktemp("ray-head") / "head.log"
    env = {**os.environ, **ON_LOOPBACK}
    env.pop("RAY_ADDRESS", None)
    command = [str(Path(sys.executable).with_name("ray")), "start", "--head", "--block", "--port", str(port),
               "--num-cpus", "2", "--num-gpus", "0", "--disable-usage-stats", "--node-ip-address", "127.0.0.1",
               "--include-dashboard", "false", "--temp-dir", temp,
               "--dashboard-agent-listen-port", str(free_port())]
    with open(log_path, "wb") as log:
        head = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    deadline = time.monotonic() + HEAD_START_TIMEOUT_S
    while b"Ray runtime started" not in log_path.read_bytes():
        assert head.poll() is None, f"ray start failed:\n{log_path.read_text()[-3000:]}"
        assert time.monotonic() < deadline, f"the Ray head did not start:\n{log_path.read_text()[-3000:]}"
        time.sleep(0.5)
    address = f"127.0.0.1:{port}"
    os.environ.update({"RAY_ADDRESS": address, **ON_LOOPBACK,
                       # the workers' home: minilm's vectors of the fixture level encoded once per session
                       "BIOVIZ_RAY_WORKER_HOME": str(tmp_path_factory.mktemp("ray-worker-home"))})
    try:
        yield address
    finally:
        if ray.is_initialized():
            ray.shutdown()
        stop_group(head, grace_s=10.0)
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
