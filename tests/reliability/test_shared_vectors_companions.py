"""Issue 41 finding 3: every file of a shared vectors file lies inside the data folders.

A Projector pair's metadata (``x_metadata.tsv``), or any vectors file's model card
(``<stem>.json``), that is a symlink out of the data folder is refused with the one path
refusal, as the vectors file itself would be; companions that stay inside are followed.
"""

from __future__ import annotations

import pytest

from bioviz.models.model_spec import ModelSpec
from bioviz.server_paths import UnsharedPathError, refusal
from test_app_support import share


@pytest.fixture
def folders(tmp_path, monkeypatch):
    """A shared ``data`` folder with a Projector pair, beside an unshared ``private`` one."""
    home, data, private = tmp_path / "home", tmp_path / "data", tmp_path / "private"
    for folder in (home, data, private):
        folder.mkdir()
    (data / "x_vectors.tsv").write_text("1\t0\n0\t1\n")
    (data / "x_metadata.tsv").write_text("heart\nlung\n")
    (private / "secret.tsv").write_text("root:x:0:0\nsecret line\n")
    (private / "card.json").write_text('{"name": "secret"}')
    monkeypatch.setenv("BIOVIZ_HOME", str(home))
    share(monkeypatch, data)
    return data, private


def test_a_pair_inside_the_data_folder_is_shared(folders):
    data, _ = folders
    assert ModelSpec.shared(str(data / "x_vectors.tsv")).kind == "vectors"


@pytest.mark.parametrize("companion, target", [("x_metadata.tsv", "secret.tsv"), ("x_vectors.json", "card.json")])
def test_a_companion_symlinked_out_of_the_data_folder_is_refused(folders, companion, target):
    data, private = folders
    (data / companion).unlink(missing_ok=True)
    (data / companion).symlink_to(private / target)
    text = str(data / "x_vectors.tsv")
    with pytest.raises(UnsharedPathError) as caught:
        ModelSpec.shared(text)
    assert str(caught.value) == str(refusal(text))


def test_a_card_symlinked_out_of_an_npz_folder_is_refused(folders):
    data, private = folders
    (data / "y.npz").write_bytes(b"")  # parsing reads no rows
    (data / "y.json").symlink_to(private / "card.json")
    with pytest.raises(UnsharedPathError):
        ModelSpec.shared("y.npz")


def test_a_companion_symlinked_inside_the_data_folder_is_followed(folders):
    data, _ = folders
    (data / "names.tsv").write_text("heart\nlung\n")
    (data / "x_metadata.tsv").unlink()
    (data / "x_metadata.tsv").symlink_to(data / "names.tsv")
    assert ModelSpec.shared(str(data / "x_vectors.tsv")).kind == "vectors"
