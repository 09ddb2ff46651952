"""Hostile pair files (issue 25, item 5): each is one ``error:`` line and exit code 2.

``trainer pretrain --pairs FILE`` reads a file built elsewhere. A gzip bomb is refused while
it is decompressed (under an address-space limit smaller than the bomb), deep nesting and
huge or mistyped texts are refused before any pair is trained on, each in one line.
"""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

import pytest

from trainer.cli import main
from trainer.pretrain import pairs_file

ROOT = Path(__file__).resolve().parents[2]
MEMORY_BYTES = 1536 * 2**20  # 1.5 GiB of address space: less than the bomb inflates to
BOMB_MEMBER_BYTES = 64 * 2**20
BOMB_MEMBERS = 24  # 1.5 GiB of spaces (valid JSON whitespace) from about 1.5 MB of gzip

# The reader alone under RLIMIT_AS: importing the training stack (torch) maps more address
# space than the limit, and it is the reader's memory that is in question.
READER = """
import resource, sys
resource.setrlimit(resource.RLIMIT_AS, ({limit}, {limit}))
from bioviz.errors import BiovizError
from trainer.pretrain.pairs_file import load_pairset
try:
    load_pairset(sys.argv[1])
except BiovizError as error:
    sys.stderr.write(f"error: {{error}}\\n")
    sys.exit(2)
"""


def _document(**fields) -> dict:
    return {"format": pairs_file.FORMAT, "version": pairs_file.VERSION, "settings": {}, "available": {},
            "excluded": {}, "overlap_dropped": 0, "train": [], "validation": [], **fields}


def _row(anchor="asthma", positive="asthmatic disease"):
    return [anchor, positive, "synonyms", "hpo", "synonym", ["HP:1"], ["asthma"], None, None]


def _write(path: Path, document) -> Path:
    text = document if isinstance(document, str) else json.dumps(document)
    path.write_bytes(gzip.compress(text.encode("utf-8"), mtime=0))
    return path


def _one_line_refusal(path: Path, tmp_path: Path, capsys) -> str:
    out = tmp_path / "pretrained"
    assert main(["pretrain", "--pairs", str(path), "--device", "cpu", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "\n" not in err, err
    assert not out.exists()
    return err


def test_a_gzip_bomb_is_refused_while_it_inflates_within_an_address_space_limit(tmp_path):
    # Concatenated gzip members are one valid stream: a small file that inflates past the limit.
    member = gzip.compress(b" " * BOMB_MEMBER_BYTES, compresslevel=9, mtime=0)
    head = gzip.compress(json.dumps(_document()).encode()[:-1] + b",", mtime=0)
    bomb = tmp_path / "bomb.pairs.json.gz"
    bomb.write_bytes(head + member * BOMB_MEMBERS + gzip.compress(b'"x": 1}', mtime=0))
    assert bomb.stat().st_size < 4 * 2**20
    result = subprocess.run([sys.executable, "-c", READER.format(limit=MEMORY_BYTES), str(bomb)], cwd=ROOT,
                            capture_output=True, text=True, timeout=120)
    err = result.stderr.strip()
    assert result.returncode == 2, err[-2000:]
    assert err.startswith("error: ") and "\n" not in err and "MiB" in err, err


def test_the_size_cap_leaves_room_for_the_largest_real_pair_file():
    # The full recipe of the three bundled ontologies (323,122 pairs) is 98 MiB of JSON.
    assert pairs_file.MAX_DECOMPRESSED_BYTES >= 4 * 98 * 2**20


@pytest.mark.parametrize("name, document, reason", [
    ("424 bytes of gzip: 400,000 brackets", "[" * 400_000, "nested"),
    ("deep brackets in a record", json.dumps(_document())[:-1] + ', "settings": {"x": ' + "[" * 200 + "]" * 200
     + "}}", "nested"),
    ("deeper than the parser", json.dumps(_document())[:-1] + ', "excluded": {"x": ' + "[" * 5000 + "]" * 5000
     + "}}", "nested"),
    ("a huge anchor", _document(train=[_row(anchor="a" * 200_000), _row()]), "training pair 1"),
    ("a huge name", _document(validation=[[*_row()[:6], ["n" * 200_000], None, None]]), "validation pair 1"),
    ("a number for a text", _document(train=[[*_row()[:1], 7, *_row()[2:]]]), "training pair 1"),
    ("a dict for a row", _document(train=[{"anchor": "a"}]), "training pair 1"),
    ("a string for the pairs", _document(train="asthma"), "not a complete pair file"),
    ("a list for the settings", _document(settings=["a"]), "not a complete pair file"),
])
def test_hostile_pair_files_are_one_line(name, document, reason, tmp_home, tmp_path, capsys):
    err = _one_line_refusal(_write(tmp_path / "hostile.pairs.json.gz", document), tmp_path, capsys)
    assert reason in err, (name, err)


def test_a_huge_text_names_the_limit(tmp_path):
    path = _write(tmp_path / "long.pairs.json.gz", _document(train=[_row(positive="p" * 20_000), _row()]))
    with pytest.raises(pairs_file.BiovizError, match=f"longer than {pairs_file.MAX_TEXT_CHARS:,} characters"):
        pairs_file.load_pairset(path)


def test_a_truncated_stream_is_one_line(tmp_path):
    data = gzip.compress(json.dumps(_document(train=[_row(), _row()])).encode(), mtime=0)
    path = tmp_path / "cut.pairs.json.gz"
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(pairs_file.BiovizError, match="is not a pair file"):
        pairs_file.load_pairset(path)


# The reader with most of its address space already taken, as in `trainer pretrain` (the training
# stack maps much of it): growing the buffer chunk by chunk raised MemoryError (a traceback) before
# the 512 MiB check (issue 32, finding 8).
CROWDED_READER = READER.replace("from bioviz.errors", "ballast = bytearray(800 * 2**20)\nfrom bioviz.errors")


def test_a_gzip_bomb_is_refused_in_one_line_when_the_process_has_little_room_left(tmp_path):
    member = gzip.compress(b" " * BOMB_MEMBER_BYTES, compresslevel=9, mtime=0)
    head = gzip.compress(json.dumps(_document()).encode()[:-1] + b",", mtime=0)
    bomb = tmp_path / "bomb.pairs.json.gz"
    bomb.write_bytes(head + member * 10 + gzip.compress(b'"x": 1}', mtime=0))  # 640 MiB inflated
    result = subprocess.run([sys.executable, "-c", CROWDED_READER.format(limit=MEMORY_BYTES), str(bomb)], cwd=ROOT,
                            capture_output=True, text=True, timeout=120)
    err = result.stderr.strip()
    assert result.returncode == 2, err[-2000:]
    assert err.startswith("error: ") and "\n" not in err and "MiB" in err, err
