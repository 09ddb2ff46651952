"""Uploads keep the user's file name (for titles and pickers) without letting it choose where the file goes."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bioviz.uploads import _encoded_stem, original_name, store_upload, uploads_dir


@pytest.mark.parametrize("name", ["My HPO (v2).obo", "../../etc/passwd.tsv", ".hidden.csv", "terms ä→β.tsv",
                                  "C:\\Users\\me\\table.tsv"])
def test_the_users_name_comes_back_and_the_file_stays_in_the_uploads_folder(tmp_home, name):
    path = store_upload(name, b"concept_id\tname\tparent_id\n")
    assert path.parent == uploads_dir() and not path.name.startswith(".")
    assert original_name(path) == name.replace("\\", "/")


@given(st.text(min_size=1, max_size=300).filter(lambda t: not set(t) & set("\0/\\")))
def test_any_name_gives_one_safe_file_name(tmp_home, stem):
    name = f"{stem}.obo"
    path = uploads_dir() / f"{_encoded_stem(name)}-{'0' * 12}.obo"  # as store_upload names it (no disk writes)
    assert path.parent == uploads_dir() and len(path.name.encode()) <= 255 and not path.name.startswith(".")
    shown = original_name(path)
    assert shown.endswith(".obo") and name.strip().startswith(shown[:-4]), "the name, or its beginning when long"


def test_uploads_stored_before_and_other_paths(tmp_home, data_dir):
    old = uploads_dir() / "mini-fe8a7740d3d2.obo"
    old.write_bytes(b"x")
    assert original_name(old) == "mini.obo"
    assert original_name(data_dir / "mini.obo") is None
    assert original_name("evil \x00 name") is None, "a link's hostile text is no upload, and no crash"
