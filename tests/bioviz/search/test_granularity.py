"""A proposed concept's parents and children, a coder's move up or down, and the columns a coding gains."""

import pandas as pd
import pytest

from bioviz.errors import BiovizError, UnknownConceptError
from bioviz.ontology import load_source
from bioviz.search.granularity import (CHOICE_COLUMNS, MODEL, MOVED_BOTH, MOVED_DOWN, MOVED_UP, CodingChoice,
                                       ConceptRef, Granularity, granularity, move, proposal, with_choices,
                                       with_parents)
from bioviz.search.term_coding import export_frame

MI, HEART, ARRHYTHMIA, AF, CARDIOPULMONARY = "MINI:0000011", "MINI:0000010", "MINI:0000012", "MINI:0000013", \
    "MINI:0000030"
ROOT, LUNG, ASTHMA = "MINI:0000001", "MINI:0000020", "MINI:0000022"


@pytest.fixture
def mini(data_dir, shared_home, monkeypatch):
    monkeypatch.setenv("BIOVIZ_HOME", str(shared_home))  # the parsed source cached once per session
    return load_source(str(data_dir / "mini.obo"))


def ids(refs):
    return [r.id for r in refs]


def test_a_concept_has_its_parent_and_children_with_names(mini):
    found = granularity(mini, MI)
    assert isinstance(found, Granularity) and found.concept == ConceptRef(MI, "myocardial infarction")
    assert found.parents == (ConceptRef(HEART, "heart disease"),) and found.children == ()
    assert ids(granularity(mini, HEART).children) == [MI, ARRHYTHMIA, CARDIOPULMONARY]
    with pytest.raises(AttributeError):  # frozen: a value that crosses layers
        found.parents = ()


def test_one_level_is_the_consistent_taxonomy_and_the_root_bounds_it(mini):
    # AF is_a arrhythmia and (a shortcut) heart disease: one level up is arrhythmia only
    assert ids(granularity(mini, AF).parents) == [ARRHYTHMIA]
    assert AF not in ids(granularity(mini, HEART).children)
    assert ids(granularity(mini, CARDIOPULMONARY).parents) == [HEART, LUNG]  # two real parents
    assert granularity(mini, HEART).parents == ()  # the root is the whole level, no code of it
    # a level rooted lower: its root is not reached, and a concept outside it has no moves
    assert ids(granularity(mini, AF, root=HEART).parents) == [ARRHYTHMIA]
    assert granularity(mini, ARRHYTHMIA, root=HEART).parents == ()
    assert ids(granularity(mini, CARDIOPULMONARY, root=LUNG).parents) == []  # heart disease: outside; lung: root
    outside = granularity(mini, ASTHMA, root=HEART)
    assert outside.parents == () and outside.children == ()
    with pytest.raises(UnknownConceptError):
        granularity(mini, "MINI:9999999")


def test_moves_go_one_level_up_or_down_and_record_the_proposal(mini):
    start = proposal("heart attack", ConceptRef(MI, "myocardial infarction"))
    assert start.how == MODEL and start.chosen == start.proposed
    up = move(start, mini, "up")  # one parent: no target needed
    assert up.chosen == ConceptRef(HEART, "heart disease") and up.proposed.id == MI and up.how == MOVED_UP
    assert up.moves == ("up",) and start.moves == ()  # a new value; the old one unchanged
    sideways = move(up, mini, "down", ARRHYTHMIA)
    assert sideways.chosen.id == ARRHYTHMIA and sideways.how == MOVED_BOTH
    down = move(sideways, mini, "down")
    assert down.chosen.id == AF and move(proposal("x", ConceptRef(HEART, "h")), mini, "down", MI).how == MOVED_DOWN
    back = move(up, mini, "down", MI)
    assert back.chosen.id == MI and back.how == MODEL  # back on the proposal
    assert move(down, mini, "keep") == start


@pytest.mark.parametrize("kind, target, message", [
    ("down", None, "has 3 children in this level"),
    ("down", ASTHMA, "is not a child of MINI:0000010"),
    ("up", None, "has 0 parents"),
    ("sideways", None, "a move is one of up, down, keep"),
])
def test_a_bad_move_is_a_one_line_error(mini, kind, target, message):
    choice = CodingChoice("t", ConceptRef(MI, "myocardial infarction"), ConceptRef(HEART, "heart disease"), ("up",))
    with pytest.raises(BiovizError, match=message):
        move(choice, mini, kind, target)


def _coding():
    frame = pd.DataFrame({"term": ["heart attack", "wheeze", "nothing"], "match": ["nearest"] * 3,
                          "code_a": [MI, ASTHMA, ""], "name_a": ["myocardial infarction", "asthma", ""],
                          "low_confidence": [False, True, False]})
    frame.attrs.update(models=["toy"], ranking="dense")
    return frame


def test_a_coding_gains_its_parents_and_the_choices_for_the_csv(mini):
    frame = with_parents(_coding(), mini)
    assert list(frame["parent_a"]) == [HEART, LUNG, ""] and list(frame["parent_name_a"])[0] == "heart disease"
    up = move(proposal("heart attack", ConceptRef(MI, "myocardial infarction")), mini, "up")
    stale = CodingChoice("wheeze", ConceptRef("MINI:0000021", "pneumonia"), ConceptRef(LUNG, "lung disease"), ("up",))
    chosen = with_choices(frame, {"heart attack": up, "wheeze": stale})
    rows = chosen.set_index("term")[list(CHOICE_COLUMNS)]
    assert tuple(rows.loc["heart attack"]) == (MI, "myocardial infarction", HEART, "heart disease", MOVED_UP)
    # a choice made for another proposal (coded again under another model) is not applied
    assert tuple(rows.loc["wheeze"]) == (ASTHMA, "asthma", ASTHMA, "asthma", MODEL)
    assert tuple(rows.loc["nothing"]) == ("", "", "", "", "")
    export = export_frame(chosen)
    assert {"parent (toy)", "parent name (toy)", "chosen_id", "choice"} <= set(export.columns)
    assert list(_coding().columns) == ["term", "match", "code_a", "name_a", "low_confidence"]  # inputs untouched
