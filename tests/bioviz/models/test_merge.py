"""WiSE-FT weight interpolation (bioviz.models.merge): the arithmetic, a loadable result, refusals."""

import json

import numpy as np
import pytest

from bioviz.errors import BiovizError
from bioviz.models.merge import MERGE_FILE, interpolate, main, merge_models
from bioviz.models.model_spec import ModelSpec


def test_interpolate_is_the_convex_combination_and_keeps_integer_buffers():
    base = {"w": np.zeros((2, 2), np.float32), "ids": np.arange(3)}
    tuned = {"w": np.ones((2, 2), np.float16)}
    merged = interpolate(base, tuned, alpha=0.25)
    assert merged["w"].dtype == np.float32 and np.allclose(merged["w"], 0.25)
    assert "ids" not in merged  # an integer buffer only the base saved is not a weight
    assert np.allclose(interpolate(base, tuned, alpha=0.0)["w"], 0.0)


@pytest.mark.parametrize("tuned, alpha", [({"w": np.ones((3, 2), np.float32)}, 0.5),
                                          ({"v": np.ones((2, 2), np.float32)}, 0.5),
                                          ({"w": np.ones((2, 2), np.float32)}, 1.5)])
def test_interpolate_refuses_other_architectures_and_alphas_outside_0_1(tuned, alpha):
    with pytest.raises(BiovizError):
        interpolate({"w": np.zeros((2, 2), np.float32)}, tuned, alpha=alpha)


def test_merging_minilm_with_itself_writes_a_model_that_encodes_as_minilm(tmp_path, tmp_home):
    from sentence_transformers import SentenceTransformer

    out = tmp_path / "merged"
    record = merge_models(ModelSpec.parse("minilm"), ModelSpec.parse("minilm"), alpha=0.5, out=out, dtype="float32")
    assert json.loads((out / MERGE_FILE).read_text())["alpha"] == 0.5 == record.alpha
    texts = ["myocardial infarction", "heart attack"]
    a = SentenceTransformer(str(out), device="cpu").encode(texts)
    b = SentenceTransformer(str(ModelSpec.parse("minilm").files()), device="cpu").encode(texts)
    assert np.allclose(a, b, atol=1e-5)
    assert not (tmp_path / "merged.partial").exists()


def test_the_command_refuses_a_non_empty_output_and_char_tfidf_in_one_line(tmp_path, capsys):
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "x").write_text("keep")
    assert main(["minilm", "minilm", "--alpha", "0.5", "--out", str(tmp_path / "taken")]) == 2
    assert main(["char-tfidf", "minilm", "--alpha", "0.5", "--out", str(tmp_path / "new")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and all(line.startswith("error: ") for line in err)
    assert (tmp_path / "taken" / "x").read_text() == "keep"
