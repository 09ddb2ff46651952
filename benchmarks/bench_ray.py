"""Ray against this machine, side by side in one run: a training job's wall time, and encoding throughput.

    python benchmarks/bench_ray.py jobs                      # 15-shot residual on ICD-10 chapters: ray/local <= 1.3
    python benchmarks/bench_ray.py jobs --warm-cache HOME    # ... both sides start from HOME's vector cache
    python benchmarks/bench_ray.py embed --n 110000          # ICD-10-CM names/s: local, Ray Data 1 and 2 workers

Without ``RAY_ADDRESS`` a Ray head is started on 127.0.0.1 with this machine's CPUs for the
run and stopped after (its own process group). Every job starts from a fresh ``BIOVIZ_HOME``
(and worker home): empty, so both sides encode the level, or with ``--warm-cache`` a copy of
another home's ``embeddings/`` in both, so both measure training (each job reports how many of
its names were cached when it looked). ``embed`` also times each Ray set-up on a few names, so its fixed
start-up cost and its per-name rate are known apart and the rate at a larger size can be
extrapolated.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
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


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextmanager
def ray_head(cpus: int):
    """``RAY_ADDRESS`` if set, else a head started here for the run."""
    if os.environ.get("RAY_ADDRESS"):
        yield os.environ["RAY_ADDRESS"]
        return
    port = free_port()
    temp = tempfile.mkdtemp(prefix="rb", dir="/tmp")
    log = Path(temp) / "head.log"
    ray = Path(sys.executable).with_name("ray")
    with open(log, "wb") as out:
        head = subprocess.Popen([str(ray), "start", "--head", "--block", "--port", str(port), "--num-cpus", str(cpus),
                                 "--disable-usage-stats", "--node-ip-address", "127.0.0.1", "--include-dashboard",
                                 "false", "--temp-dir", temp, "--dashboard-agent-listen-port", str(free_port())],
                                stdout=out, stderr=subprocess.STDOUT,
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


def job_seconds(executor: str, config: dict, warm_cache: Path | None = None) -> tuple[float, dict, int | None]:
    """Wall time from submit to a settled, succeeded job in a fresh home; its summary; names found cached."""
    from trainer.jobs.progress import read_progress
    from trainer.jobs.queue import Worker, executor_from_env
    from trainer.jobs.store import JobStore

    home = Path(tempfile.mkdtemp(prefix=f"bench-{executor}-"))
    os.environ["BIOVIZ_HOME"] = str(home)
    os.environ["BIOVIZ_RAY_WORKER_HOME"] = str(home / "worker")
    if warm_cache is not None:  # the same vectors on both sides: the app's home and the worker's
        for target in (home, home / "worker"):
            shutil.copytree(warm_cache / "embeddings", target / "embeddings")
    worker = Worker(store=JobStore(home / "jobs.sqlite"), executor=executor_from_env(executor))
    started = time.perf_counter()
    job = worker.submit(config, device="cpu")
    while not ((job := worker.store.get(job.id)).finished and job.settled):
        worker.reconcile()
        time.sleep(0.5)
    seconds = time.perf_counter() - started
    if job.status != "succeeded":
        raise SystemExit(f"{executor} job {job.status}: {job.error}\n{Path(job.log_path).read_text()[-2000:]}")
    # names already in the cache when the job looked (its first embedding event): all of them = a warm start
    embedding = [e for e in read_progress(job.progress_path) if e.get("event") == "embedding"]
    cached = embedding[0]["done"] if embedding else None
    return seconds, job.progress.get("summary", {}), cached


def bench_jobs(args) -> dict:
    config = {"source": args.source, "depth": args.depth, "shots": args.shots, "encoder": "residual",
              "base": "minilm", **({"root": args.root} if args.root else {})}
    warm = Path(args.warm_cache) if args.warm_cache else None
    result = {"config": config, "load_before": os.getloadavg()}
    local_s, local, local_cached = job_seconds("local", config, warm)
    with ray_head(os.cpu_count() or 2):
        ray_s, remote, ray_cached = job_seconds("ray", config, warm)
    result.update({"local_s": round(local_s, 1), "ray_s": round(ray_s, 1),
              "ray_over_local": round(ray_s / local_s, 2), "load_after": os.getloadavg(),
              "names_cached_at_start": [local_cached, ray_cached],
              "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
              "epochs": [local.get("epochs"), remote.get("epochs")],
              "test_mAP": [local.get("trained", {}).get("test", {}).get("mAP"),
                           remote.get("trained", {}).get("test", {}).get("mAP")]})
    print(json.dumps(result, indent=1))
    return result


def bench_embed(args) -> dict:
    from bioviz.models import ray_embedding
    from bioviz.models.registry import load_encoder
    from bioviz.ontology import level_view, load_source

    os.environ["BIOVIZ_HOME"] = tempfile.mkdtemp(prefix="bench-embed-")

    def torch_encoder(spec):
        return load_encoder(spec, backend="torch")
    names = list(dict.fromkeys(level_view(load_source(args.source), depth=args.depth).names))[: args.n]
    result = {"source": args.source, "names": len(names), "load_before": os.getloadavg()}
    started = time.perf_counter()
    encoder = load_encoder("minilm", backend="torch")  # what Ray workers load: the model as trained
    encoder.encode(names[:64])  # load the weights: each Ray actor loads its own inside its time
    result["local_start_s"] = round(time.perf_counter() - started, 1)  # model load + one batch
    started = time.perf_counter()
    local = encoder.encode(names, batch_size=args.batch_size)
    local_rate = len(names) / (time.perf_counter() - started)
    result["local_names_per_s"] = round(local_rate, 1)
    extrapolate = args.extrapolate_to
    with ray_head(os.cpu_count() or 2):
        for workers in (1, 2):
            # the fixed cost: a call on a few names is almost all start-up (actors, model loads)
            started = time.perf_counter()
            ray_embedding.encode(encoder, torch_encoder, names[:args.probe], batch_size=args.batch_size,
                                 workers=workers)
            start_s = time.perf_counter() - started
            started = time.perf_counter()
            vectors = ray_embedding.encode(encoder, torch_encoder, names, batch_size=args.batch_size, workers=workers)
            total_s = time.perf_counter() - started
            rate = len(names) / total_s
            # per-name rate once running: the whole call less its start-up, on the names past the probe's
            steady = (len(names) - args.probe) / max(total_s - start_s, 1e-9)
            at_scale = extrapolate / (start_s + extrapolate / steady)
            result[f"ray_{workers}"] = {
                "start_s": round(start_s, 1), "names_per_s": round(rate, 1), "over_local": round(rate / local_rate, 2),
                "steady_names_per_s": round(steady, 1),
                f"extrapolated_over_local_at_{extrapolate}": round(at_scale / local_rate, 2),
                "max_abs_diff": float(abs(vectors - local).max())}
    result["load_after"] = os.getloadavg()
    print(json.dumps(result, indent=1))
    return result


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="what", required=True)
    jobs = sub.add_parser("jobs", help="a training job: local executor vs Ray")
    jobs.add_argument("--source", default="icd10")
    jobs.add_argument("--depth", type=int, default=1)
    jobs.add_argument("--shots", type=int, default=15)
    jobs.add_argument("--root", default=None, help="root concept (default: the source's)")
    jobs.add_argument("--warm-cache", default=None, metavar="HOME",
                      help="a BIOVIZ_HOME whose embeddings/ both sides start from (measure training, not encoding)")
    embed = sub.add_parser("embed", help="encoding throughput: local vs Ray Data with 1 and 2 workers")
    embed.add_argument("--source", default="icd10cm")
    embed.add_argument("--depth", type=int, default=1, help="chapters: every code's names belong to one")
    embed.add_argument("--n", type=int, default=110_000, help="first n distinct names")
    embed.add_argument("--batch-size", type=int, default=64)
    embed.add_argument("--probe", type=int, default=64, help="names of the start-up-cost call")
    embed.add_argument("--extrapolate-to", type=int, default=110_000, help="names the rate is extrapolated to")
    args = parser.parse_args(argv)
    return bench_jobs(args) if args.what == "jobs" else bench_embed(args)


if __name__ == "__main__":
    main()
