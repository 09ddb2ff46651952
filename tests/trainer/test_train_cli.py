"""``python -m trainer train`` end to end on a tiny table, its refusals, cancel and export."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from trainer.cli import main

ROOT = Path(__file__).resolve().parents[2]


def _args(data_dir, out, *extra):
    return ["train", "--source", str(data_dir / "trainer_tiny.tsv"), "--depth", "1", "--shots", "3",
            "--hidden", "32", "--epochs", "3", "--base", "minilm", "--out", str(out), "--json", *extra]


def _events(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _env(home: Path) -> dict:
    return {**os.environ, "BIOVIZ_HOME": str(home), "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1",
            "PYTHONPATH": str(ROOT)}


@pytest.mark.slow
def test_train_cli_end_to_end_writes_a_loadable_run(data_dir, tmp_home, tmp_path):
    out, progress = tmp_path / "run-a", tmp_path / "progress.jsonl"
    proc = subprocess.run([sys.executable, "-m", "trainer", *_args(data_dir, out, "--encoder", "residual",
                                                                    "--progress-file", str(progress))],
                          cwd=ROOT, env=_env(tmp_home), capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)  # stdout is exactly one JSON object
    assert summary["run_dir"] == str(out) and summary["epochs"] >= 1 and summary["seconds"] > 0
    assert set(summary["baseline"]) >= {"validation", "test"} and "mAP" in summary["trained"]["test"]
    events = _events(progress)
    kinds = [e["event"] for e in events]
    start = kinds.index("start")
    # Embedding the level's names is reported first (throttled, always ending with all done).
    assert start >= 1 and set(kinds[:start]) == {"embedding"} and "embedding" not in kinds[start:]
    assert events[start - 1]["done"] == events[start - 1]["total"] > 0
    assert kinds[-1] == "done"
    assert any(e["event"] == "epoch" and "total" in e["losses"] for e in events)
    record = json.loads((out / "run.json").read_text())
    assert record["run_id"] == "run-a"
    config = record["config"]
    assert config["encoder"] == "residual" and config["shots"] == 3 and config["base"] == "minilm"
    assert len(config["base_fingerprint"]) >= 16 and config["split"]["seed"] == 0
    assert set(record["metrics"]) >= {"history", "baseline", "trained"}
    assert set(record["timings"]) >= {"embedding_s", "training_s", "per_epoch_s"}
    assert (out / "head.safetensors").is_file()
    assert not list(tmp_path.glob(".run-a.partial-*"))
    assert not (out / ".owner.json").exists()  # the export's owner record does not travel with the run

    from sentence_transformers import SentenceTransformer

    from bioviz.models.registry import embed

    names = ["heart attack", "hives"]
    direct = SentenceTransformer(str(out), device="cpu").encode(names, normalize_embeddings=True)
    via_bioviz = embed(names, str(out), use_cache=False).vectors
    assert direct.shape == (2, 384)
    assert np.allclose(direct, via_bioviz, atol=1e-5)
    assert not np.allclose(direct, embed(names, "minilm", use_cache=False).vectors, atol=1e-3)


@pytest.mark.slow
def test_init_continues_from_an_earlier_run(data_dir, tmp_home, tmp_path, capsys):
    first, second = tmp_path / "first", tmp_path / "second"
    assert main(_args(data_dir, first, "--encoder", "dan")) == 0
    assert main(_args(data_dir, second, "--encoder", "residual", "--init", str(first))) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    record = json.loads((second / "run.json").read_text())
    assert record["config"]["init"] == str(first) and record["config"]["input_model"] == str(first)
    # The baseline of a continued run is the earlier run's output.
    first_record = json.loads((first / "run.json").read_text())
    assert summary["baseline"]["test"]["mAP"] == pytest.approx(first_record["metrics"]["trained"]["test"]["mAP"],
                                                              abs=1e-4)
    modules = json.loads((second / "modules.json").read_text())
    assert sum(m["type"].endswith("Dense") for m in modules) == 4


@pytest.mark.slow
def test_cca_run_also_saves_the_projection_alone(data_dir, tmp_home, tmp_path, capsys):
    out = tmp_path / "cca"
    assert main(_args(data_dir, out, "--encoder", "cca", "--base-weight", "0.5")) == 0
    summary = json.loads(capsys.readouterr().out)
    assert "cca_projection" in summary and summary["base_weight"] == 0.5
    from sentence_transformers import SentenceTransformer

    from bioviz.models.registry import embed

    assert embed(["asthma"], str(out / "cca_projection"), use_cache=False).vectors.shape == (1, 384)
    # CCA, DAN and the input carried alongside: still only built-in modules, still exact.
    direct = SentenceTransformer(str(out), device="cpu").encode(["asthma", "hives"], normalize_embeddings=True)
    assert np.allclose(direct, embed(["asthma", "hives"], str(out), use_cache=False).vectors, atol=1e-5)
    assert json.loads((out / "run.json").read_text())["metrics"]["base_mix"]["chosen_by"] == "fixed"


def test_base_weight_auto_is_spelt_out(data_dir, tmp_home, tmp_path, capsys):
    assert main(_args(data_dir, tmp_path / "auto", "--encoder", "dan", "--base-weight", "auto",
                      "--min-retention", "1")) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["base_weight"] == 1.0  # only the input itself keeps all of its order


@pytest.mark.parametrize(
    "extra, reason",
    [
        (["--encoder", "transformer-xl"], "unknown encoder"),
        (["--shots", "50"], "larger than the classes allow"),
        (["--base", "/nonexistent/model"], "not found"),
        (["--base", "char-tfidf"], "char-tfidf"),
        (["--lr", "-1"], "lr must be > 0 (got -1.0)"),
        (["--lr", "0"], "lr must be > 0 (got 0.0)"),  # 0 is refused, not read as "the default"
        (["--batch-size", "0"], "batch_size must be >= 2 (got 0)"),
        (["--epochs", "0"], "epochs must be >= 1 (got 0)"),
        (["--init", "/nonexistent/run"], "not a complete trained run"),
        (["--context-weight", "1"], "contextual loss applies to dan and cca only"),
        (["--encoder", "definitions", "--identity-start"], "identity_start applies to trained heads"),
        (["--triplet-weight", "-1"], "triplet_weight must be >= 0"),
        (["--base-weight", "1.5"], "base_weight must be in [0, 1]"),
        (["--encoder", "definitions", "--base-weight", "0.5"], "base_weight applies to trained heads"),
        (["--min-retention", "2"], "min_retention must be in [0, 1]"),
        (["--encoder", "dan", "--identity-start"], "identity start needs hidden >= 2 x 384 = 768"),
    ],
)
def test_bad_input_exits_2_before_training(extra, reason, data_dir, tmp_home, tmp_path, capsys):
    progress = tmp_path / "p.jsonl"
    code = main(_args(data_dir, tmp_path / "never", *extra, "--progress-file", str(progress)))
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith("error: ") and reason in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "never").exists()
    assert [e["event"] for e in _events(progress)] == ["error"]


def test_auto_is_a_word_of_base_weight_only(data_dir, tmp_home, tmp_path, capsys):
    with pytest.raises(SystemExit) as exited:  # argparse: "auto" shots are not "all names"
        main(_args(data_dir, tmp_path / "never", "--shots", "auto"))
    assert exited.value.code == 2 and "invalid int value: 'auto'" in capsys.readouterr().err
    from bioviz.errors import BiovizError
    from trainer.config import TrainConfig, validate

    with pytest.raises(BiovizError, match="base_weight must be in \\[0, 1\\], or auto"):
        validate(TrainConfig(source=str(data_dir / "trainer_tiny.tsv"), base_weight="auto"))


def test_existing_output_is_refused(data_dir, tmp_home, tmp_path, capsys):
    out = tmp_path / "taken"
    out.mkdir()
    (out / "something").write_text("x")
    assert main(_args(data_dir, out)) == 2
    assert "already exists" in capsys.readouterr().err


@pytest.mark.slow
def test_sigterm_cancels_with_130_and_leaves_no_run(data_dir, tmp_home, tmp_path):
    out, progress = tmp_path / "cancelled", tmp_path / "progress.jsonl"
    args = _args(data_dir, out, "--epochs", "10000", "--patience", "10000", "--batch-size", "2",
                 "--hidden", "256", "--progress-file", str(progress))
    proc = subprocess.Popen([sys.executable, "-m", "trainer", *args], cwd=ROOT, env=_env(tmp_home),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.time() + 240
        while time.time() < deadline:
            if progress.exists() and any(e["event"] == "epoch" for e in _events(progress)):
                break
            assert proc.poll() is None, proc.stderr.read()
            time.sleep(0.5)
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert code == 130
    assert not out.exists() and not list(tmp_path.glob(".cancelled.partial-*"))
    assert _events(progress)[-1] == {**_events(progress)[-1], "event": "error", "cancelled": True}


@pytest.mark.slow
def test_definitions_fine_tunes_and_exports(data_dir, tmp_home, tmp_path, capsys):
    out = tmp_path / "defs"
    assert main(_args(data_dir, out, "--encoder", "definitions", "--epochs", "1", "--batch-size", "4")) == 0
    summary = json.loads(capsys.readouterr().out)
    record = json.loads((out / "run.json").read_text())
    assert record["metrics"]["pairs"]["pairs"] >= 2
    assert summary["epochs"] == 1 and summary["trained"]["test"]["mAP"] is not None
    from sentence_transformers import SentenceTransformer

    assert SentenceTransformer(str(out), device="cpu").encode(["asthma"]).shape == (1, 384)


@pytest.mark.slow
def test_hierarchical_can_fine_tune_the_base_transformer(data_dir, tmp_home, tmp_path, capsys):
    out = tmp_path / "hiprbert"
    assert main(_args(data_dir, out, "--encoder", "hierarchical", "--finetune", "--epochs", "1",
                      "--batch-size", "4")) == 0
    record = json.loads((out / "run.json").read_text())
    assert record["config"]["finetune"] and record["config"]["lr"] == 2e-5
    assert record["metrics"]["history"][0]["losses"]["ms"] > 0
    modules = json.loads((out / "modules.json").read_text())
    assert not any(m["type"].endswith("Dense") for m in modules)  # the transformer itself was trained
    assert not (out / "head.safetensors").exists()


def test_finetune_is_refused_for_head_encoders(data_dir, tmp_home, tmp_path, capsys):
    assert main(_args(data_dir, tmp_path / "x", "--encoder", "dan", "--finetune")) == 2
    assert "finetune applies to the hierarchical encoder" in capsys.readouterr().err


def test_config_file_with_options_overriding_it(data_dir, tmp_home, tmp_path, capsys):
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"source": str(data_dir / "trainer_tiny.tsv"), "shots": 3, "hidden": 32,
                                  "epochs": 5, "encoder": "dan", "base_weight": None}))
    out = tmp_path / "from-file"
    assert main(["train", "--config", str(config), "--epochs", "1", "--out", str(out), "--json"]) == 0
    record = json.loads((out / "run.json").read_text())["config"]
    assert record["encoder"] == "dan" and record["shots"] == 3 and record["hidden"] == 32  # from the file
    assert record["epochs"] == 1  # the option given on the command line wins
    capsys.readouterr()
    config.write_text(json.dumps({"source": "icd10", "learning_rate": 0.1}))
    assert main(["train", "--config", str(config), "--out", str(tmp_path / "never")]) == 2
    assert capsys.readouterr().err.strip() == "error: unknown training option(s): learning_rate"


@pytest.mark.parametrize("content, reason", [
    (None, "cannot read config file"),
    (b"\x00\xff garbage", "is not JSON"),
    (b'["source", "icd10"]', "must hold a JSON object"),
    (b'{"source": "icd10", "batch_size": "big"}', "batch_size"),
])
def test_a_damaged_config_file_is_one_line_and_creates_nothing(tmp_home, tmp_path, capsys, content, reason):
    config = tmp_path / "config.json"
    if content is not None:
        config.write_bytes(content)
    out = tmp_path / "never"
    assert main(["train", "--config", str(config), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and reason in err and "\n" not in err
    assert not out.exists()


@pytest.mark.slow
def test_a_direct_train_killed_mid_export_leaves_a_partial_folder_the_next_listing_removes(data_dir, tmp_home):
    """``trainer train --out runs/NAME`` killed before its rename (not a job: nothing tidies after it).

    Before: ``runs/.NAME.partial-*`` (the exported weights, ~100 MB for a fine-tuned run) stayed forever.
    """
    from trainer.crash_points import CRASH_ENV, CRASH_EXIT_CODE

    from bioviz.models.runs import list_runs, runs_dir

    out = runs_dir() / "direct"
    proc = subprocess.run([sys.executable, "-m", "trainer", *_args(data_dir, out, "--epochs", "1")], cwd=ROOT,
                          env={**_env(tmp_home), CRASH_ENV: "export:before-rename"}, capture_output=True, text=True,
                          timeout=300, check=False)
    assert proc.returncode == CRASH_EXIT_CODE, proc.stderr[-2000:]
    left = list(runs_dir().glob(".direct.partial-*"))
    assert len(left) == 1 and (left[0] / "run.json").is_file()  # killed with its export complete, not renamed
    assert list_runs() == [] and not left[0].exists() and not out.exists()
