"""bioviz.models.per_token_int8: a dynamically quantized graph rewritten to one activation scale per token."""

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnxruntime.quantization import QuantType, quantize_dynamic

from bioviz.models.per_token_int8 import per_token_scales

RNG = np.random.default_rng(0)
WEIGHTS = RNG.normal(size=(16, 8)).astype(np.float32)
BIAS = RNG.normal(size=8).astype(np.float32)


def linear_layer(folder) -> onnx.ModelProto:
    """``x @ W + b`` on (batch, tokens, 16) inputs, quantized as bioviz's export quantizes (7-bit weights per channel)."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "tokens", 16])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", "tokens", 8])
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "W"], ["xw"]), helper.make_node("Add", ["xw", "b"], ["y"])],
                              "linear", [x], [y], [numpy_helper.from_array(WEIGHTS, "W"), numpy_helper.from_array(BIAS, "b")])
    fp32 = folder / "fp32.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(fp32))
    quantize_dynamic(str(fp32), str(folder / "int8.onnx"), weight_type=QuantType.QInt8, per_channel=True, reduce_range=True,
                     op_types_to_quantize=["MatMul"])
    return onnx.load(str(folder / "int8.onnx"))


def run(model: onnx.ModelProto, x: np.ndarray) -> np.ndarray:
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(["y"], {"x": x})[0]


def test_each_token_is_quantized_on_its_own_and_stays_close_to_fp32(tmp_path):
    model = per_token_scales(linear_layer(tmp_path))
    onnx.checker.check_model(model)
    assert not [n for n in model.graph.node if n.op_type == "DynamicQuantizeLinear"]
    tokens = RNG.normal(size=(1, 5, 16)).astype(np.float32)
    loud = np.concatenate([tokens, 50 * RNG.normal(size=(1, 5, 16)).astype(np.float32)])  # a batch-mate 50x louder
    alone, beside = run(model, tokens), run(model, loud)[:1]
    assert np.array_equal(alone, beside)  # the louder neighbour does not change the scale of these tokens
    exact = tokens @ WEIGHTS + BIAS
    assert np.abs(alone - exact).max() < 0.05 * np.abs(exact).max()
    zero = run(model, np.zeros((1, 2, 16), np.float32))
    assert np.allclose(zero, BIAS)  # an all-zero token: no division by zero


def test_the_per_batch_graph_did_depend_on_the_batch(tmp_path):
    """What the rewrite fixes: the quantizer's own graph scales a token by its batch-mates."""
    model = linear_layer(tmp_path)
    tokens = RNG.normal(size=(1, 5, 16)).astype(np.float32)
    loud = np.concatenate([tokens, 50 * RNG.normal(size=(1, 5, 16)).astype(np.float32)])
    assert not np.allclose(run(model, tokens), run(model, loud)[:1], atol=1e-3)


def test_a_graph_without_dynamic_quantization_is_refused(tmp_path):
    linear_layer(tmp_path)
    with pytest.raises(ValueError, match="no dynamically quantized"):
        per_token_scales(onnx.load(str(tmp_path / "fp32.onnx")))
