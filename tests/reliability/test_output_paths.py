"""Output paths are checked before the work and named in every failure (issue 25, item 6).

``--save-pairs`` onto a folder or into ``/proc/self/`` was a traceback after every pair was
built, and a missing parent folder was created silently; ``bioviz code --out DIR`` failed only
after every term was coded, naming its temporary file. Each is now one line naming the user's
path, before the work; a failure of the final write names the user's path too.
"""

from __future__ import annotations

import errno
import os

import pytest

from bioviz.cli import main as bioviz_main
from bioviz.errors import BiovizError
from bioviz.output_paths import check_output_dir, check_output_file
from trainer.cli import main as trainer_main

BAD_TARGETS = {
    # name: (a function of tmp_path giving the path, what the message says)
    "a folder": (lambda tmp: tmp, "is a folder"),
    "a missing folder": (lambda tmp: tmp / "typo" / "out.file", "no such folder"),
    "a file as folder": (lambda tmp: tmp / "plain.txt" / "out.file", "is not a folder"),
    "/proc/self": (lambda tmp: "/proc/self/out.file", "cannot write in /proc/self"),
    # A pipe made here, never a real device: the unfixed writer renamed its file over the target.
    "a pipe": (lambda tmp: tmp / "pipe", "not a regular file"),
}


def _target(tmp_path, name):
    (tmp_path / "plain.txt").write_text("x")
    os.mkfifo(tmp_path / "pipe")
    make, reason = BAD_TARGETS[name]
    return str(make(tmp_path)), reason


def _one_line(err: str, path: str) -> str:
    line = err.strip()
    assert line.startswith("error: ") and "\n" not in line and path in line and ".tmp" not in line, err
    return line


@pytest.mark.parametrize("name", BAD_TARGETS)
def test_check_output_file_refuses_in_one_line(name, tmp_path):
    path, reason = _target(tmp_path, name)
    with pytest.raises(BiovizError, match=reason) as caught:
        check_output_file(path, "--x")
    assert path in str(caught.value) and "\n" not in str(caught.value)
    assert not (tmp_path / "typo").exists() and sorted(p.name for p in tmp_path.iterdir()) == ["pipe", "plain.txt"]


def test_check_output_file_and_dir_accept_a_new_or_replaced_file(tmp_path):
    (tmp_path / "old.csv").write_text("a")
    assert check_output_file(tmp_path / "old.csv") == tmp_path / "old.csv"
    assert check_output_file(tmp_path / "new.csv") == tmp_path / "new.csv"
    assert check_output_dir(tmp_path / "run") == tmp_path / "run"
    with pytest.raises(BiovizError, match="no such folder"):
        check_output_dir(tmp_path / "typo" / "run")
    with pytest.raises(BiovizError, match="is a file"):
        check_output_dir(tmp_path / "old.csv")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["old.csv"]  # the probe leaves nothing


@pytest.mark.parametrize("name", BAD_TARGETS)
def test_save_pairs_refuses_a_bad_target_before_building_pairs(name, data_dir, tmp_home, tmp_path, capsys):
    path, reason = _target(tmp_path, name)
    assert trainer_main(["pretrain", "--sources", str(data_dir / "mini.obo"), "--objectives", "synonyms",
                         "--save-pairs", path]) == 2
    err = capsys.readouterr().err
    assert "pairs:" not in err and reason in _one_line(err, path)
    assert not (tmp_path / "typo").exists()


def test_pretrain_out_in_a_missing_folder_is_refused(data_dir, tmp_home, tmp_path, capsys):
    out = tmp_path / "typo" / "pretrained"
    assert trainer_main(["pretrain", "--sources", str(data_dir / "mini.obo"), "--objectives", "synonyms",
                         "--out", str(out)]) == 2
    assert "no such folder" in _one_line(capsys.readouterr().err, str(out))
    assert not (tmp_path / "typo").exists()


def test_train_progress_file_in_a_missing_folder_is_refused(data_dir, tmp_home, tmp_path, capsys):
    progress = tmp_path / "typo" / "progress.jsonl"
    assert trainer_main(["train", "--source", str(data_dir / "trainer_tiny.tsv"), "--depth", "1", "--shots", "3", "--out",
                         str(tmp_path / "run"), "--progress-file", str(progress)]) == 2
    assert "no such folder" in _one_line(capsys.readouterr().err, str(progress))
    assert not (tmp_path / "typo").exists() and not (tmp_path / "run").exists()


def test_a_failing_final_pair_file_write_names_the_users_path(data_dir, tmp_home, tmp_path, capsys, monkeypatch):
    from trainer.pretrain import pairs_file

    def disk_full(target, data):
        raise OSError(errno.ENOSPC, "No space left on device", f"{target}.abc.tmp")

    monkeypatch.setattr(pairs_file, "write_bytes_atomic", disk_full)
    path = str(tmp_path / "all.pairs.json.gz")
    assert trainer_main(["pretrain", "--sources", str(data_dir / "mini.obo"), "--objectives", "synonyms",
                         "--save-pairs", path]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert "No space left on device" in _one_line(err, path)


@pytest.fixture
def terms(tmp_path, shared_home, monkeypatch):
    monkeypatch.setenv("BIOVIZ_HOME", str(shared_home))  # char-tfidf fitted once per session
    path = tmp_path / "terms.txt"
    path.write_text("heart attack\nasthma\n", encoding="utf-8")
    return path


def _code(data_dir, terms, out):
    return bioviz_main(["code", str(terms), "--source", str(data_dir / "mini.obo"), "--model", "char-tfidf",
                        "--quiet", "--out", out])


@pytest.mark.parametrize("name", BAD_TARGETS)
def test_code_out_refuses_a_bad_target_before_coding(name, data_dir, terms, tmp_path, capsys, monkeypatch):
    from bioviz.cli import code

    def never(*args, **kwargs):
        raise AssertionError("coded before the output path was checked")

    monkeypatch.setattr(code, "code_term_list", never)
    path, reason = _target(tmp_path, name)
    assert _code(data_dir, terms, path) == 2
    assert reason in _one_line(capsys.readouterr().err, path)


def test_a_failing_final_csv_write_names_the_users_path(data_dir, terms, tmp_path, capsys, monkeypatch):
    from bioviz.cli import code

    def disk_full(target, text):
        raise OSError(errno.ENOSPC, "No space left on device", f"{target}.abc.tmp")

    monkeypatch.setattr(code, "write_text_atomic", disk_full)
    path = str(tmp_path / "coded.csv")
    assert _code(data_dir, terms, path) == 2
    assert "No space left on device" in _one_line(capsys.readouterr().err, path)
