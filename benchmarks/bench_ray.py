"""Ray against this machine, side by side in one run: a training job's wall time, and encoding throughput.

    python benchmarks/bench_ray.py jobs                      # 15-shot residual on ICD-10 chapters: ray/local <= 1.3
    python benchmarks/bench_ray.py embed --n 110000          # ICD-10-CM names/s: local, Ray Data 1 and 2 workers

Without ``RAY_ADDRESS`` a Ray head is started on 127.0.0.1 with this machine's CPUs for the
run and stopped after (its own process group). Every job and every encoding starts from an
empty ``BIOVIZ_HOME`` (and worker home), so both sides encode the level.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")  # before ray is imported: stay on 127.0.0.1


@contextmanager
def ray_head(cpus: int):
    """``RAY_ADDRESS`` if set, else a head started here for the run."""
    if os.environ.get("RAY_ADDRESS"):
        yield os.environ["RAY_ADDRESS"]
        return
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    temp = tempfile.mkdtemp(prefix="rb", dir="/tmp")
    log = Path(temp) / "head.log"
    ray = Path(sys.executable).with_name("ray")
    with open(log, "wb") as out:
        head = subprocess.Popen([str(ray), "start", "--head", "--block", "--port", str(port), "--num-cpus", str(cpus),
                                 "--disable-usage-stats", "--node-ip-address", "127.0.0.1", "--include-dashboard",
                                 "false", "--temp-dir", temp], stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
    while b"Ray runtime started" not in log.read_bytes():
        if head.poll() is not None:
            raise SystemExit(f"ray start failed:\n{log.read_text()[-2000:]}")
        time.sleep(0.5)
    os.environ["RAY_ADDRESS"] = f"127.0.0.1:{port}"
    try:
        yield os.environ["RAY_ADDRESS"]
    finally:
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(head.pid, sig)
            except ProcessLookupError:
                break
            time.sleep(5)
        os.environ.pop("RAY_ADDRESS", None)


def job_seconds(executor: str, config: dict) -> tuple[float, dict]:
    """Wall time from submit to a settled, succeeded job, in a fresh home."""
    from trainer.jobs.queue import Worker, executor_from_env
    from trainer.jobs.store import JobStore

    home = Path(tempfile.mkdtemp(prefix=f"bench-{executor}-"))
    os.environ["BIOVIZ_HOME"] = str(home)
    os.environ["BIOVIZ_RAY_WORKER_HOME"] = str(home / "worker")
    worker = Worker(store=JobStore(home / "jobs.sqlite"), executor=executor_from_env(executor))
    started = time.perf_counter()
    job = worker.submit(config, device="cpu")
    while not ((job := worker.store.get(job.id)).finished and job.settled):
        worker.reconcile()
        time.sleep(0.5)
    seconds = time.perf_counter() - started
    if job.status != "succeeded":
        raise SystemExit(f"{executor} job {job.status}: {job.error}\n{Path(job.log_path).read_text()[-2000:]}")
    return seconds, job.progress.get("summary", {})


def bench_jobs(args) -> dict:
    config = {"source": args.source, "depth": args.depth, "shots": args.shots, "encoder": "residual",
              "base": "minilm"}
    local_s, local = job_seconds("local", config)
    with ray_head(os.cpu_count() or 2):
        ray_s, remote = job_seconds("ray", config)
    result = {"config": config, "local_s": round(local_s, 1), "ray_s": round(ray_s, 1),
              "ray_over_local": round(ray_s / local_s, 2),
              "epochs": [local.get("epochs"), remote.get("epochs")],
              "test_mAP": [local.get("trained", {}).get("test", {}).get("mAP"),
                           remote.get("trained", {}).get("test", {}).get("mAP")]}
    print(json.dumps(result, indent=1))
    return result


def bench_embed(args) -> dict:
    from bioviz.models import ray_embedding
    from bioviz.models.embeddings import load_encoder
    from bioviz.ontology import level_view, load_source

    os.environ["BIOVIZ_HOME"] = tempfile.mkdtemp(prefix="bench-embed-")
    names = list(dict.fromkeys(level_view(load_source(args.source), depth=args.depth).names))[: args.n]
    encoder = load_encoder("minilm")
    encoder.encode(names[:64])  # load the weights: each Ray actor loads its own inside its time
    result = {"source": args.source, "names": len(names)}
    started = time.perf_counter()
    local = encoder.encode(names, batch_size=args.batch_size)
    result["local_names_per_s"] = round(len(names) / (time.perf_counter() - started), 1)
    with ray_head(os.cpu_count() or 2):
        for workers in (1, 2):
            started = time.perf_counter()
            vectors = ray_embedding.encode(encoder, load_encoder, names, batch_size=args.batch_size, workers=workers)
            rate = len(names) / (time.perf_counter() - started)
            result[f"ray_{workers}_names_per_s"] = round(rate, 1)
            result[f"ray_{workers}_over_local"] = round(rate / result["local_names_per_s"], 2)
            result[f"ray_{workers}_max_abs_diff"] = float(abs(vectors - local).max())
    print(json.dumps(result, indent=1))
    return result


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="what", required=True)
    jobs = sub.add_parser("jobs", help="a training job: local executor vs Ray")
    jobs.add_argument("--source", default="icd10")
    jobs.add_argument("--depth", type=int, default=1)
    jobs.add_argument("--shots", type=int, default=15)
    embed = sub.add_parser("embed", help="encoding throughput: local vs Ray Data with 1 and 2 workers")
    embed.add_argument("--source", default="icd10cm")
    embed.add_argument("--depth", type=int, default=1, help="chapters: every code's names belong to one")
    embed.add_argument("--n", type=int, default=110_000, help="first n distinct names")
    embed.add_argument("--batch-size", type=int, default=64)
    args = parser.parse_args(argv)
    return bench_jobs(args) if args.what == "jobs" else bench_embed(args)


if __name__ == "__main__":
    main()
