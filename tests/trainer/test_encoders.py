"""Heads, the CCA constraint, and their exact rewrite as sentence-transformers Dense modules."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from trainer.encoders import BaseMix, DANEncoder, ResidualEncoder, Stack, build_head, class_prototypes, fit_cca


def _run_dense(modules, x: torch.Tensor) -> torch.Tensor:
    features = {"sentence_embedding": x}
    for module in modules:
        features = module(features)
    return features["sentence_embedding"]


@pytest.mark.parametrize("head_class", [ResidualEncoder, DANEncoder])
def test_dense_rewrite_computes_the_same_function(head_class):
    torch.manual_seed(0)
    head = head_class(dim=8, hidden=24, dropout=0.5).eval()
    x = torch.nn.functional.normalize(torch.randn(5, 8), dim=1)
    with torch.no_grad():
        assert torch.allclose(_run_dense(head.to_dense_modules(), x), head(x), atol=1e-5)


def test_residual_head_averages_with_its_input():
    head = ResidualEncoder(dim=4, hidden=6, dropout=0.0)
    for p in head.enc.parameters():
        torch.nn.init.zeros_(p)
    x = torch.randn(3, 4)
    assert torch.allclose(head(x), x / 2)


def _clusters(n_classes=4, per_class=20, dim=12, seed=0):
    rng = np.random.default_rng(seed)
    labels = np.repeat(np.arange(n_classes), per_class)
    x = rng.normal(size=(n_classes, dim))[labels] + rng.normal(size=(len(labels), dim))
    return x.astype(np.float32), labels


def test_cca_keeps_the_input_dimensionality():
    x, labels = _clusters()
    names_map, proto_map, k = fit_cca(x, labels)
    assert k == 3  # 4 prototypes span 3 centred directions
    assert names_map.weight.shape == (12, 12) and names_map.bias.shape == (12,)
    assert proto_map.weight.shape == (12, 12)
    projected = names_map(torch.from_numpy(x))
    assert projected.shape == x.shape
    protos = proto_map(torch.from_numpy(class_prototypes(x, labels, 4)))
    assert protos.shape == (4, 12)
    # The canonical variates have equal variance on the training names, and the projected
    # names unit mean norm (the scale of the other heads' inputs).
    stds = projected[:, :k].std(0, unbiased=False).numpy()
    assert np.allclose(stds, stds[0], rtol=1e-3)
    assert abs(float(projected.norm(dim=1).mean()) - 1.0) < 1e-4


def test_cca_projection_brings_names_towards_their_projected_prototypes():
    x, labels = _clusters(seed=1)
    names_map, proto_map, k = fit_cca(x, labels)
    names = torch.nn.functional.normalize(names_map(torch.from_numpy(x))[:, :k], dim=1)
    protos = torch.nn.functional.normalize(proto_map(torch.from_numpy(class_prototypes(x, labels, 4)))[:, :k], dim=1)
    sims = names @ protos.T
    own = sims[torch.arange(len(labels)), torch.from_numpy(labels)]
    assert (own >= sims.max(dim=1).values - 1e-6).float().mean() > 0.8


def test_stack_exports_cca_then_dan():
    x, labels = _clusters()
    names_map, _, _ = fit_cca(x, labels)
    stack = Stack(names_map, build_head("cca", 12, 16, 0.5)).eval()
    inputs = torch.from_numpy(x[:4])
    with torch.no_grad():
        assert torch.allclose(_run_dense(stack.to_dense_modules(), inputs), stack(inputs), atol=1e-4)


def _heads(dim=12):
    x, labels = _clusters(dim=dim)
    names_map, _, _ = fit_cca(x, labels)
    return {"residual": ResidualEncoder(dim, 16, 0.5), "dan": DANEncoder(dim, 16, 0.5),
            "cca": Stack(names_map, build_head("cca", dim, 16, 0.5))}


@pytest.mark.parametrize("kind", ["residual", "dan", "cca"])
@pytest.mark.parametrize("weight", [0.0, 0.3, 1.0])
def test_base_mix_exports_exactly_for_every_head(kind, weight):
    torch.manual_seed(1)
    mix = BaseMix(_heads()[kind], weight=weight, scale=2.5).eval()
    x = torch.nn.functional.normalize(torch.randn(6, 12), dim=1)
    with torch.no_grad():
        assert torch.allclose(_run_dense(mix.to_dense_modules(), x), mix(x), atol=1e-5)


def test_a_mixed_residual_head_carries_its_input_once():
    modules = BaseMix(ResidualEncoder(8, 16, 0.5), 0.3).to_dense_modules()
    assert [m.linear.out_features for m in modules] == [16 + 2 * 8, 8]  # not 16 + 4 * 8


def test_base_mix_interpolates_between_the_head_and_its_input():
    torch.manual_seed(2)
    head = DANEncoder(8, 16, 0.5).eval()
    x = torch.randn(4, 8)
    with torch.no_grad():
        assert torch.allclose(BaseMix(head, 0.0, scale=2.0)(x), head(x) / 2)
        assert torch.allclose(BaseMix(head, 1.0)(x), x)
        halfway = BaseMix(head, 0.5)(x)
        assert torch.allclose(halfway, (head(x) + x) / 2, atol=1e-6)
    assert BaseMix(head, 0.25, scale=3.0).state_dict()["mix"].tolist() == [0.25, 3.0]
    with pytest.raises(ValueError):
        BaseMix(head, 1.5)


def test_unknown_head_is_refused():
    with pytest.raises(ValueError):
        build_head("definitions", 4, 4, 0.5)


@pytest.mark.parametrize("kind", ["residual", "dan", "cca", "hierarchical"])
def test_identity_start_makes_the_head_start_at_its_input(kind):
    torch.manual_seed(0)
    head = build_head(kind, dim=8, hidden=24, dropout=0.5, identity_start=True).eval()
    x = torch.nn.functional.normalize(torch.randn(5, 8), dim=1)
    with torch.no_grad():
        assert torch.allclose(head(x), x, atol=1e-6)
        # ...and the exported Dense modules compute the same identity.
        assert torch.allclose(_run_dense(head.to_dense_modules(), x), x, atol=1e-6)
    # The extra hidden units start silent but are trainable.
    assert head.enc.output_layer.weight[:, 16:].abs().sum() == 0
    assert head.enc.hidden_layer.weight[16:].abs().sum() > 0


def test_random_start_is_not_the_identity():
    torch.manual_seed(0)
    head = build_head("dan", dim=8, hidden=24, dropout=0.5).eval()
    x = torch.nn.functional.normalize(torch.randn(5, 8), dim=1)
    with torch.no_grad():
        assert not torch.allclose(head(x), x, atol=1e-2)


def test_identity_start_needs_twice_the_input_width():
    with pytest.raises(ValueError, match="hidden >= 2 x 8"):
        build_head("dan", dim=8, hidden=12, dropout=0.5, identity_start=True)
