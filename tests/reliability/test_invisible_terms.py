"""Invisible characters in terms to code are taken out; a term made only of them is skipped and counted (issue 25, item 7).

NUL bytes, right-to-left overrides and zero-width characters show nothing (or reorder what is
shown): a term holding them was coded and exported as it was, and a term made only of them got
a code. Code terms and ``python -m bioviz code`` now code the visible term and say how many
terms were nothing but invisible characters.
"""

from __future__ import annotations

import json
import os
import unicodedata

import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from bioviz.cli import main
from bioviz.errors import BiovizError
from bioviz.models.runs import check_run_name
from bioviz.search.term_coding import terms_from_column, terms_from_text
from bioviz.text_clean import clean_texts
from tests.pages.routed_app import app_on

NUL, RLO, ZWSP, ZWJ, BOM = "\x00", "\u202e", "\u200b", "\u200d", "\ufeff"
PASTED = f"heart{ZWSP} attack\nasth{NUL}ma\n{RLO}{ZWSP}{ZWJ}\n{NUL}\nlung {RLO}infect\n{BOM}\n"


def visible(text: str) -> bool:
    return not any(unicodedata.category(c) in ("Cc", "Cf") for c in text)


def test_terms_lose_invisible_characters_and_invisible_only_terms_are_dropped():
    assert terms_from_text(PASTED) == ["heart attack", "asthma", "lung infect"]
    assert clean_texts(PASTED.splitlines()).dropped == 3
    frame = pd.DataFrame({"term": [f"asthma{ZWSP}", "asthma", f"{RLO}", "wheeze"]})
    assert terms_from_column(frame, "term") == ["asthma", "wheeze"]  # the same visible term once


def test_a_list_of_only_invisible_terms_is_no_terms():
    with pytest.raises(BiovizError, match="no terms to code"):
        terms_from_text(f"{NUL}\n{ZWSP}{RLO}\n")


@given(st.lists(st.text(st.characters(blacklist_categories=("Cs",)), max_size=12), max_size=8))
def test_no_term_keeps_a_control_or_format_character(lines):
    try:
        terms = terms_from_text("\n".join(lines))
    except BiovizError:
        return
    assert all(term and visible(term) for term in terms)


def test_run_names_still_refuse_them():
    for bad in (f"my{RLO}run", f"run{NUL}", f"a{ZWSP}b"):
        with pytest.raises(BiovizError, match="one line of plain text"):
            check_run_name(bad)
    assert check_run_name("  my run ") == "my run"


@pytest.fixture
def home(shared_home, monkeypatch):
    monkeypatch.setenv("BIOVIZ_HOME", str(shared_home))  # char-tfidf fitted once per session
    return shared_home


def test_bioviz_code_counts_the_skipped_terms_and_exports_visible_ones(capsys, home, data_dir, tmp_path):
    terms = tmp_path / "terms.txt"
    terms.write_text(PASTED, encoding="utf-8")
    out = tmp_path / "coded.csv"
    code = main(["code", str(terms), "--source", str(data_dir / "mini.obo"), "--depth", "1", "--model",
                 "char-tfidf", "-k", "2", "--out", str(out), "--quiet", "--json"])
    assert code == 0, capsys.readouterr().err
    result = json.loads(capsys.readouterr().out)
    assert result["terms"] == 3 and result["dropped_invisible"] == 3
    coded = pd.read_csv(out, keep_default_na=False)
    assert list(dict.fromkeys(coded["term"])) == ["heart attack", "asthma", "lung infect"]
    assert all(visible(cell) for cell in coded.astype(str).to_numpy().ravel())
    main(["code", str(terms), "--source", str(data_dir / "mini.obo"), "--depth", "1", "--model", "char-tfidf",
          "-k", "1", "--out", str(out), "--quiet"])
    assert "dropped_invisible: 3" in capsys.readouterr().out.splitlines()  # the summary line


def test_the_code_terms_page_says_how_many_were_skipped(home, data_dir, monkeypatch):
    monkeypatch.setenv("BIOVIZ_DATA_DIRS", os.fspath(data_dir))
    at = app_on("app_pages/7_Code_terms.py", {"source": str(data_dir / "mini.obo"), "depth": "1",
                                              "model_a": "char-tfidf", "two": "0"}, timeout=240).run()
    at.text_area(key="ct_text").set_value(PASTED)
    next(b for b in at.button if b.label == "Code the terms").click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert list(dict.fromkeys(at.dataframe[0].value["Term"])) == ["heart attack", "asthma", "lung infect"]
    assert any("3 term(s) made only of invisible characters" in info.value for info in at.info)
