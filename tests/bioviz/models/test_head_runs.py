"""Head runs are encoded from their input model's cached vectors, equal to the whole model's vectors."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from bioviz.models import cached_encoding, encoders, head_chain
from bioviz.models.cached_encoding import encode_cached
from bioviz.models.encoders import HeadRunEncoder, SentenceTransformerEncoder
from bioviz.models.model_spec import ModelSpec, bundled_minilm_path
from bioviz.models.registry import load_encoder
from bioviz.models.runs import runs_dir

NAMES = ["heart attack", "myocardial infarction", "asthma", "reactive airway disease", "fracture of femur",
         "Hesitancy of micturition", "Abnormality of the nervous system", "fever", "a"]


def save_run(path, input_model: str, weight: float = 0.3, seed: int = 0, hidden: int = 48, **config):
    """A head run as the trainer exports it (trainer.export), with a random residual head mixed with its input."""
    import torch

    from trainer.encoders import BaseMix, ResidualEncoder
    from trainer.export import save_head_model

    torch.manual_seed(seed)
    head = BaseMix(ResidualEncoder(384, hidden, 0.5), weight, 1.3).eval()
    save_head_model(head, ModelSpec.parse(input_model), path)  # the config below keeps the text
    record = {"encoder": "residual", "source": "hpo", "depth": 1, "shots": 15, "input_model": input_model,
              "base_fingerprint": load_encoder(input_model).fingerprint, **config}
    (path / "run.json").write_text(json.dumps({"run_id": f"20260101-000000-{path.name[-4:]}", "config": record}))
    return path


def whole_model_vectors(path, texts):
    """What ``SentenceTransformer(run_dir).encode`` gives: the reference every head run must equal."""
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(path), device="cpu")
    return model.encode(list(texts), normalize_embeddings=True, convert_to_numpy=True)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """A head run on minilm, and an init run trained on that run's outputs (paths)."""
    root = tmp_path_factory.mktemp("head-runs")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("BIOVIZ_HOME", str(root / "home"))
        first = save_run(root / "run-aaaa", "minilm")
        second = save_run(root / "run-bbbb", str(first), seed=1, init=str(first))
    return first, second


def no_transformer(monkeypatch):
    """Fail on any attempt to load a sentence-transformers model's weights."""
    def refuse(*args, **kwargs):
        raise AssertionError("a transformer was loaded")

    monkeypatch.setattr(encoders, "_sentence_transformer_at", refuse)


def test_head_run_vectors_equal_the_whole_model_and_come_from_cached_base_vectors(runs, tmp_home, monkeypatch):
    first, _ = runs
    reference = whole_model_vectors(first, NAMES)
    encode_cached(load_encoder("minilm"), NAMES)  # the input model's vectors, cached (as after a first query)
    encoder = load_encoder(str(first))
    assert isinstance(encoder, HeadRunEncoder) and encoder.base.label == "minilm"
    # the run's own fingerprint, as for the whole model: vectors cached before stay valid
    assert encoder.fingerprint == SentenceTransformerEncoder(ModelSpec.parse(str(first))).fingerprint
    assert encoder.dim == 384
    no_transformer(monkeypatch)
    vectors, stats = encode_cached(encoder, NAMES)
    assert stats.encoded == len(NAMES) and vectors.dtype == np.float32
    np.testing.assert_allclose(vectors, reference, atol=1e-5)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-6)


def test_init_run_chains_through_the_run_it_continues(runs, tmp_home, monkeypatch):
    first, second = runs
    reference = whole_model_vectors(second, NAMES)
    encode_cached(load_encoder("minilm"), NAMES)
    encoder = load_encoder(str(second))
    assert isinstance(encoder, HeadRunEncoder) and isinstance(encoder.base, HeadRunEncoder)
    assert encoder.base.base.label == "minilm"
    no_transformer(monkeypatch)
    np.testing.assert_allclose(encode_cached(encoder, NAMES)[0], reference, atol=1e-5)
    # the run it continues got its vectors cached on the way
    assert encode_cached(load_encoder(str(first)), NAMES)[1].cache_hits == len(NAMES)


