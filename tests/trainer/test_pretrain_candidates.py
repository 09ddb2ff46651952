"""The candidate encoders' options of ``python -m trainer pretrain`` (issue 31): the relatedness
term, mined hard negatives, the GIST and multi-similarity losses, WiSE-FT interpolation.

Tiny data (tests/data/mini.obo, batches of 4); one end-to-end run uses every option at once
and is interrupted and resumed, the rest check each piece without training.
"""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
import torch

from bioviz.models.model_spec import ModelSpec
from bioviz.ontology.model import normalise_name
from bioviz.ontology.sources import load_source
from trainer.cli import main
from trainer.events import CancelFlag, Cancelled
from trainer.pretrain.config import PretrainConfig, validate
from trainer.pretrain.dataset import build_pairs
from trainer.pretrain.leakage import held_out_names
from trainer.pretrain.mining import mine_negatives
from trainer.pretrain.name_pool import base_vectors, name_pool


def _mini(data_dir) -> str:
    return str(data_dir / "mini.obo")


def test_relatedness_pairs_are_random_allowed_names_with_the_bases_cosine(data_dir, tmp_home, tmp_path):
    from trainer.pretrain.relatedness import with_targets

    banned = tmp_path / "banned.txt"
    banned.write_text("asthma\nheart attack\n")
    pairs = build_pairs([_mini(data_dir)], ["synonyms"], validation_pairs=0, relatedness_pairs=20,
                        held=[held_out_names(banned)])
    assert len(pairs.relatedness) == 20 and pairs.counts()["relatedness"] == 20
    texts = {normalise_name(t) for p in pairs.relatedness for t in (p.anchor, p.positive)}
    assert not texts & {"asthma", "heart attack"} and len(texts) > 5
    assert all(p.anchor != p.positive for p in pairs.relatedness)
    again = build_pairs([_mini(data_dir)], ["synonyms"], validation_pairs=0, relatedness_pairs=20,
                        held=[held_out_names(banned)])
    assert again.relatedness == pairs.relatedness  # seeded: a resumed run trains on the same pairs
    scored = with_targets(pairs.relatedness[:3], "minilm")
    first = base_vectors([scored[0].anchor, scored[0].positive], "minilm")
    assert scored[0].target == pytest.approx(float(first[0] @ first[1]), abs=1e-5)
    assert len({round(p.target, 4) for p in scored}) == 3
    assert not build_pairs([_mini(data_dir)], ["synonyms"], validation_pairs=0).relatedness


def test_the_relatedness_loss_is_the_weighted_mse_of_cosine_and_target():
    from trainer.pretrain.fit import RELATEDNESS, _make_loss
    from trainer.pretrain.losses import RelatednessLoss

    model = _TinyModel()
    config = validate(PretrainConfig(sources=["hpo"], objectives=["synonyms"], relatedness_weight=3.0))
    losses = _make_loss(config, model, {"pairs": {}, RELATEDNESS: {}})
    assert isinstance(losses[RELATEDNESS], RelatednessLoss) and losses[RELATEDNESS].weight == 3.0
    features = [{"x": torch.tensor([[1.0, 0.0], [0.0, 1.0]])}, {"x": torch.tensor([[1.0, 0.0], [1.0, 0.0]])}]
    loss = losses[RELATEDNESS](features, torch.tensor([0.5, 0.0]))
    assert float(loss) == pytest.approx(3.0 * ((1.0 - 0.5) ** 2 + 0.0) / 2)


class _TinyModel(torch.nn.Module):
    """Stands in for a SentenceTransformer: the features are the embeddings."""

    def forward(self, features):
        return {"sentence_embedding": features["x"]}


