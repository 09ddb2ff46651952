"""``python -m trainer pretrain`` on the tiny OBO with minilm: a loadable model, resume, refusals."""

from __future__ import annotations

import json

import numpy as np
import pytest

from bioviz.models.encoders import load_sentence_transformer
from bioviz.models.registry import load_encoder
from trainer.cli import main
from trainer.events import CancelFlag, Cancelled
from trainer.pretrain.config import CONFIG_FILE, PretrainConfig, validate
from trainer.pretrain.fit import CHECKPOINTS, RESULT_FILE, pretrain


def _args(data_dir, out, *extra):
    return ["pretrain", "--sources", str(data_dir / "mini.obo"), "--objectives", "synonyms", "definitions",
            "hierarchy", "--batch-size", "4", "--device", "cpu", "--out", str(out), "--json", *extra]


@pytest.mark.slow
def test_pretrain_writes_a_model_bioviz_loads_and_records_what_it_excluded(data_dir, tmp_home, tmp_path, capsys):
    out = tmp_path / "pretrained"
    level = f"{data_dir / 'mini.obo'}::1"
    assert main(_args(data_dir, out, "--exclude-level", level, "--shots", "1", "--save-steps", "1000",
                     "--max-seq-length", "16")) == 0
    summary = json.loads(capsys.readouterr().out)
    saved = json.loads((out / RESULT_FILE).read_text())
    assert saved == summary
    assert set(saved["pairs"]["objectives"]) == {"synonyms", "definitions", "hierarchy"}
    assert saved["excluded"]["total"] > 0
    assert saved["excluded"]["levels"][0]["split"]["shots"] == 1
    assert saved["validation"]["before"]["pairs"] == saved["validation"]["after"]["pairs"] > 0
    # full batches of 4 only; a batch the no-duplicate-concept sampler cannot fill is not a step
    assert 0 < saved["steps"] <= saved["pairs"]["train"] // 4
    assert not (out / CHECKPOINTS).exists() and not (out / CONFIG_FILE).exists()
    names = ["heart attack", "myocardial infarction"]
    pretrained, base = load_encoder(str(out)).encode(names), load_encoder("minilm").encode(names)
    assert pretrained.shape == base.shape and not np.allclose(pretrained, base, atol=1e-4)
    # texts were truncated while training only: the model encodes as long texts as its base
    assert load_sentence_transformer(str(out)).max_seq_length == load_sentence_transformer("minilm").max_seq_length


@pytest.mark.slow
def test_an_interrupted_run_resumes_from_its_checkpoint(data_dir, tmp_home, tmp_path, capsys):
    out = tmp_path / "pretrained"
    config = validate(PretrainConfig(sources=[str(data_dir / "mini.obo")], objectives=["synonyms", "definitions"],
                                     batch_size=4, device="cpu", save_steps=1000, validation_pairs=0))
    cancel = CancelFlag()
    steps, total = [], []

    def stop_before_the_last(event):
        if event["event"] == "start":
            total.append(event["total_steps"])
        if event["event"] == "step":
            steps.append(event["step"])
            if event["step"] == total[0] - 1:
                cancel.set()

    with pytest.raises(Cancelled, match="--resume"):
        pretrain(config, out, callbacks=[stop_before_the_last], cancel=cancel)
    last = total[0]
    assert last >= 3 and steps == list(range(1, last))
    assert (out / CHECKPOINTS / f"checkpoint-{last - 1}").is_dir() and not (out / RESULT_FILE).exists()
    assert main(["pretrain", "--out", str(out), "--resume", "--json"]) == 0
    captured = capsys.readouterr()
    summary = json.loads(captured.out)
    assert summary["resumed_from_step"] == last - 1 and summary["steps"] == last
    # the resumed run trains one step, whose event comes before the trainer logs its loss: the
    # run's closing step event carries it all the same (the job table's "step 7/7 · loss 0.123")
    step_lines = [line for line in captured.err.splitlines() if line.startswith("step ")]
    assert step_lines[-1].startswith(f"step {last}/{last} loss=")
    assert summary["config"]["objectives"] == ["synonyms", "definitions"]
    assert load_encoder(str(out)).encode(["asthma"]).shape == (1, 384)


@pytest.mark.parametrize("extra, reason", [
    (["--objectives", "synonyms", "typo"], "unknown objective 'typo'"),
    (["--sources", "nowhere.obo"], "unknown source 'nowhere.obo'"),
    (["--batch-size", "1"], "--batch-size must be >= 2"),
    (["--exclude-level", "hpo"], "expected SOURCE:ROOT:DEPTH"),
    (["--max-seq-length", "2"], "--max-seq-length must be >= 8"),
    (["--base", "/no/such/model"], "model directory /no/such/model not found"),
    (["--base", "char-tfidf"], "char-tfidf cannot be pretrained"),
])
def test_bad_input_is_one_line_and_creates_nothing(extra, reason, data_dir, tmp_home, tmp_path, capsys):
    out = tmp_path / "pretrained"
    assert main(_args(data_dir, out, *extra)) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and reason in err and "\n" not in err
    assert not out.exists()


