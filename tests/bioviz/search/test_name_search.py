"""Type-ahead name search (bioviz.search.name_search): tiers, codes, normalisation, agreement with a scan."""

import re

import numpy as np
import pytest

from bioviz.search.name_search import NameSearch
from bioviz.ontology import level_view, load_source

NAMES = [
    "Hesitancy of micturition",      # R39.11: ICD-10-CM's name for urinary hesitancy
    "Poor urinary stream",
    "Urinary tract infection",
    "Urinary incontinence",
    "Urine retention",
    "Cystitis",
    "Acute cystitis with hematuria",
    "Bronchitis",
    "Hypereosinophilic syndrome",
    "urinary tract infection",       # a duplicate in another case: kept once, first spelling
]
CODES = ["R39.11", "R39.12", "N39.0", "R32", "R33.9", "N30", "N30.01", "J40", "D72.1", "N39.0"]


@pytest.fixture
def index():
    return NameSearch(NAMES, CODES)


def test_exact_name_then_prefix_matches_shortest_first(index):
    assert len(index) == 9
    assert index.search("urinary tract infection")[0] == "Urinary tract infection"
    # case and spacing do not matter; names with only some of the words come last
    assert index.search("URINARY   t") == ["Urinary tract infection", "Poor urinary stream", "Urinary incontinence"]
    assert index.search("urinary", limit=2) == ["Urinary incontinence", "Urinary tract infection"]


def test_every_typed_word_may_start_any_word_in_any_order(index):
    assert index.search("infect tract") == ["Urinary tract infection"]
    assert index.search("cyst hemat") == ["Acute cystitis with hematuria", "Cystitis"]


def test_substrings_come_after_word_matches(index):
    assert index.search("cyst") == ["Cystitis", "Acute cystitis with hematuria"]
    assert index.search("itis") == ["Cystitis", "Bronchitis", "Acute cystitis with hematuria"]
    assert index.search("ry tract") == ["Urinary tract infection"]  # across a word boundary


def test_partial_word_matches_rank_the_rarer_word_first(index):
    # No name holds both words; "hesitancy" is rarer than "urinary", so its name leads.
    hits = index.search("urinary hesitancy", limit=4)
    assert hits[0] == "Hesitancy of micturition"
    assert set(hits[1:]) <= {"Poor urinary stream", "Urinary tract infection", "Urinary incontinence"}
    assert "Cystitis" not in index.search("urinary hesitancy", limit=20)


def test_a_typed_code_finds_its_names(index):
    assert index.search("r39.11")[0] == "Hesitancy of micturition"
    assert index.concept_of("hesitancy of micturition") == "R39.11"
    assert index.concept_of("free text") is None


def test_nothing_for_empty_text_unknown_text_or_no_room(index):
    assert index.search("") == [] and index.search("   ") == []
    assert index.search("zzz") == []
    assert index.search("urinary", limit=0) == []
    assert NameSearch([]).search("a") == []


def test_misaligned_codes_are_refused():
    with pytest.raises(ValueError, match="2 concept ids for 1 names"):
        NameSearch(["a"], ["X", "Y"])


def test_from_view_covers_the_level_names_and_the_class_names(data_dir, tmp_home):
    view = level_view(load_source(str(data_dir / "mini.obo")), depth=1)
    index = NameSearch.from_view(view)
    assert index.search("heart att", limit=1) == ["heart attack"]
    assert index.concept_of("heart attack") == "MINI:0000011"
    assert index.search("cardiac dis", limit=1) == ["cardiac disease"]  # a hypernym (class) name
    assert index.concept_of("cardiac disease") == "MINI:0000010"


def test_matches_agree_with_a_plain_scan_on_random_names():
    rng = np.random.default_rng(0)
    syllables = ["ab", "ac", "ca", "cab", "ba", "bca", "a", "c"]
    names = [" ".join("".join(rng.choice(syllables, rng.integers(1, 4))) for _ in range(rng.integers(1, 4)))
             for _ in range(500)]
    index = NameSearch(names)
    keys = sorted(set(names))
    for text in ["ab", "ca b", "b a", "cab ab", "bca", "ac ca", "abc"]:
        words = text.split()
        tiers = [
            [k for k in keys if k == text],
            [k for k in keys if k.startswith(text)],
            [k for k in keys if all(any(w.startswith(t) for w in re.findall(r"\w+", k)) for t in words)],
            [k for k in keys if text in k],
        ]
        expected: list[str] = []
        for tier in tiers:
            expected += sorted((k for k in tier if k not in expected), key=lambda k: (len(k), k))
        got = index.search(text, limit=len(keys))
        assert got[:len(expected)] == expected, text
        # The rest are partial word matches: some, not all, typed words start a word.
        for name in got[len(expected):]:
            assert any(w.startswith(t) for w in re.findall(r"\w+", name) for t in words), (text, name)


def test_accents_do_not_matter_either_way():
    search = NameSearch(["Sjögren syndrome", "Ménière disease", "Sjogren-like rash"], ["M35.0", "H81.0", "X1"])
    assert set(search.search("sjog")) == {"Sjogren-like rash", "Sjögren syndrome"}
    assert search.search("meniere") == ["Ménière disease"]
    assert search.search("Ménière") == ["Ménière disease"]
    assert search.concept_of("sjögren syndrome") == "M35.0"