def test_mined_negatives_are_near_names_of_other_concepts_never_the_anchors_or_held_out(data_dir, tmp_home):
    ontology = load_source(_mini(data_dir))
    source = _mini(data_dir)
    pairs = build_pairs([source], ["synonyms", "hierarchy"], validation_pairs=0).train
    banned = {"cardiopathy"}
    pool = name_pool({source: ontology}, lambda text, concept, s: normalise_name(text) not in banned)
    assert "cardiopathy" not in {normalise_name(n.text) for n in pool}
    mined, record = mine_negatives(pairs, {source: ontology}, pool, base="minilm")
    assert record["mined"] > 0 and record["anchors"] == len(pairs) and record["pool_names"] == len(pool)
    by_name = {normalise_name(n): c.id for c in ontology.concepts.values() for n in c.names}
    for pair in mined:
        if pair.negative is None:
            continue
        anchor = pair.concepts[0]
        own = {normalise_name(n) for n in ontology.concepts[anchor].names}
        assert normalise_name(pair.negative) not in own | banned
        assert by_name[normalise_name(pair.negative)] == pair.negative_concept != anchor
        if pair.objective == "hierarchy":  # never an ancestor of the child, nor under its parent (a sibling)
            import networkx as nx

            assert pair.negative_concept not in nx.ancestors(ontology.graph, anchor)
            assert pair.negative_concept not in nx.descendants(ontology.graph, pair.concepts[1])
        # the margin: the negative is below the positive by the base's cosine
        vectors = base_vectors([pair.anchor, pair.positive, pair.negative], "minilm")
        positive, negative = float(vectors[0] @ vectors[1]), float(vectors[0] @ vectors[2])
        assert negative < positive - 0.05 * abs(positive) + 1e-5
    # the nearest allowed name is taken: "heart attack" (myocardial infarction) is nearest to a heart name
    assert {p.negative for p in mined if p.negative} - {n.text for n in pool} == set()


def test_gist_and_multisimilarity_losses(data_dir):
    from sentence_transformers.sentence_transformer.losses import GISTEmbedLoss

    from trainer.pretrain.losses import GIST_TEMPERATURE, InBatchMultiSimilarityLoss, contrastive_loss, frozen_copy

    from bioviz.models.encoders import load_sentence_transformer

    encoder = load_sentence_transformer("minilm", device="cpu")
    guide = frozen_copy(encoder)
    assert not any(p.requires_grad for p in guide.parameters()) and any(p.requires_grad for p in encoder.parameters())
    gist = contrastive_loss("gist", encoder, guide=guide)
    assert isinstance(gist, GISTEmbedLoss) and gist.temperature == GIST_TEMPERATURE and gist.guide is guide
    model = _TinyModel()
    ms = contrastive_loss("multisimilarity", model)
    assert isinstance(ms, InBatchMultiSimilarityLoss)
    anchors = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    aligned = ms([{"x": anchors}, {"x": anchors.clone()}])
    swapped = ms([{"x": anchors}, {"x": anchors.flip(0)}])
    assert float(aligned) < float(swapped)  # each anchor's own positive pulled, the others pushed
    with_negative = ms([{"x": anchors}, {"x": anchors.clone()}, {"x": anchors.clone()}])
    assert float(with_negative) > float(aligned)  # a negative as near as the positive costs


def test_interpolation_replaces_the_weights_by_the_wise_ft_merge(tmp_home, tmp_path):
    from safetensors.numpy import load_file, save_file

    from bioviz.models.merge import WEIGHTS_FILE, merge_into

    base = ModelSpec.parse("minilm")
    tuned = tmp_path / "tuned"
    shutil.copytree(base.files(), tuned)
    weights = load_file(str(tuned / WEIGHTS_FILE))
    shifted = {k: (v + 1.0).astype(v.dtype) if np.issubdtype(v.dtype, np.floating) else v for k, v in weights.items()}
    save_file(shifted, str(tuned / WEIGHTS_FILE), metadata={"format": "pt"})
    record = merge_into(base, tuned, alpha=0.25)
    merged = load_file(str(tuned / WEIGHTS_FILE))
    name = next(k for k, v in weights.items() if np.issubdtype(v.dtype, np.floating))
    assert np.allclose(merged[name], weights[name].astype(np.float32) + 0.25, atol=1e-3)
    assert record.alpha == 0.25 and record.base == "minilm" and not list(tuned.glob("*.partial"))