def test_a_pretrain_job_whose_base_names_nothing_is_one_error_event(data_dir, tmp_home, tmp_path):
    # --base is parsed after argparse (trainer.pretrain.fit.check_base), so the job's progress file says why
    from trainer.jobs.pretrain_job import run

    config, progress = tmp_path / "job" / "config.json", tmp_path / "job" / "progress.jsonl"
    config.parent.mkdir()
    config.write_text(json.dumps({"kind": "pretrain", "sources": [str(data_dir / "mini.obo")],
                                  "objectives": ["synonyms"], "base": "/no/such/model"}))
    assert run(config, tmp_path / "out", progress, "cpu") == 2
    events = [json.loads(line) for line in progress.read_text().splitlines()]
    assert events == [{"event": "error", "message": "model directory /no/such/model not found"}]
    assert not (tmp_path / "out").exists()


def test_no_source_a_full_output_and_nothing_to_resume_are_refused(data_dir, tmp_home, tmp_path, capsys):
    assert main(["pretrain", "--objectives", "synonyms", "--out", str(tmp_path / "a")]) == 2
    assert "no source" in capsys.readouterr().err
    full = tmp_path / "full"
    full.mkdir()
    (full / "keep.txt").write_text("mine")
    assert main(_args(data_dir, full)) == 2
    assert "not empty" in capsys.readouterr().err and (full / "keep.txt").read_text() == "mine"
    assert main(["pretrain", "--out", str(full), "--resume"]) == 2
    assert "no interrupted pretraining run" in capsys.readouterr().err


def test_no_batch_holds_two_pairs_of_one_concept():
    from datasets import Dataset

    from trainer.pretrain.fit import CONCEPT_SLOTS, ConceptNoDuplicatesBatchSampler, NoDuplicatesBatchSampler

    # 12 concepts with 4 pairs each and all texts distinct: only the concept keeps them apart.
    concepts = [i % 12 for i in range(48)]
    labels = [[c] + [-1 - (i * CONCEPT_SLOTS + k) for k in range(1, CONCEPT_SLOTS)] for i, c in enumerate(concepts)]
    dataset = Dataset.from_dict({"anchor": [f"a{i}" for i in range(48)], "positive": [f"p{i}" for i in range(48)],
                                 "label": labels})
    # The trainer names its label columns, which sentence-transformers' own sampler leaves out of the check.
    kwargs = dict(batch_size=8, drop_last=False, valid_label_columns=["label", "score"], seed=0)
    batches = list(ConceptNoDuplicatesBatchSampler(dataset, **kwargs))
    assert sorted(i for b in batches for i in b) == list(range(48))
    assert all(len({concepts[i] for i in batch}) == len(batch) for batch in batches)
    plain = list(NoDuplicatesBatchSampler(dataset, **kwargs))
    assert not all(len({concepts[i] for i in batch}) == len(batch) for batch in plain)


def test_a_hard_negative_never_shares_a_batch_with_its_concept_as_an_anchor():
    from trainer.pretrain.fit import ConceptNoDuplicatesBatchSampler, training_datasets
    from trainer.pretrain.pairs import Pair

    # 24 concepts: the triple of concept i has concept i+1's name as its negative, with a text of
    # its own (only the concept can keep row i+1's anchor out of row i's batch).
    pairs = [Pair(f"a{i}", f"p{i}", "synonyms", "s", "synonym", (f"C{i}",), (), negative=f"n{i}",
                  negative_concept=f"C{(i + 1) % 24}") for i in range(24)]
    columns = training_datasets(pairs, batch_size=4)
    assert list(columns) == ["triples"] and columns["triples"]["negative"] == [f"n{i}" for i in range(24)]
    from datasets import Dataset

    batches = list(ConceptNoDuplicatesBatchSampler(Dataset.from_dict(columns["triples"]), batch_size=4,
                                                   drop_last=False, valid_label_columns=["label"], seed=0))
    assert sorted(i for b in batches for i in b) == list(range(24))
    for batch in batches:
        anchors = {pairs[i].concepts[0] for i in batch}
        assert not anchors & {pairs[i].negative_concept for i in batch}
    # fewer triples than a batch train as plain pairs (no third column)
    assert list(training_datasets(pairs[:3], batch_size=4)) == ["pairs"]
    assert "negative" not in training_datasets(pairs[:3], batch_size=4)["pairs"]


@pytest.mark.slow
def test_pretraining_with_sibling_negatives_records_them(data_dir, tmp_home, tmp_path, capsys):
    out = tmp_path / "pretrained"
    assert main(["pretrain", "--sources", str(data_dir / "mini.obo"), "--objectives", "synonyms", "hierarchy",
                 "definitions", "--batch-size", "4", "--device", "cpu", "--out", str(out), "--json",
                 "--validation-pairs", "0", "--hard-negatives", "siblings", "--max-seq-length", "16"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["config"]["hard_negatives"] == "siblings"
    negatives = summary["pairs"]["hard_negatives"]
    assert negatives["synonyms"] > 0 and "definitions" not in negatives
    triples = sum(summary["pairs"]["hard_negatives"].values())
    # each batch comes from the triples or the plain pairs; on this tiny ontology every concept is
    # some pair's negative, so the concept rule may leave a dataset a batch short
    assert 0 < summary["steps"] <= triples // 4 + (summary["pairs"]["train"] - triples) // 4
    assert main(_args(data_dir, tmp_path / "bad", "--hard-negatives", "cousins")) == 2
    assert "unknown --hard-negatives 'cousins'" in capsys.readouterr().err
