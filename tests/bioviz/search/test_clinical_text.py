"""bioviz.search.clinical_text: term keys, name alternates, initials and what reads as an abbreviation (no model)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bioviz.search.clinical_text import initials, key_words, looks_like_abbreviation, name_alternates, term_key


@pytest.mark.parametrize("a, b", [
    ("kidney stones", "Stone in kidney"),  # order, plural, a function word
    ("Anaemia", "anemia"),  # British ae
    ("Oesophageal varices", "esophageal varice"),  # British oe
    ("Tumours of the bladder", "bladder tumor"),  # -our, plural, articles
    ("injuries of the head", "head injury"),  # -ies
    ("DVT NOS", "DVT"),  # the coders' NOS
    ("Anaemia, unspecified", "anemia"),  # ... and "unspecified"
    ("Fractured femur", "fracture of femur"),  # the condition's own word
    ("Sjögren syndrome", "sjogren SYNDROME"),  # accents and case
    ("Crohn's disease", "Crohn disease"),  # a possessive
    ("heart-attack", "attack heart"),  # hyphens split words
])
def test_spellings_of_one_term_share_a_key(a, b):
    assert term_key(a) == term_key(b)


@pytest.mark.parametrize("a, b", [
    ("hypertension without heart failure", "hypertension with heart failure"),  # negations change the concept
    ("acute bronchitis", "chronic bronchitis"),
    ("other dyspnoea", "dyspnoea"),
    ("abscess", "abscissa"),
])
def test_words_that_change_the_concept_keep_keys_apart(a, b):
    assert term_key(a) != term_key(b)


def test_a_key_is_sorted_distinct_content_words_and_empty_for_function_words_only():
    assert term_key("stone stones of the kidney") == "kidney stone"
    assert key_words("Stones in the kidneys") == ["stone", "kidney"]  # in order, for substitutions
    assert term_key("of the NOS") == term_key("") == term_key("  ,;  ") == ""
    assert term_key("abscess") == "abscess" and term_key("diabetes") == term_key("Diabetes")  # -ss kept, one stem


WORD = st.sampled_from(["kidney", "stones", "anaemia", "tumours", "of", "the", "NOS", "injuries", "oesophageal",
                        "acute", "without", "heart", "failure", "Colour", "fractured", "abscess", "diabetes",
                        "Sjögren", "T2DM", "covid-19", "in", "unspecified", "haemorrhage", "breath"])
ASCII_TEXT = st.text(st.sampled_from("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 -,'()[]"),
                     max_size=40)


@given(words=st.lists(WORD, max_size=6), data=st.data())
def test_a_key_ignores_word_order(words, data):
    shuffled = data.draw(st.permutations(words))
    assert term_key(" ".join(words)) == term_key(" ".join(shuffled))


@given(text=ASCII_TEXT)
def test_a_key_ignores_case_and_surrounding_space(text):
    assert term_key(text) == term_key(text.upper()) == term_key(f"  {text.lower()}  ")


@given(words=st.lists(WORD, max_size=6))
def test_keying_a_key_again_changes_nothing(words):
    key = term_key(" ".join(words))
    assert term_key(key) == key
    assert key == " ".join(sorted(set(key.split())))  # sorted, each word once


@pytest.mark.parametrize("name, alternates", [
    ("Varicella [chickenpox]", ["Varicella", "chickenpox"]),
    ("Rubella [German measles] without complication", ["Rubella without complication",
                                                      "German measles without complication"]),
    # a bracket at the end of a comma part replaces that part only
    ("Otitis media, unspecified [ear infection]", ["Otitis media, unspecified", "Otitis media, ear infection",
                                                   "Otitis media"]),
    ("Essential (primary) hypertension", ["Essential hypertension", "Essential primary hypertension"]),
    ("Hypertensive heart disease with (congestive) heart failure",
     ["Hypertensive heart disease with heart failure", "Hypertensive heart disease with congestive heart failure"]),
    ("Urinary tract infection, site not specified", ["Urinary tract infection"]),  # the comma head
    ("Acute pharyngitis (strep), NOS", ["Acute pharyngitis, NOS", "Acute pharyngitis strep, NOS",
                                        "Acute pharyngitis", "Acute pharyngitis strep"]),
    ("Calculus of kidney", []),
    ("", []),
])
def test_name_alternates(name, alternates):
    assert name_alternates(name) == alternates


@given(name=ASCII_TEXT)
def test_alternates_are_distinct_non_empty_and_never_the_name(name):
    out = name_alternates(name)
    assert len(out) == len(set(out)) and all(alt and alt != name for alt in out)


@pytest.mark.parametrize("text, letters", [
    ("Shortness of breath", ("sob", "sb")),  # every word's letter, then the content words' only
    ("shortness-of-breath", ("sob", "sb")),  # hyphenated parts are words
    ("Gastro-esophageal reflux disease", ("gerd",)),
    ("Chronic obstructive pulmonary disease", ("copd",)),
    ("Type 2 diabetes mellitus", ("t2dm",)),
    ("Deep vein thrombosis NOS", ("dvt",)),  # NOS is no letter
    ("Urinary tract infection [UTI]", ("uti",)),  # brackets left out
    ("Essential (primary) hypertension", ("eh",)),  # parentheses too
    ("Urinary tract infection, site not specified", ("utisns", "uti")),  # the comma head too
    ("Cough", ()),  # one word: no abbreviation
    ("", ()),
])
def test_initials(text, letters):
    assert initials(text) == letters


@pytest.mark.parametrize("text, expected", [
    ("DVT", True), ("SOB", True), ("T2DM", True), ("NSTEMI", True), (" COPD ", True), ("MI", True),
    ("copd", False),  # lower case: maybe a word
    ("Cough", False), ("AbC", False), ("Ab", False),
    ("M", False),  # one letter
    ("ABCDEFG", False),  # over six characters
    ("2DM", False),  # starts with a digit
    ("A1", False),  # one capital
    ("DVT NOS", False), ("high blood pressure", False), ("", False),
])
def test_looks_like_abbreviation(text, expected):
    assert looks_like_abbreviation(text) is expected