@pytest.mark.parametrize("extra, reason", [
    (["--interpolate", "1.5"], "--interpolate must be in [0, 1]"),
    (["--relatedness-weight", "-1"], "--relatedness-weight must be >= 0"),
    (["--hard-negatives", "nearest"], "unknown --hard-negatives 'nearest'"),
    (["--loss", "triplet"], "unknown --loss 'triplet'"),
])
def test_bad_candidate_settings_are_one_line(extra, reason, data_dir, tmp_home, tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["pretrain", "--sources", _mini(data_dir), "--objectives", "synonyms", "--out", str(out), *extra]) == 2
    err = capsys.readouterr().err.strip()
    assert reason in err and "\n" not in err and not out.exists()


def test_relatedness_needs_the_sources_not_a_pair_file():
    config = PretrainConfig(sources=[], objectives=[], pairs_file="pairs.json.gz", relatedness_weight=1.0)
    with pytest.raises(Exception, match="--relatedness-weight needs the sources"):
        validate(config)


@pytest.mark.slow  # over 5 s in a full run (CI lists the times)
def test_every_candidate_option_trains_resumes_and_is_recorded(data_dir, tmp_home, tmp_path, capsys):
    from bioviz.evaluation.overlap import TERMS_FILE, term_hash
    from bioviz.models.encoders import load_sentence_transformer
    from trainer.pretrain.fit import RESULT_FILE, pretrain

    out = tmp_path / "candidate"
    config = validate(PretrainConfig(
        sources=[_mini(data_dir)], objectives=["synonyms", "definitions", "hierarchy"], batch_size=4, device="cpu",
        save_steps=1000, validation_pairs=0, max_seq_length=16, loss="gist", hard_negatives="mined",
        relatedness_weight=1.0, relatedness_pairs=16, interpolate=0.5))
    cancel = CancelFlag()

    def stop_after_one(event):
        if event["event"] == "step" and event["step"] == 1:
            cancel.set()

    with pytest.raises(Cancelled):
        pretrain(config, out, callbacks=[stop_after_one], cancel=cancel)
    assert main(["pretrain", "--out", str(out), "--resume", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary == json.loads((out / RESULT_FILE).read_text())
    assert summary["resumed_from_step"] == 1 and summary["steps"] > 1
    assert summary["pairs"]["relatedness"] == 16 and summary["relatedness"]["pairs"] == 16
    assert sum(summary["pairs"]["hard_negatives"].values()) == summary["mining"]["mined"] > 0
    assert summary["interpolation"]["alpha"] == 0.5 and summary["interpolation"]["base"] == "minilm"
    assert summary["config"]["loss"] == "gist"
    # the published weights are the merge: between the base's and not equal to them
    model = load_sentence_transformer(str(out))
    base = load_sentence_transformer("minilm")
    vectors, base_vectors_ = model.encode(["asthma"]), base.encode(["asthma"])
    assert vectors.shape == base_vectors_.shape and not np.allclose(vectors, base_vectors_, atol=1e-5)
    # the relatedness pairs' names are training texts too (the Evaluation page's overlap mark)
    hashes = set(json.loads((out / TERMS_FILE).read_text())["hashes"])
    assert "relatedness_targets" in summary["seconds"] and hashes
    assert any(term_hash(n) in hashes for n in ("pneumonia", "asthma", "arrhythmia"))


def test_the_relatedness_targets_come_from_the_teacher_when_one_is_given(data_dir, tmp_home, tmp_path, monkeypatch):
    import trainer.pretrain.fit as fit

    asked = []

    class Stop(Exception):
        pass

    def record(pairs, model):
        asked.append(model)
        raise Stop

    monkeypatch.setattr(fit, "with_targets", record)
    for teacher, expected in ((None, "minilm"), ("char-tfidf-teacher", "char-tfidf-teacher")):
        config = validate(PretrainConfig(sources=[_mini(data_dir)], objectives=["synonyms"], batch_size=4,
                                         device="cpu", validation_pairs=0, relatedness_weight=1.0,
                                         relatedness_pairs=4, relatedness_teacher=teacher))
        with pytest.raises(Stop):
            fit.pretrain(config, tmp_path / f"out-{expected}")
        assert asked[-1] == expected
