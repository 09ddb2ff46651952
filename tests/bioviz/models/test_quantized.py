"""bioviz.models.quantized: the onnx-int8 backend, exported once, reused, cached apart from torch."""

import json
import logging
import shutil
import warnings

import numpy as np
import pytest

from bioviz.cli import main
from bioviz.errors import ModelError
from bioviz.models import quantized
from bioviz.models.cached_encoding import encode_cached
from bioviz.models.registry import backend_encoder, load_encoder
from bioviz.models.vector_cache import VectorCache

# minilm exported to int8 once per session (seconds idle, 7 minutes at load 13), then encoded
# in both backends: the day-to-day suite leaves the module out
pytestmark = pytest.mark.slow

NAMES = ["Type 2 diabetes mellitus", "myocardial infarction", "heart attack", "Seizure",
         "Abnormality of the cardiovascular system", "fracture of the femur"]


@pytest.fixture(scope="session")
def onnx_exports(tmp_path_factory):
    """``BIOVIZ_HOME/onnx`` holding minilm's int8 export, made once per test session (seconds)."""
    home = tmp_path_factory.mktemp("onnx-home")
    patch = pytest.MonkeyPatch()
    patch.setenv("BIOVIZ_HOME", str(home))
    records = []
    handler = logging.Handler(logging.WARNING)
    handler.emit = records.append
    logging.getLogger().addHandler(handler)
    try:
        with warnings.catch_warnings(record=True) as warned:
            warnings.simplefilter("always")
            quantized.ensure_export(load_encoder("minilm"))
    finally:
        logging.getLogger().removeHandler(handler)
        patch.undo()
    EXPORT_NOISE.extend([str(w.message) for w in warned] + [r.getMessage() for r in records])
    return home / "onnx"


EXPORT_NOISE: list[str] = []  # warnings and root-logger records seen while the session's export was made


def test_the_export_keeps_the_tracers_and_the_quantizers_advice_to_itself(onnx_exports):
    assert EXPORT_NOISE == []  # issue 42: TracerWarning and "consider pre-processing" reached the CLI's output


@pytest.fixture
def int8_home(tmp_home, onnx_exports):
    """A fresh BIOVIZ_HOME with a copy of the session's export (tests may damage it)."""
    shutil.copytree(onnx_exports, tmp_home / "onnx", ignore=shutil.ignore_patterns("*.lock"))
    quantized._ENCODERS.clear()  # encoders hold sessions of another home's export
    return tmp_home


def test_export_is_reused_not_made_again(int8_home, monkeypatch):
    def no_export(*_args):
        raise AssertionError("exported a second time")

    monkeypatch.setattr(quantized, "_export", no_export)
    folder, meta = quantized.ensure_export(load_encoder("minilm"))
    assert folder.parent == int8_home / "onnx" and (folder / quantized.MODEL_FILE).is_file()
    assert meta["inputs"][:2] == ["input_ids", "attention_mask"]
    encoder = backend_encoder("minilm", "onnx-int8")
    assert encoder.encode(NAMES[:2]).shape == (2, 384)


def test_int8_vectors_are_close_to_fp32(int8_home):
    fp32 = load_encoder("minilm").encode(NAMES)
    int8 = backend_encoder("minilm", "onnx-int8").encode(NAMES)
    assert int8.dtype == np.float32 and np.allclose(np.linalg.norm(int8, axis=1), 1.0, atol=1e-5)
    assert np.min(np.sum(fp32 * int8, axis=1)) > 0.98
    assert not np.allclose(fp32, int8, atol=1e-4)  # really another backend, not torch again


def test_vector_cache_keeps_backends_apart(int8_home):
    torch_encoder = load_encoder("minilm")
    int8_encoder = backend_encoder("minilm", "onnx-int8")
    assert int8_encoder.fingerprint != torch_encoder.fingerprint
    fp32, _ = encode_cached(torch_encoder, NAMES)
    int8, stats = encode_cached(int8_encoder, NAMES)
    assert stats.encoded == len(NAMES)  # the torch vectors just cached are not served for int8
    for encoder, vectors in ((int8_encoder, int8), (torch_encoder, fp32)):
        cached = VectorCache().get(encoder.fingerprint, NAMES)
        assert np.array_equal(np.stack([cached[name] for name in NAMES]), vectors)


