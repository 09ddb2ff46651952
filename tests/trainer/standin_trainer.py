"""A stand-in for ``python -m trainer train`` that keeps the trainer's job contract, fast.

Used only by the job tests: it writes the same progress events, stops between "batches"
on SIGTERM with exit code 130, and writes its run directory to a temporary folder renamed
at the end. It reads the job's ``--config FILE`` like the trainer; there ``epochs``,
``epoch_s`` (seconds per epoch), ``fail_at`` (raise at that epoch), ``wait_file`` (do not
finish while that file is missing; with ``hold_at`` N, stop after epoch N until it exists),
``patience`` (report early stopping's ``stop_by`` and ETA range as the real loop does, every
epoch improving), ``linger_file`` (after publishing the run, stay until that file exists or a
SIGTERM comes) and ``ignore_term`` (a trainer that does not stop when asked) steer it. A ``source`` that looks like a file path must exist, seen from the trainer's working
directory, as for the real trainer. ``BIOVIZ_CRASH_AT=export:before-rename`` or ``export:after-rename`` ends it
where the real trainer's run export has its crash points.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from pathlib import Path

from trainer.crash_points import crash_point
from trainer.events import epoch_estimate

stop = False

# What a head run records of its automatic base-weight choice (trainer.base_mix).
STANDIN_BASE_MIX = {"weight": 0.5, "scale": 1.0, "chosen_by": "validation", "min_retention": 0.85,
                    "candidates": [{"weight": w / 10, "val_mAP": 0.8 - w / 40, "val_retention": 0.5 + w / 20}
                                   for w in range(11)]}


def on_term(signum, frame):
    global stop
    stop = True
    # as trainer.events.cancel_on_signals: the runner's forwarded duplicate must not kill the exit
    # (the interpreter resets Python handlers to the default while it shuts down)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)


def emit(path: Path, event: dict) -> None:
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(json.dumps(event) + "\n")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("command", choices=["train"])
    parser.add_argument("--out", required=True)
    parser.add_argument("--progress-file", required=True)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--config", required=True)
    args, _ = parser.parse_known_args(argv)
    config = json.loads(Path(args.config).read_text())
    for name, default in (("epochs", 3), ("epoch_s", 0.05), ("fail_at", 0), ("wait_file", None),
                          ("linger_file", None), ("source", "mini"), ("ignore_term", False), ("hold_at", None),
                          ("patience", None)):
        setattr(args, name, config.get(name, default))
    signal.signal(signal.SIGTERM, signal.SIG_IGN if args.ignore_term else on_term)
    progress = Path(args.progress_file)
    if Path(args.source).suffix and not Path(args.source).exists():
        emit(progress, {"event": "error", "message": f"unknown source {args.source!r}"})
        print(f"error: unknown source {args.source!r}", file=sys.stderr, flush=True)
        return 2
    out = Path(args.out)
    tmp = out.parent / f".{out.name}.tmp-{os.getpid()}"
    tmp.mkdir(parents=True)
    (tmp / "weights.bin").write_bytes(b"0" * 16)
    emit(progress, {"event": "start", "max_epochs": args.epochs, "device": args.device})
    print(f"standin: training {args.epochs} epochs on {args.device}", flush=True)
    start = time.time()
    for epoch in range(1, args.epochs + 1):
        for _batch in range(10):
            if stop:
                print("standin: stopped by SIGTERM", flush=True)
                return 130
            time.sleep(args.epoch_s / 10)
        if epoch == args.fail_at:
            emit(progress, {"event": "error", "message": f"loss became NaN at epoch {epoch}"})
            print(f"error: loss became NaN at epoch {epoch}", file=sys.stderr, flush=True)
            return 1
        elapsed = time.time() - start
        emit(progress, {"event": "epoch", "epoch": epoch, "max_epochs": args.epochs,
                        "losses": {"total": 1.0 / epoch, "triplet": 0.5 / epoch}, "val_metric": 0.5 + epoch / 100,
                        "val_name": "mAP", "elapsed_s": elapsed,
                        **epoch_estimate(epoch, args.epochs, elapsed, best_epoch=epoch if args.patience else None,
                                         patience=args.patience)})
        while epoch == args.hold_at and not Path(args.wait_file).exists():
            if stop:
                print("standin: stopped by SIGTERM", flush=True)
                return 130
            time.sleep(0.05)
    while args.wait_file and not Path(args.wait_file).exists():
        if stop:
            print("standin: stopped by SIGTERM", flush=True)
            return 130
        time.sleep(0.05)
    (tmp / "run.json").write_text(json.dumps({"run_id": out.name, "config": {"source": args.source},
                                              "metrics": {"baseline": {"mAP": 0.5}, "trained": {"mAP": 0.6},
                                                          "base_mix": STANDIN_BASE_MIX}}))
    crash_point("export:before-rename")  # the same crash points as trainer.runs.train_run
    os.replace(tmp, out)
    crash_point("export:after-rename")
    emit(progress, {"event": "done", "run_dir": str(out), "summary": {"mAP": 0.6}})
    while args.linger_file and not Path(args.linger_file).exists():
        if stop:  # a cancel that came after the run was published
            print("standin: stopped by SIGTERM after publishing", flush=True)
            return 130
        time.sleep(0.02)
    if args.json:
        print(json.dumps({"run_dir": str(out)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
