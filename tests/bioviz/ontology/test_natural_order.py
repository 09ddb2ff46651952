"""Classes in their natural order: chapters I, II, ... IX, X; codes 1, 2, ... 10; code ranges by letter."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from bioviz.ontology import LevelSpec
from bioviz.ontology.natural_order import natural_key, natural_sorted, roman_value

ROMAN = ["I", "II", "III", "IV", "V", "VI", "VII", "VIII", "IX", "X", "XI", "XII", "XIII", "XIV", "XV", "XVI",
         "XVII", "XVIII", "XIX", "XX", "XXI", "XXII"]


@given(st.permutations(ROMAN))
def test_roman_chapters_sort_by_value(shuffled):
    assert natural_sorted(shuffled) == ROMAN


def test_numbers_inside_ids_sort_by_value_and_ranges_by_their_start():
    assert natural_sorted(["10", "2", "1", "21"]) == ["1", "2", "10", "21"]
    assert natural_sorted(["C00-D48", "A00-B99", "B9", "B10"]) == ["A00-B99", "B9", "B10", "C00-D48"]
    assert natural_sorted(["HP:0000152", "HP:0000119"]) == ["HP:0000119", "HP:0000152"]


def test_a_level_with_some_roman_looking_ids_sorts_them_as_text():
    # "C" and "D" are numerals, "B" is not: the level is not a list of chapters
    assert natural_sorted(["D", "C", "B"]) == ["B", "C", "D"]
    assert roman_value("IIII") is None and roman_value("") is None


@given(st.lists(st.text(alphabet="AB019-:.", max_size=6), max_size=20))
def test_the_key_orders_any_ids_without_error(ids):
    assert sorted(natural_sorted(ids)) == sorted(ids)
    assert natural_sorted(ids) == sorted(ids, key=natural_key) or all(roman_value(i) for i in ids)


def test_icd10_chapters_come_in_their_natural_order(shared_home, monkeypatch):
    monkeypatch.setenv("BIOVIZ_HOME", str(shared_home))
    view = LevelSpec("icd10", depth=1).load()
    assert view.classes[:10] == ROMAN[:10]
    assert view.class_labels[0].startswith("Certain infectious and parasitic diseases")
    assert [view.classes[label] for label in view.labels[:3]] == [view.classes[0]] * 3, "names grouped in that order"
