"""Huge names: cut to what the model reads before tokenising, and refused at load past a byte bound (issue 32, 5).

Before: one 5 MB name took 27 s and 2.2 GB in the process that encoded it, and under a 3 GB
address-space limit the tokenizer aborted the process ("memory allocation ... failed", SIGABRT):
the tokenizer reads the whole text before it truncates to the model's 256 tokens.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from bioviz.errors import SourceError
from bioviz.models.encoders import Encoder
from bioviz.ontology.sources import load_source
from bioviz.text_clean import MAX_NAME_BYTES, MODEL_CHARS, model_text

ROOT = Path(__file__).resolve().parents[2]
HUGE = "fever " * 900_000  # 5.4 MB, one name

ENCODER_UNDER_A_LIMIT = """
import resource, sys
resource.setrlimit(resource.RLIMIT_AS, (3 * 2**30, 3 * 2**30))  # the probe's bound
from bioviz.models.registry import load_encoder
vectors = load_encoder("minilm").encode(["fever " * 900_000, ("fever " * 900_000)[:%d]])
print(float(vectors[0] @ vectors[1]))
""" % MODEL_CHARS


@pytest.mark.slow  # over 5 s in a full run (CI lists the times)
def test_a_5_mb_name_encodes_under_a_3_gb_address_space_limit_as_its_cut(tmp_home):
    result = subprocess.run([sys.executable, "-c", ENCODER_UNDER_A_LIMIT], cwd=ROOT, capture_output=True, text=True,
                            timeout=400, env={**__import__("os").environ, "HF_HUB_OFFLINE": "1"})
    assert result.returncode == 0, result.stderr[-1500:]
    assert float(result.stdout.split()[-1]) == pytest.approx(1.0, abs=1e-5)  # the same vector as what it reads


def test_every_encoder_gets_texts_cut_to_what_the_model_reads():
    seen = []

    class Recording(Encoder):
        spec = label = fingerprint = "recording"
        dim = 2

        def _encode(self, texts, batch_size):
            seen.extend(texts)
            return np.ones((len(texts), 2), np.float32) / np.sqrt(2)

    Recording().encode([HUGE, "fever"])
    assert sorted(map(len, seen)) == [5, MODEL_CHARS] and model_text("fever") == "fever"


def test_a_source_with_a_name_over_the_byte_bound_is_refused_in_one_line(tmp_home, tmp_path):
    table = tmp_path / "huge.tsv"
    table.write_text("concept_id\tname\tparent_id\tdefinition\tsynonyms\nR\troot\t\t\t\n"
                     f"A\tasthma\tR\t\t{'x' * (MAX_NAME_BYTES + 1)}\n", encoding="utf-8")
    with pytest.raises(SourceError) as refused:
        load_source(str(table))
    assert "concept 'A' has a name of 65,537 bytes" in str(refused.value) and "\n" not in str(refused.value)
