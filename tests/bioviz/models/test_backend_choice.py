"""bioviz.models.backend_choice: onnx-int8 encodes by default on a CPU, torch one option away.

tests/conftest.py sets ``BIOVIZ_BACKEND=torch`` for the suite; the tests here unset it
(``default_env``) to see the default itself.
"""

import json
import logging
import shutil

import numpy as np
import pytest

from bioviz.cli import main
from bioviz.errors import ModelError
from bioviz.models import backend_choice, encoders, quantized
from bioviz.models.backend_choice import backend_override, default_backend
from bioviz.models.cached_encoding import encode_cached
from bioviz.models.encoders import CharTfidfEncoder, SentenceTransformerEncoder
from bioviz.models.registry import backend_encoder, load_encoder
from bioviz.models.vector_cache import VectorCache

NAMES = ["Type 2 diabetes mellitus", "myocardial infarction", "heart attack", "Seizure",
         "Abnormality of the cardiovascular system", "fracture of the femur"]


@pytest.fixture
def default_env(monkeypatch):
    """No BIOVIZ_BACKEND, no Ray executor, a CPU-only torch, and no int8 encoder of an earlier test."""
    monkeypatch.delenv("BIOVIZ_BACKEND", raising=False)
    monkeypatch.delenv("BIOVIZ_EXECUTOR", raising=False)
    monkeypatch.setattr(encoders, "device", lambda: "cpu")
    quantized._ENCODERS.clear()
    yield monkeypatch
    quantized._ENCODERS.clear()


def test_the_default_is_onnx_int8_without_cuda_and_torch_with_it(default_env):
    assert default_backend() == "onnx-int8"
    default_env.setattr(encoders, "device", lambda: "cuda")
    assert default_backend() == "torch"


def test_bioviz_backend_wins_and_a_bad_value_is_one_line(default_env):
    default_env.setenv("BIOVIZ_BACKEND", "torch")
    assert default_backend() == "torch"
    default_env.setenv("BIOVIZ_BACKEND", "fp8")
    with pytest.raises(ModelError, match="BIOVIZ_BACKEND='fp8' is not a backend") as error:
        default_backend()
    assert "\n" not in str(error.value)


def test_a_ray_executor_keeps_torch(default_env):
    default_env.setenv("BIOVIZ_EXECUTOR", "ray")
    assert default_backend() == "torch"


def test_a_commands_backend_wins_for_the_command_only(default_env):
    with backend_override("torch"):
        assert default_backend() == "torch"
        with backend_override(None):
            assert default_backend() == "torch"
    assert default_backend() == "onnx-int8"
    with pytest.raises(ModelError, match="--backend"), backend_override("fp8"):
        pass
    assert not backend_choice._OVERRIDE


def test_a_bad_bioviz_backend_is_one_line_on_the_command_line(capsys, data_dir, tmp_home, default_env):
    default_env.setenv("BIOVIZ_BACKEND", "int4")
    assert main(["neighbours", "fever", "--source", str(data_dir / "mini.obo"), "--model", "minilm",
                 "--quiet"]) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and "BIOVIZ_BACKEND='int4'" in error


def test_models_int8_does_not_apply_to_stay_as_they_are(tmp_home, default_env):
    assert isinstance(load_encoder("char-tfidf"), CharTfidfEncoder)
    assert type(load_encoder("minilm", backend="torch")) is SentenceTransformerEncoder


def test_without_onnxruntime_the_default_is_torch_with_one_warning(tmp_home, default_env, caplog):
    default_env.setattr(quantized, "_onnx_runtime_missing", lambda: "onnxruntime")
    quantized._WARNED.clear()
    with caplog.at_level(logging.WARNING, logger="bioviz.models.quantized"):
        first, second = load_encoder("minilm"), load_encoder("minilm")
    assert first is second is load_encoder("minilm", backend="torch")
    assert [r.message for r in caplog.records].count(
        "onnxruntime is not installed: encoding with torch, not onnx-int8 (pip install onnxruntime)") == 1
    quantized._WARNED.clear()


