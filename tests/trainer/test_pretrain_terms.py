"""pretrain-terms.json (trainer.pretrain.terms): the texts a run trained on, hashed as the overlap rule reads them."""

from __future__ import annotations

import json

import pytest
from bioviz.evaluation import overlap
from bioviz.ontology.model import normalise_name
from trainer.pretrain.config import PretrainConfig, validate
from trainer.pretrain.pairs import Pair
from trainer.pretrain.fit import prepare
from trainer.pretrain.terms import pair_terms, write_terms


def test_every_text_of_a_pair_and_the_names_it_was_built_from_are_recorded_normalised():
    pair = Pair("Heart  Attack", "a kind of heart disease", "definitions", "hpo", "description", ("HP:1",),
                ("Heart Attack", "Heart disease"))
    assert pair_terms([pair]) == sorted({overlap.term_hash(t) for t in
                                         ("heart attack", "a kind of heart disease", "heart disease")})


@pytest.mark.slow
def test_the_file_holds_the_training_pairs_texts_and_the_rule_finds_them(data_dir, tmp_home, tmp_path):
    config = validate(PretrainConfig(sources=[str(data_dir / "mini.obo")], objectives=["synonyms"], batch_size=2,
                                     validation_pairs=0))
    pairs = prepare(config).train
    write_terms(pairs, tmp_path)
    (tmp_path / overlap.PRETRAIN_FILE).write_text(json.dumps({"config": {"sources": ["mini.obo"]}}))
    found = overlap.read_pretraining(tmp_path)
    texts = {t for p in pairs for t in (p.anchor, p.positive)}
    assert json.loads((tmp_path / overlap.TERMS_FILE).read_text())["texts"] == len(found.terms) >= len(texts) > 0
    assert overlap.terms_seen(found, texts) == len({normalise_name(t) for t in texts})
    assert overlap.terms_seen(found, ["no such term anywhere"]) == 0
