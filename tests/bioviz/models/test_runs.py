"""Reading runs (bioviz.models.runs): the labels of what a run was trained on."""

from __future__ import annotations

from bioviz.models.runs import level_label


def test_level_label():
    assert level_label({"source": "icd10", "depth": 1}) == "icd10 d1"
    assert level_label({"source": "/data/x/hp.obo", "root": "HP:0000118", "synonyms": True, "depth": 1}) == \
        "hp.obo under HP:0000118 synonym sets"
