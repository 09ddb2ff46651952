"""AppTest of the Neighbours page under the default backend of a CPU: onnx-int8.

tests/conftest.py pins BIOVIZ_BACKEND=torch for the suite; this test unsets it, so the page's
level and its query are both encoded by the int8 export (made once in the session's home).
"""

import pytest

from bioviz.models import encoders, quantized

PAGE = "app_pages/4_Neighbours.py"


@pytest.mark.slow  # exports minilm to int8 ONNX on first use (20-60 s idle)
def test_the_page_ranks_under_int8_and_says_so(app_home, data_dir, open_app, monkeypatch):
    monkeypatch.delenv("BIOVIZ_BACKEND", raising=False)
    monkeypatch.delenv("BIOVIZ_EXECUTOR", raising=False)
    monkeypatch.setattr(encoders, "device", lambda: "cpu")  # the default of a machine without a GPU
    quantized._ENCODERS.clear()
    app = open_app(PAGE, {"source": str(data_dir / "mini.obo"), "depth": "1", "model_a": "minilm",
                          "model_b": "char-tfidf", "query": "heart attack", "k": "4"}, timeout=400)
    at = app.run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert len(at.table) == 2 and all(len(t.value) == 4 for t in at.table)
    minilm = at.table[0].value.set_index("Name")
    assert minilm.loc["myocardial infarction", "Match"] == "synonym"
    # the level and the query went through int8 (its session opened, no fall-back to torch); the
    # rankings' headers name models by model_labels (the MODEL as picked), so they say "minilm"
    (encoder,) = [e for e in quantized._ENCODERS.values() if isinstance(e, quantized.OnnxInt8Encoder)]
    assert encoder.label == "minilm · onnx-int8" and encoder._session is not None and not encoder.fallen_back
    quantized._ENCODERS.clear()