def test_a_whole_level_reads_the_input_models_block_and_reports_progress(runs, tmp_home, monkeypatch):
    first, _ = runs
    for module in (cached_encoding, encoders):  # NAMES count as a whole level
        monkeypatch.setattr(module, "BLOCK_MIN", 4)
    texts = NAMES * 3  # chunks of 4 names below (3 steps per copy)
    encode_cached(load_encoder("minilm"), texts)
    encoder = load_encoder(str(first))
    lookups = []
    monkeypatch.setattr(encoders.VectorCache, "get", lambda self, *a, **k: lookups.append(a) or {})
    no_transformer(monkeypatch)
    seen = []
    vectors = encoder.encode(texts, batch_size=1, progress=lambda done, total: seen.append((done, total)))
    assert not lookups, "the input vectors came from the block, not row by row"
    assert seen[-1] == (len(texts), len(texts)) and [d for d, _ in seen] == sorted(d for d, _ in seen)
    assert len(seen) > 1  # names whose final vector is ready, chunk by chunk
    np.testing.assert_allclose(vectors, whole_model_vectors(first, texts), atol=1e-5)


def test_numpy_and_torch_paths_agree(runs):
    first, _ = runs
    chain = head_chain.HeadChain.read(first, head_chain.input_module_kinds(bundled_minilm_path()))
    rng = np.random.default_rng(0)
    inputs = rng.normal(size=(50, 384)).astype(np.float32)
    inputs /= np.linalg.norm(inputs, axis=1, keepdims=True)
    by_numpy = head_chain._run_numpy(chain.steps, inputs)
    by_torch = head_chain._run_torch(chain.steps, inputs)
    np.testing.assert_allclose(by_numpy, by_torch, atol=1e-5)
    assert len(chain.apply(inputs, rows_per_step=7)) == 50


def copy_run(source, target, edit=None, **config):
    """``source`` copied to ``target`` with ``config`` merged into its run.json and ``edit(target)`` applied."""
    shutil.copytree(source, target)
    record = json.loads((target / "run.json").read_text())
    record["config"].update(config)
    (target / "run.json").write_text(json.dumps(record))
    if edit is not None:
        edit(target)
    return target


def sigmoid_head(run):
    config = json.loads((run / "3_Dense" / "config.json").read_text())
    config["activation_function"] = "torch.nn.modules.activation.Sigmoid"
    (run / "3_Dense" / "config.json").write_text(json.dumps(config))


@pytest.mark.parametrize("case", ["fine-tuned", "input changed", "input gone", "other activation", "no head file"])
def test_runs_a_head_cannot_serve_are_encoded_through_their_whole_model(runs, tmp_path, tmp_home, case):
    first, _ = runs
    made = {
        "fine-tuned": lambda t: copy_run(first, t, encoder="hierarchical", finetune=True),
        "input changed": lambda t: copy_run(first, t, base_fingerprint="0" * 32),
        "input gone": lambda t: copy_run(first, t, input_model=str(tmp_path / "deleted-run")),
        "other activation": lambda t: copy_run(first, t, sigmoid_head),
        "no head file": lambda t: copy_run(first, t, lambda run: (run / head_chain.HEAD_FILE).unlink()),
    }
    run = made[case](tmp_path / "run-cccc")
    encoder = load_encoder(str(run))
    assert type(encoder) is SentenceTransformerEncoder
    np.testing.assert_allclose(encode_cached(encoder, NAMES[:3])[0], whole_model_vectors(run, NAMES[:3]), atol=1e-5)


def test_an_init_run_whose_input_run_moved_with_the_home_still_chains(runs, tmp_path, tmp_home):
    first, second = runs
    moved = runs_dir() / first.name  # the same run, now under this BIOVIZ_HOME's runs
    shutil.copytree(first, moved)
    run = copy_run(second, tmp_path / "run-dddd", input_model=str(tmp_path / "elsewhere" / first.name))
    encoder = load_encoder(str(run))
    assert isinstance(encoder, HeadRunEncoder) and encoder.base.path == moved.resolve()
    np.testing.assert_allclose(encode_cached(encoder, NAMES[:3])[0], whole_model_vectors(run, NAMES[:3]),
                               atol=1e-5)
