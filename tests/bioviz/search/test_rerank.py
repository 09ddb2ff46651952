"""Granularity re-ranking (bioviz.search.rerank): a parent that scores almost as well as its child comes first."""

import pytest

from bioviz.errors import BiovizError
from bioviz.search.rerank import OntologyReranker, Reranker, rerank

PARENTS = {"focal": ["seizure"], "seizure": ["neuro"], "absence": ["seizure"], "neuro": []}
ANCESTOR = Reranker("ancestor", margin=0.05)


def parents_of(concept):
    return PARENTS.get(concept, [])


def test_a_close_parent_of_the_first_concept_comes_first_and_scores_are_kept():
    top = [("focal", 0.80), ("absence", 0.78), ("seizure", 0.76)]
    assert rerank(top, parents_of=parents_of, reranker=ANCESTOR) == [("seizure", 0.76), ("focal", 0.80),
                                                                     ("absence", 0.78)]


@pytest.mark.parametrize("top, exact, reranker", [
    ([("focal", 0.80), ("seizure", 0.70)], (), ANCESTOR),                     # the parent is too far below
    ([("focal", 0.80), ("seizure", 0.79)], ("focal",), ANCESTOR),             # an exact match is never moved
    ([("focal", 0.80), ("seizure", 0.79)], (), Reranker()),                   # the none rule
    ([("focal", 0.80), ("x", 0.79), ("seizure", 0.79)], (), Reranker("ancestor", 0.05, k=2)),  # outside the window
    ([("seizure", 0.80), ("focal", 0.79)], (), ANCESTOR),                     # a child is not a parent
])
def test_the_order_is_kept_when_the_rule_does_not_apply(top, exact, reranker):
    assert rerank(top, parents_of=parents_of, exact=exact, reranker=reranker) == top


def test_bad_settings_are_refused_in_one_line():
    for kwargs in ({"rule": "cross-encoder"}, {"rule": "ancestor", "margin": -1}, {"rule": "ancestor", "k": 0}):
        with pytest.raises(BiovizError):
            Reranker(**kwargs)
    assert Reranker("ancestor", 0.02).label == "ancestor (margin 0.02)" and Reranker().label == "none"


def test_an_ontology_reranker_reads_parents_from_the_graph(data_dir):
    from bioviz.ontology.obo import load_obo

    ontology = load_obo(data_dir / "mini.obo")
    child = next(c for c in ontology.concepts if list(ontology.graph.predecessors(c)))
    parent = next(iter(ontology.graph.predecessors(child)))
    regrain = OntologyReranker(ANCESTOR, ontology)
    assert regrain([(child, 0.9), (parent, 0.88)], ())[0][0] == parent
    assert OntologyReranker(ANCESTOR, None)([(child, 0.9), (parent, 0.88)], ()) == [(child, 0.9), (parent, 0.88)]
