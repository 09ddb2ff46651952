"""HiPrBERT's ordered distance categories: the rows, the loss and a run on the tiny OBO."""

from __future__ import annotations

import json

import pytest
import torch

from bioviz.ontology import load_source
from trainer.cli import main
from trainer.pretrain.fit import RESULT_FILE, training_datasets
from trainer.pretrain.ordered_loss import ordered_distance_loss
from trainer.pretrain.pairs import extract_pairs


@pytest.mark.slow
def test_a_distance_row_is_a_name_a_sibling_and_their_parent(data_dir, tmp_home):
    source = str(data_dir / "mini.obo")
    ontology = load_source(source)
    rows = extract_pairs(ontology, source, ["distances"])["distances"]
    assert rows
    graph = ontology.graph
    for row in rows:
        concept, sibling, parent = row.concepts
        assert row.negative_concept == parent and row.negative == ontology.concepts[parent].name
        assert graph.has_edge(parent, concept) and graph.has_edge(parent, sibling) and sibling != concept
        assert row.names == (row.anchor, row.positive, row.negative)
    # the top concept is no parent; a parent with one child gives no row through it
    assert all(row.negative_concept != "MINI:0000001" for row in rows)
    assert not any(row.anchor == "atrial fibrillation" and row.negative == "arrhythmia" for row in rows)
    # ordered rows train apart, with their own loss
    datasets = training_datasets(rows + extract_pairs(ontology, source, ["hierarchy"])["hierarchy"], batch_size=2)
    assert set(datasets) == {"distances", "pairs"} and len(datasets["distances"]["negative"]) == len(rows)


def _loss(anchor, sibling, parent):
    return ordered_distance_loss(torch.tensor(anchor), [torch.tensor(sibling), torch.tensor(parent)], (1, 2))


def test_the_loss_prefers_the_sibling_nearer_than_the_parent():
    anchor = [[1.0, 0.0, 0.0], [0.0, 0.0, 1.0]]
    near, middle = [[0.9, 0.1, 0.0], [0.0, 0.1, 0.9]], [[0.6, 0.8, 0.0], [0.0, 0.8, 0.6]]
    assert _loss(anchor, near, middle) < _loss(anchor, middle, near)


@pytest.mark.slow
def test_training_on_the_loss_orders_every_anchor_s_candidates():
    torch.manual_seed(0)
    batch, dim = 6, 16
    tables = [torch.nn.Parameter(torch.randn(batch, dim)) for _ in range(3)]  # anchors, siblings, parents
    optimiser = torch.optim.Adam(tables, lr=0.05)
    for _ in range(300):
        optimiser.zero_grad()
        loss = ordered_distance_loss(tables[0], tables[1:], (1, 2))
        loss.backward()
        optimiser.step()
    a, s, p = (torch.nn.functional.normalize(t.detach(), dim=-1) for t in tables)
    own_sibling, own_parent = (a * s).sum(1), (a * p).sum(1)
    others = (a @ torch.cat([s, p, a]).T)
    mask = torch.ones_like(others, dtype=torch.bool)
    rows = torch.arange(batch)
    for k in range(3):
        mask[rows, k * batch + rows] = False
    assert (own_sibling > own_parent).all()
    assert (own_parent > others.masked_fill(~mask, -2).max(dim=1).values).all()


def test_a_single_row_batch_is_finite():
    value = _loss([[1.0, 0.0]], [[0.5, 0.5]], [[0.0, 1.0]])
    assert torch.isfinite(value) and value > 0


@pytest.mark.slow
def test_pretraining_with_ordered_distances_and_another_objective_runs_and_records_them(data_dir, tmp_home,
                                                                                      tmp_path, capsys):
    # two datasets, two losses (HiPrBERT's for the ordered rows, InfoNCE for the pairs)
    out = tmp_path / "pretrained"
    assert main(["pretrain", "--sources", str(data_dir / "mini.obo"), "--objectives", "distances", "hierarchy",
                 "--max-pairs", "all", "--validation-pairs", "0", "--batch-size", "2", "--device", "cpu",
                 "--save-steps", "1000", "--out", str(out), "--json"]) == 0
    result = json.loads((out / RESULT_FILE).read_text())
    assert result["pairs"]["objectives"]["distances"] > 0 and result["steps"] > 0
    assert all(isinstance(loss, float) and loss == loss for loss in result["train_loss"])
