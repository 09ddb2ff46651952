"""The upload flood of issue 32 against a real server on 127.0.0.1: the server's memory before, during and after.

    .venv/bin/python benchmarks/bench_upload_flood.py [--launcher serve|run] [--app-dir DIR]
        [--sessions 3] [--files 20] [--mib 50] [--after-s 150]

Starts the app (``python -m ui.serve`` or ``streamlit run app.py`` in ``--app-dir``, a fresh
``BIOVIZ_HOME``, a free port on loopback), then per session does what a scripted client does:
the XSRF cookie from ``/_stcore/health``, a websocket session (its id comes only with a run
of the router, which the client asks for when the server has said nothing for 5 s), ``PUT /_stcore/upload_file/<session>/<new id>`` ``--files`` times with
``--mib`` MiB each. Prints the server's RSS (``/proc/<pid>/status``) before, after each
session's flood, and ``--after-s`` seconds after the sessions closed. Loopback only, bounded
loops; the server is stopped at the end.
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import uuid
import warnings
from pathlib import Path

from websockets.sync.client import connect

warnings.filterwarnings("ignore", message=r"connect\(\) must be used")

ROOT = Path(__file__).resolve().parent.parent


def rss_mib(pid: int) -> float:
    """Resident memory of the server process alone (not its children), MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def start_server(args, port: int, home: str) -> subprocess.Popen:
    python = str(ROOT / ".venv/bin/python") if (ROOT / ".venv").exists() else sys.executable
    flags = ["--server.port", str(port), "--server.address", "127.0.0.1", "--server.headless", "true"]
    command = ([python, "-m", "ui.serve", *flags] if args.launcher == "serve"
               else [python, "-m", "streamlit", "run", "app.py", *flags])
    env = {**os.environ, "BIOVIZ_HOME": home, "BIOVIZ_WARMUP": "0", "HF_HUB_OFFLINE": "1"}
    server = subprocess.Popen(command, cwd=args.app_dir, env=env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    for _ in range(120):
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=2).close()
            return server
        except OSError:
            time.sleep(0.5)
    server.kill()
    raise SystemExit("the server did not start")


def xsrf_cookie(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=5) as reply:
        for header in reply.headers.get_all("Set-Cookie") or []:
            if header.startswith("_streamlit_xsrf="):
                return header.split(";", 1)[0].split("=", 1)[1]
    raise SystemExit("no XSRF cookie")


def open_session(port: int, cookie: str, run_page: bool):
    """A websocket session; returns (socket, session id) read from the server's first message."""
    from streamlit.proto.BackMsg_pb2 import BackMsg
    from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

    socket_ = connect(f"ws://127.0.0.1:{port}/_stcore/stream", subprotocols=["streamlit", cookie],
                      additional_headers={"Cookie": f"_streamlit_xsrf={cookie}",
                                          "Origin": f"http://127.0.0.1:{port}"}, max_size=None)
    back = BackMsg()
    back.rerun_script.query_string = ""
    back.rerun_script.page_script_hash = ""
    if run_page:
        socket_.send(back.SerializeToString())
    deadline = time.time() + 60
    while time.time() < deadline:
        try:
            message = ForwardMsg.FromString(socket_.recv(timeout=5))
        except TimeoutError:
            if not run_page:  # the session id only comes with a script run
                socket_.send(back.SerializeToString())
                run_page = True
            continue
        if message.HasField("new_session"):
            return socket_, message.new_session.initialize.session_id
    raise SystemExit("no session id")


def put(port: int, cookie: str, session: str, data: bytes) -> int:
    boundary = uuid.uuid4().hex
    body = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"x.obo\"\r\n"
            "Content-Type: application/octet-stream\r\n\r\n").encode() + data + f"\r\n--{boundary}--\r\n".encode()
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/_stcore/upload_file/{session}/{uuid.uuid4()}", data=body, method="PUT",
        headers={"Content-Type": f"multipart/form-data; boundary={boundary}", "X-Xsrftoken": cookie,
                 "Cookie": f"_streamlit_xsrf={cookie}"})
    try:
        with urllib.request.urlopen(request, timeout=120) as reply:
            return reply.status
    except urllib.error.HTTPError as error:
        return error.code


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--launcher", choices=["serve", "run"], default="serve")
    parser.add_argument("--app-dir", default=str(ROOT))
    parser.add_argument("--sessions", type=int, default=3)
    parser.add_argument("--files", type=int, default=20)
    parser.add_argument("--mib", type=int, default=50)
    parser.add_argument("--after-s", type=float, default=150)
    parser.add_argument("--run-page", action="store_true", help="run the page in each session first")
    args = parser.parse_args()
    port, data = free_port(), b"x" * (args.mib * 2**20)
    with tempfile.TemporaryDirectory() as home:
        server = start_server(args, port, home)
        try:
            cookie = xsrf_cookie(port)
            time.sleep(2)
            print(f"server {args.launcher} in {args.app_dir}: RSS {rss_mib(server.pid):.0f} MiB at start", flush=True)
            sockets = []
            for number in range(args.sessions):
                socket_, session = open_session(port, cookie, args.run_page)
                sockets.append(socket_)
                print(f"session {number + 1} open (the page ran): RSS {rss_mib(server.pid):.0f} MiB", flush=True)
                started = time.time()
                codes = [put(port, cookie, session, data) for _ in range(args.files)]
                print(f"session {number + 1}: {codes.count(204)} of {args.files} x {args.mib} MiB accepted, "
                      f"{len(codes) - codes.count(204)} refused ({time.time() - started:.1f} s); "
                      f"RSS {rss_mib(server.pid):.0f} MiB", flush=True)
            for socket_ in sockets:
                socket_.close()
            for waited in range(0, int(args.after_s) + 1, 30):
                print(f"{waited:>4} s after the sessions closed: RSS {rss_mib(server.pid):.0f} MiB", flush=True)
                time.sleep(min(30, max(0.0, args.after_s - waited)) if waited < args.after_s else 0)
        finally:
            server.terminate()
            server.wait(timeout=30)


if __name__ == "__main__":
    main()
