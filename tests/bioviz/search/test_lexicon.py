"""Synonym-lexicon query expansion (bioviz.search.lexicon): the lexicon on tests/data/mini.obo, its cache file,
scoring with expanded forms, and "heart attack" on ICD-10 chapters under the defaults."""

from __future__ import annotations

import gzip

import numpy as np
import obonet
import pytest

from bioviz.errors import BiovizError
from bioviz.ontology.model import Concept
from bioviz.search import lexicon as lexicon_module
from bioviz.search.bundled_rows import SHARED_ENV
from bioviz.search.hybrid import ExpandedForms, Ranking, name_scores
from bioviz.search.lexicon import (DEFAULT_EXPANSION, MAX_FORMS, NO_EXPANSION, SCOPES, Expansion, Lexicon,
                                   LexiconEntry, concept_entries, expand_texts, load_lexicon, obo_entries)


@pytest.fixture
def mini_lexicon(data_dir) -> Lexicon:
    graph = obonet.read_obo(str(data_dir / "mini.obo"))
    included = [Concept("I21", "Acute myocardial infarction", ("Myocardial infarction (acute) NOS",))]
    return Lexicon(obo_entries(graph.nodes(data=True), "MINI") + concept_entries(included))


def test_synonyms_expand_to_their_preferred_name_by_scope(mini_lexicon):
    found = mini_lexicon.expand("Heart-attack ", Expansion(("EXACT",)))
    assert found.forms == ("myocardial infarction",)
    assert found.note == "Heart-attack  → myocardial infarction (MINI synonym)"
    assert mini_lexicon.expand("MI", Expansion(("EXACT",))).forms == ()  # NARROW in mini.obo
    assert mini_lexicon.expand("mi", Expansion(SCOPES)).note == "mi → myocardial infarction (MINI narrow synonym)"
    assert mini_lexicon.expand("heart attack", NO_EXPANSION).forms == ()
    # a synonym of two concepts expands to both; a preferred name never expands to itself
    assert set(mini_lexicon.expand("shared name", Expansion(("EXACT",))).forms) == {"cardiopulmonary syndrome",
                                                                                   "bronchitis"}
    assert mini_lexicon.expand("asthma", Expansion(SCOPES)).forms == ()
    inclusion = mini_lexicon.expand("myocardial infarction (acute) NOS", Expansion(("INCLUSION",)))
    assert inclusion.note.endswith("→ Acute myocardial infarction (ICD-10-CM inclusion term)")
    many = Lexicon([LexiconEntry("x", f"name {i}", f"C{i}", "HPO", "EXACT") for i in range(MAX_FORMS + 2)])
    assert len(many.expand("x").forms) == MAX_FORMS
    with pytest.raises(BiovizError, match="unknown synonym scope"):
        Expansion(("exact",))
    assert Expansion(("INCLUSION", "EXACT")) == Expansion(("EXACT", "INCLUSION"))


def test_lexicon_file_round_trips_and_a_damaged_one_is_rebuilt(tmp_home, mini_lexicon, monkeypatch):
    assert Lexicon.from_bytes(mini_lexicon.to_bytes()).entries == mini_lexicon.entries
    with pytest.raises(ValueError):
        Lexicon.from_bytes(gzip.compress(b'{"format": 1, "entries": [["a", "b"]]}'))
    monkeypatch.delenv(SHARED_ENV, raising=False)  # the stub's lexicon goes to this home, not the session's cache
    builds = []

    def build(progress=None):
        builds.append(1)
        if progress is not None:
            progress(1, 1)
        return mini_lexicon

    monkeypatch.setattr(lexicon_module, "build_lexicon", build)
    monkeypatch.setattr(lexicon_module, "_loaded", {})
    assert not lexicon_module.lexicon_ready()  # a partial answer does not build it beside an encoding
    steps = []
    assert len(load_lexicon(progress=lambda done, total: steps.append((done, total)))) == len(mini_lexicon)
    assert steps == [(1, 1)] and builds == [1]
    path = lexicon_module.lexicon_path()
    assert path.is_file() and path.parent == tmp_home / "lexicon"
    monkeypatch.setattr(lexicon_module, "_loaded", {})
    assert lexicon_module.lexicon_ready()  # on disk: read in about a second
    assert len(load_lexicon()) == len(mini_lexicon) and builds == [1]  # read back from the file
    path.write_bytes(b"garbage")
    monkeypatch.setattr(lexicon_module, "_loaded", {})
    assert len(load_lexicon()) == len(mini_lexicon) and builds == [1, 1]  # set aside and rebuilt
    assert list(path.parent.glob("*.corrupt-*"))


def test_expanded_forms_score_as_the_best_of_a_term_and_its_forms():
    names = np.eye(3, dtype=np.float32)
    terms = np.array([[1, 0, 0], [0, 1, 0]], dtype=np.float32)
    forms = ExpandedForms.of(["f1", "f2"], [1, 1], np.array([[0, 0, 1], [0.6, 0.8, 0]], dtype=np.float32))
    scores = name_scores(terms, names, Ranking("dense"), forms=forms)
    assert np.allclose(scores, [[1, 0, 0], [0.6, 1, 1]])
    assert forms.between(1, 2).owners.tolist() == [0, 0] and len(forms.between(0, 1)) == 0
    with pytest.raises(BiovizError, match="outside this batch"):
        name_scores(terms[:1], names, Ranking("dense"), forms=forms)
    assert expand_texts(["heart attack"], NO_EXPANSION)[0].forms == ()  # off: the lexicon is not even loaded


@pytest.mark.slow
def test_heart_attack_on_icd10_chapters_has_a_myocardial_infarction_code_in_its_top_3(shared_home, monkeypatch):
    """The issue's done-when: med-minilm, hybrid ranking and expansion as the Neighbours page opens them."""
    monkeypatch.setenv("BIOVIZ_HOME", str(shared_home))
    args = _neighbours_args(["heart attack", "--source", "icd10", "-k", "3", "--quiet"])
    top = [row["concept_id"] for row in args.handler(args)["neighbours"]]
    assert any(code.startswith(("I21", "I22")) for code in top), top
    assert DEFAULT_EXPANSION.on


def _neighbours_args(argv):
    import argparse

    from bioviz.cli import neighbours

    parser = argparse.ArgumentParser()
    neighbours.register(parser.add_subparsers())
    return parser.parse_args(["neighbours", *argv])
