"""An exact concept id or exact name typed as a query resolves to its concept (bioviz.search.neighbours)."""

import numpy as np
import pytest

from bioviz.ontology import level_view, load_source
from bioviz.search.index import NeighbourIndex
from bioviz.search.neighbours import find_query, match_concept_id, rank_neighbours, resolve_query
from bioviz.space import Space, l2_normalise


@pytest.fixture
def mini(data_dir, tmp_home):
    ontology = load_source(str(data_dir / "mini.obo"))
    return ontology, level_view(ontology, depth=1)


@pytest.mark.parametrize("typed", ["MINI:0000011", "mini:0000011", "  Mini:0000011 "])
def test_a_concept_id_resolves_to_the_concepts_name_row_and_class(mini, typed):
    ontology, view = mini
    info = resolve_query(typed, view, ontology)
    assert info.text == "myocardial infarction" and info.row == view.names.index("myocardial infarction")
    assert info.class_id == "MINI:0000010" and info.concept_ids[0] == "MINI:0000011"
    assert info.resolved_by == "id" and info.typed == typed
    assert find_query(typed, view, ontology).row is None  # what the page ranked before: the code as text


def test_the_ranking_of_a_resolved_id_is_the_ranking_of_the_concepts_name(mini):
    ontology, view = mini
    rng = np.random.default_rng(0)
    vectors = l2_normalise(rng.standard_normal((len(view.names), 16)).astype(np.float32))
    index = NeighbourIndex.from_view(Space(tuple(view.names), vectors, "random"), view)
    by_id = resolve_query("mini:0000011", view, ontology)
    by_name = find_query("myocardial infarction", view, ontology)
    rows = rank_neighbours(index, vectors[by_id.row], by_id, k=5)
    assert rows == rank_neighbours(index, vectors[by_name.row], by_name, k=5)
    assert "myocardial infarction" not in [r["name"] for r in rows]  # the concept's own name is left out
    assert any(r["same_concept"] for r in rows)  # its synonym "heart attack" is marked


def test_a_class_id_resolves_to_the_class_concepts_name(mini):
    ontology, view = mini
    info = resolve_query("mini:0000020", view, ontology)  # a class of the level: not one of its names
    assert info.text == "lung disease" and info.row is None
    assert info.class_id == "MINI:0000020" and info.concept_ids == ("MINI:0000020",) and info.resolved_by == "id"


def test_an_exact_name_in_another_case_resolves_to_its_spelling(mini):
    ontology, view = mini
    info = resolve_query("HEART   Attack", view, ontology)
    assert info.text == "heart attack" and info.row is not None and info.resolved_by == "name"
    assert info.concept_ids == ("MINI:0000011",) and info.typed == "HEART   Attack"
    dropped = resolve_query("Shared Name", view, ontology)  # ambiguous: not in the level, still a name
    assert dropped.text == "shared name" and dropped.row is None and dropped.resolved_by == "name"


@pytest.mark.parametrize("typed", ["chest pain on exertion", "MINI:9999999", "0000011", ""])
def test_anything_else_stays_free_text(mini, typed):
    ontology, view = mini
    info = resolve_query(typed, view, ontology)
    assert info.text == typed and info.row is None and info.resolved_by is None and not info.concept_ids


def test_without_the_ontology_the_levels_ids_resolve(mini):
    _, view = mini
    info = resolve_query("mini:0000022", view)
    assert info.text == "asthma" and info.class_id == "MINI:0000020" and info.resolved_by == "id"


@pytest.mark.slow  # over 5 s in a full run (CI lists the times)
def test_icd10cm_codes_with_or_without_the_dot(shared_home, monkeypatch):
    monkeypatch.setenv("BIOVIZ_HOME", str(shared_home))
    ontology = load_source("icd10cm")
    view = level_view(ontology, depth=1)
    for typed in ("R39.11", "r39.11", "R3911", "r3911"):
        info = resolve_query(typed, view, ontology)
        assert (info.text, info.resolved_by, info.concept_ids[0]) == ("Hesitancy of micturition", "id", "R39.11")
        assert info.row is not None and view.name_concepts[info.row] == "R39.11"
    assert match_concept_id("urinary hesitancy", ontology) is None
    free = resolve_query("urinary hesitancy", view, ontology)
    assert free.resolved_by is None and free.text == "urinary hesitancy"