def test_an_export_that_fails_falls_back_to_torch(tmp_home, default_env, caplog):
    def broken_export(*_args):
        raise RuntimeError("the exporter broke\nsecond line")

    default_env.setattr(quantized, "_export", broken_export)
    torch_encoder = load_encoder("minilm", backend="torch")
    encoder = load_encoder("minilm")
    assert isinstance(encoder, quantized.OnnxInt8Encoder)
    assert encoder.fingerprint == quantized.backend_fingerprint(torch_encoder.fingerprint, "onnx-int8")
    with caplog.at_level(logging.WARNING, logger="bioviz.models.quantized"):
        vectors, _ = encode_cached(encoder, NAMES[:3])
        again = encoder.encode(NAMES[3:])
    assert np.allclose(vectors, torch_encoder.encode(NAMES[:3]), atol=1e-5)
    assert again.shape == (3, 384)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "the exporter broke" in warnings[0] and "second line" not in warnings[0]
    # from then on it is the torch model: its vectors are cached as torch's, never as int8's
    assert encoder.fingerprint == torch_encoder.fingerprint and encoder.label == "minilm"
    assert set(VectorCache().get(torch_encoder.fingerprint, NAMES[:3])) == set(NAMES[:3])


def test_named_onnx_int8_still_fails_loudly(tmp_home, default_env):
    def broken_export(*_args):
        raise RuntimeError("the exporter broke")

    default_env.setattr(quantized, "_export", broken_export)
    with pytest.raises(ModelError, match="cannot be exported to int8 ONNX"):
        backend_encoder("minilm", "onnx-int8").encode(NAMES[:1])


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """A BIOVIZ_HOME/onnx holding minilm's int8 export, made once for the module (20-60 s idle)."""
    home = tmp_path_factory.mktemp("default-int8-home")
    patch = pytest.MonkeyPatch()
    patch.setenv("BIOVIZ_HOME", str(home))
    try:
        quantized.ensure_export(load_encoder("minilm", backend="torch"))
    finally:
        patch.undo()
    return home / "onnx"


@pytest.fixture
def int8_default(tmp_home, exported, default_env):
    """The default environment with a copy of the module's export in a fresh home."""
    shutil.copytree(exported, tmp_home / "onnx", ignore=shutil.ignore_patterns("*.lock"))
    return tmp_home


@pytest.mark.slow
def test_the_default_encoder_is_int8_with_its_own_fingerprint_close_to_fp32(int8_default):
    torch_encoder = load_encoder("minilm", backend="torch")
    encoder = load_encoder("minilm")
    assert isinstance(encoder, quantized.OnnxInt8Encoder) and encoder is load_encoder("minilm")
    assert encoder.fingerprint == quantized.backend_fingerprint(torch_encoder.fingerprint, "onnx-int8")
    assert encoder.label == "minilm · onnx-int8"
    int8, fp32 = encoder.encode(NAMES), torch_encoder.encode(NAMES)
    assert np.min(np.sum(int8 * fp32, axis=1)) > 0.97
    assert not np.allclose(int8, fp32, atol=1e-4)  # really int8, not torch again


@pytest.mark.slow
def test_neighbours_on_the_command_line_under_each_backend(capsys, data_dir, int8_default):
    argv = ["neighbours", "heart attack", "--source", str(data_dir / "mini.obo"), "--model", "minilm", "-k", "3",
            "--quiet", "--json"]
    runs = {}
    for backend in ("onnx-int8", "torch"):
        assert main(argv + ["--backend", backend]) == 0
        runs[backend] = json.loads(capsys.readouterr().out)
    assert main(argv) == 0  # no --backend: the default, onnx-int8 here (no CUDA)
    runs["default"] = json.loads(capsys.readouterr().out)
    for result in runs.values():
        assert result["query_class"] == "MINI:0000010" and [r["rank"] for r in result["neighbours"]] == [1, 2, 3]
    assert runs["default"]["neighbours"] == runs["onnx-int8"]["neighbours"]
    assert not backend_choice._OVERRIDE  # the command's --backend ended with it


def test_an_evaluation_whose_int8_export_fails_stores_torchs_figures_under_torchs_key(tmp_home, default_env):
    """The fingerprint a result is stored under is read when it is stored, not when the model loaded."""
    from bioviz.evaluation.run import EvalSettings, evaluate_benchmarks

    def broken_export(*_args):
        raise RuntimeError("the exporter broke")

    default_env.setattr(quantized, "_export", broken_export)
    torch_fingerprint = load_encoder("minilm", backend="torch").fingerprint
    settings = EvalSettings(n_boot=20)
    [result] = evaluate_benchmarks(["minilm"], "mayosrs", settings=settings)  # the default (int8) encoder, failing
    assert result.fingerprint == torch_fingerprint and not result.cached
    [torch_result] = evaluate_benchmarks([load_encoder("minilm", backend="torch").spec], "mayosrs", settings=settings)
    assert torch_result.cached and torch_result.metrics == result.metrics, "found under torch's key"
