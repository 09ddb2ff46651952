"""Query location, ranking marks and concept cards on the tiny OBO fixture (no model needed)."""

import numpy as np
import pytest

from bioviz.search.index import NeighbourIndex
from bioviz.search.neighbours import comparison_rows, concept_card, find_query, held_out_names, rank_neighbours
from bioviz.ontology import level_view, load_source
from bioviz.space import Space, l2_normalise


@pytest.fixture
def mini(data_dir, tmp_home):
    ontology = load_source(str(data_dir / "mini.obo"))
    return ontology, level_view(ontology, depth=1)


def test_find_query_for_names_synonyms_dropped_names_and_free_text(mini):
    ontology, view = mini
    name = find_query("Heart  Attack", view, ontology)  # normalised comparison
    assert name.row is not None and name.class_id == "MINI:0000010" and name.concept_ids == ("MINI:0000011",)
    shared = find_query("shared name", view, ontology)  # ambiguous: dropped from the view, still in the ontology
    assert shared.row is None and set(shared.concept_ids) == {"MINI:0000030", "MINI:0000023"} and shared.in_ontology
    free = find_query("chest pain on exertion", view, ontology)
    assert not free.in_ontology and free.class_id is None


def test_rank_neighbours_marks_class_and_synonyms_and_compares(mini):
    ontology, view = mini
    query = find_query("heart attack", view, ontology)
    rng = np.random.default_rng(0)
    vectors = l2_normalise(rng.standard_normal((len(view.names), 16)).astype(np.float32))
    space = Space(tuple(view.names), vectors, "random")
    index = NeighbourIndex.from_view(space, view)
    reversed_index = NeighbourIndex.from_view(Space(space.names, -vectors, "negated"), view)
    rows = rank_neighbours(index, vectors[query.row], query, k=len(view.names),
                           other=(reversed_index, -vectors[query.row]))
    assert query.row not in [r["row"] for r in rows] and len(rows) == len(view.names) - 1
    by_name = {r["name"]: r for r in rows}
    assert by_name["myocardial infarction"]["same_concept"] and by_name["myocardial infarction"]["same_class"]
    assert by_name["arrhythmia"]["same_class"] and not by_name["arrhythmia"]["same_concept"]
    assert not by_name["asthma"]["same_class"]
    assert all(r["other_rank"] - r["rank"] == r["rank_change"] for r in rows)
    long_form = comparison_rows(rows[:2], rows[:1], label_a="a", label_b="b", query="heart attack")
    assert [r["model"] for r in long_form] == ["a", "a", "b"] and long_form[0]["query"] == "heart attack"
    restricted = rank_neighbours(index, vectors[query.row], query, k=10, restrict_class="MINI:0000020")
    assert {r["class_id"] for r in restricted} == {"MINI:0000020"}


def test_concept_card_and_held_out_names(mini):
    ontology, view = mini
    card = concept_card(ontology, "MINI:0000011")
    assert card["name"] == "myocardial infarction" and "heart attack" in card["synonyms"]
    assert [p["id"] for p in card["path"]] == ["MINI:0000011", "MINI:0000010", "MINI:0000001"]
    held = held_out_names(view)
    assert held and set(held) <= set(view.names) and held == held_out_names(view)


def test_candidates_among_training_names_and_unknown_sets(mini):
    from bioviz.errors import BiovizError
    from bioviz.search.neighbours import candidate_index
    from bioviz.ontology import make_split

    _, view = mini
    vectors = l2_normalise(np.random.default_rng(1).standard_normal((len(view.names), 8)).astype(np.float32))
    base = NeighbourIndex.from_view(Space(tuple(view.names), vectors, "random"), view)
    train = candidate_index(view, "unused", "train", base=base)
    assert set(train.space.names) == {view.names[i] for i in make_split(view, shots=15, seed=0).train}
    assert candidate_index(view, "unused", "names", base=base) is base
    asked = []
    lazy = lambda: asked.append(1) or base  # noqa: E731 - the app's cached index, given lazily
    assert candidate_index(view, "unused", "names", base=lazy) is base and asked == [1]
    assert set(candidate_index(view, "char-tfidf", "hypernyms", base=lazy).space.names) <= set(
        name for names in view.hypernym_names.values() for name in names)
    assert asked == [1]  # the class names are encoded on their own: the level's index is not asked for
    # the training names without an index of the level: only they are encoded (a large level need not wait),
    # the same names, concepts and classes as the level index's subset, and their vectors are the level's
    alone = candidate_index(view, "char-tfidf", "train", base=lazy)
    assert asked == [1] and alone.space.names == train.space.names
    assert (alone.concept_ids, alone.classes, alone.class_labels) == (train.concept_ids, train.classes,
                                                                      train.class_labels)
    from bioviz.search.neighbours import level_space
    level = NeighbourIndex.from_view(level_space(view, "char-tfidf")[0], view)
    assert np.allclose(candidate_index(view, "char-tfidf", "train", base=level).space.vectors, alone.space.vectors,
                       atol=1e-6)
    with pytest.raises(BiovizError, match="unknown candidate set"):
        candidate_index(view, "unused", "everything", base=base)


def test_first_encoding_estimate_counts_the_candidates_not_yet_cached(mini):
    from bioviz.models.registry import load_encoder
    from bioviz.models.encoding_estimate import record_rate
    from bioviz.ontology import make_split
    from bioviz.search.neighbours import candidate_names, first_encoding_estimate, level_space

    _, view = mini
    hypernyms = candidate_names(view, "hypernyms")
    assert "heart disease" in hypernyms and "heart attack" not in hypernyms
    trained = make_split(view, shots=15, seed=0).train
    assert candidate_names(view, "train") == [view.names[row] for row in trained]
    record_rate(load_encoder("char-tfidf"), 1000, 2.0)
    before = first_encoding_estimate(view, "char-tfidf")
    assert before.missing == len(set(view.names)) and before.seconds == pytest.approx(before.missing / 500)
    assert before.message().startswith("First use of char-tfidf on this level: under a second to encode")
    level_space(view, "char-tfidf")
    assert not first_encoding_estimate(view, "char-tfidf").needed
    assert first_encoding_estimate(view, "char-tfidf", "hypernyms").missing == len(set(hypernyms))
