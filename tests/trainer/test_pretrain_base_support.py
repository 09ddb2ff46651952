"""What a base supports is checked before training; what is trained is saved first (issue 25, item 8).

A sentence-transformers model whose first module has no settable ``max_seq_length`` (a
``StaticEmbedding``, model2vec's kind) pretrained for minutes and then died while saving.
Here: a tiny StaticEmbedding base (built offline from the bundled minilm's tokenizer) trains
and ends with a saved model; ``--max-seq-length`` with it is one line before training; and a
failure while writing the extras after training leaves the model saved and one line.
"""

from __future__ import annotations

import json

import pytest

from bioviz.models.encoders import load_sentence_transformer
from bioviz.models.model_spec import bundled_minilm_path
from trainer.cli import main
from trainer.pretrain import fit
from trainer.pretrain.fit import CHECKPOINTS, RESULT_FILE


@pytest.fixture(scope="module")
def static_base(tmp_path_factory):
    """A 16-dimensional StaticEmbedding model (no max_seq_length setter) in a temporary directory."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.models import StaticEmbedding
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(bundled_minilm_path()))
    model = SentenceTransformer(modules=[StaticEmbedding(tokenizer, embedding_dim=16)], device="cpu")
    with pytest.raises(AttributeError):  # the premise: this base cannot take a length
        model.max_seq_length = 32
    path = tmp_path_factory.mktemp("static-base")
    model.save(str(path))
    return path


def _args(data_dir, base, out, *extra):
    return ["pretrain", "--sources", str(data_dir / "mini.obo"), "--objectives", "synonyms", "hierarchy",
            "--max-pairs", "12", "--validation-pairs", "4", "--batch-size", "4", "--device", "cpu",
            "--save-steps", "1000", "--base", str(base), "--out", str(out), "--json", *extra]


def test_a_base_without_a_settable_length_pretrains_and_saves(static_base, data_dir, tmp_home, tmp_path, capsys):
    out = tmp_path / "pretrained"
    assert main(_args(data_dir, static_base, out)) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["steps"] > 0 and (out / RESULT_FILE).is_file() and not (out / CHECKPOINTS).exists()
    assert load_sentence_transformer(str(out), device="cpu").encode(["asthma"]).shape == (1, 16)


def test_max_seq_length_with_such_a_base_is_one_line_before_training(static_base, data_dir, tmp_home, tmp_path,
                                                                     capsys):
    out = tmp_path / "pretrained"
    code = main(_args(data_dir, static_base, out, "--max-seq-length", "16"))
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and err[-1].startswith("error: ") and "--max-seq-length" in err[-1], err
    assert not any(line.startswith("step ") for line in err)
    assert not out.exists()


@pytest.mark.parametrize("broken", ["retrieval_figures", "write_terms"])
def test_a_failure_after_training_keeps_the_trained_model(broken, static_base, data_dir, tmp_home, tmp_path,
                                                          capsys, monkeypatch):
    calls = []
    original = getattr(fit, broken)

    def fail_after_training(*args, **kwargs):
        calls.append(1)
        if broken == "retrieval_figures" and len(calls) == 1:
            return original(*args, **kwargs)  # the figures before training
        raise OSError("No space left on device\nsecond line")

    monkeypatch.setattr(fit, broken, fail_after_training)
    out = tmp_path / "pretrained"
    assert main(_args(data_dir, static_base, out)) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith("error: ") and str(out) in err and "No space left on device" in err, err
    # the trained weights are on disk, loadable, though the run's record is not
    assert load_sentence_transformer(str(out), device="cpu").encode(["asthma"]).shape == (1, 16)
    assert not (out / RESULT_FILE).exists()