def test_damaged_export_is_rebuilt(int8_home):
    folder, meta = quantized.ensure_export(load_encoder("minilm"))
    with open(folder / quantized.MODEL_FILE, "r+b") as handle:  # a torn write: half the file
        handle.truncate(1000)
    assert quantized.read_export(folder) is None
    rebuilt, again = quantized.ensure_export(load_encoder("minilm"))
    assert rebuilt == folder and again["sha256"] == meta["sha256"]
    assert not [p for p in folder.parent.iterdir() if p.name.startswith(".")]  # no scratch folder left
    assert backend_encoder("minilm", "onnx-int8").encode(NAMES[:1]).shape == (1, 384)


def test_models_the_backend_cannot_run_get_one_line_errors(tmp_home):
    with pytest.raises(ModelError, match="not a sentence-transformers model") as error:
        backend_encoder("char-tfidf", "onnx-int8")
    assert "\n" not in str(error.value)
    with pytest.raises(ModelError, match="unknown backend"):
        backend_encoder("minilm", "fp4")
    assert backend_encoder("minilm", "torch") is load_encoder("minilm")


def test_embed_cli_backend_reports_throughput_and_caches_per_backend(capsys, data_dir, int8_home):
    argv = ["embed", str(data_dir / "mini.obo"), "--model", "minilm", "--depth", "1", "--quiet", "--json"]
    assert main(argv + ["--backend", "onnx-int8"]) == 0
    first = json.loads(capsys.readouterr().out)
    assert first["backend"] == "onnx-int8" and first["names"] == first["encoded"] > 0
    assert first["names_per_second"] > 0 and first["seconds"] > 0
    assert main(argv) == 0  # torch: its own fingerprint, so nothing of int8's is served
    torch_run = json.loads(capsys.readouterr().out)
    assert torch_run["cache_hits"] == 0 and torch_run["fingerprint"] != first["fingerprint"]
    assert main(argv + ["--backend", "onnx-int8"]) == 0
    second = json.loads(capsys.readouterr().out)
    assert second["cache_hits"] == second["names"] and second["encoded"] == 0
    assert main(argv + ["--backend", "openvino-int8"]) == 2
    assert capsys.readouterr().err.count("\n") == 1


def test_an_int8_backend_on_a_ray_cluster_is_refused_in_one_line(capsys, data_dir, tmp_home):
    argv = ["embed", str(data_dir / "mini.obo"), "--model", "minilm", "--depth", "1", "--quiet",
            "--backend", "onnx-int8", "--executor", "ray"]
    assert main(argv) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and "this machine only" in error


def test_a_names_int8_vector_is_the_same_alone_in_a_batch_and_in_another_chunking(int8_home):
    encoder = backend_encoder("minilm", "onnx-int8")
    others = ["Abnormal heart morphology", "x", "Closed fracture of the neck of the left femur, initial encounter",
              *[f"finding number {i}" for i in range(20)]]
    alone = np.concatenate([encoder.encode([name]) for name in NAMES])
    mixed = encoder.encode([*others, *NAMES, *others], batch_size=7)[len(others):len(others) + len(NAMES)]
    chunked = encoder.encode([*NAMES[::-1], *others], batch_size=2)[:len(NAMES)][::-1]
    assert np.allclose(alone, mixed, atol=1e-5) and np.allclose(alone, chunked, atol=1e-5)


def test_a_level_exported_with_embed_out_ranks_as_the_model_that_made_it(capsys, data_dir, int8_home, tmp_path):
    """Issue 42: ``embed --out`` read back gave neighbours 2 and 3 the other way round (per-batch int8 scales)."""
    out = tmp_path / "mini_int8.npz"
    level = ["--depth", "1", "--quiet"]
    assert main(["embed", str(data_dir / "mini.obo"), *level, "--model", "minilm", "--backend", "onnx-int8",
                 "--batch-size", "3", "--out", str(out)]) == 0
    capsys.readouterr()
    for query in ("atrial fibrillation", "bronchitis", "lung disease"):
        answers = []
        for model in (["--model", "minilm", "--backend", "onnx-int8"], ["--model", str(out)]):
            assert main(["neighbours", query, "--source", str(data_dir / "mini.obo"), *level, "-k", "6", "--json",
                         *model]) == 0
            answers.append(json.loads(capsys.readouterr().out)["neighbours"])
        model_rows, file_rows = answers
        assert [r["name"] for r in model_rows] == [r["name"] for r in file_rows], query
        assert np.allclose([r["score"] for r in model_rows], [r["score"] for r in file_rows], atol=1e-5), query
