"""Pairs built on one machine, trained on another: ``--save-pairs``, ``--pairs``, ``--exclude-names``."""

from __future__ import annotations

import gzip
import json

import pytest

from bioviz.errors import BiovizError
from bioviz.ontology.model import normalise_name
from bioviz.evaluation.overlap import TERMS_FILE
from trainer.cli import main
from trainer.pretrain.config import PretrainConfig, validate
from trainer.pretrain.fit import RESULT_FILE, prepare
from trainer.pretrain.pairs_file import load_pairset, save_pairset, subset
from trainer.pretrain.terms import pair_terms


def _save(data_dir, path, *extra):
    return main(["pretrain", "--sources", str(data_dir / "mini.obo"), "--objectives", "synonyms", "definitions",
                 "hierarchy", "--max-pairs", "all", "--save-pairs", str(path), *extra])


def test_a_saved_pair_file_reads_back_as_the_same_pairs_and_record(data_dir, tmp_path, capsys):
    path = tmp_path / "mini.pairs.json.gz"
    assert _save(data_dir, path, "--exclude-level", f"{data_dir / 'mini.obo'}::1", "--shots", "1") == 0
    summary = json.loads(capsys.readouterr().out)
    config = validate(PretrainConfig(sources=[str(data_dir / "mini.obo")],
                                     objectives=["synonyms", "definitions", "hierarchy"], max_pairs=None,
                                     exclude_levels=[f"{data_dir / 'mini.obo'}::1"], shots=1))
    built = prepare(config)
    pairs, settings = load_pairset(path)
    assert pairs.train == built.train and pairs.validation == built.validation
    assert pairs.excluded == built.excluded and pairs.excluded["levels"][0]["split"]["shots"] == 1
    assert summary["train"] == len(pairs.train) and settings["objectives"] == ["synonyms", "definitions", "hierarchy"]


@pytest.mark.slow
def test_training_on_a_part_of_a_pair_file_needs_no_source(data_dir, tmp_home, tmp_path, capsys):
    path = tmp_path / "mini.pairs.json.gz"
    assert _save(data_dir, path) == 0
    capsys.readouterr()
    out = tmp_path / "pretrained"
    assert main(["pretrain", "--pairs", str(path), "--objectives", "synonyms", "--max-pairs", "all",
                 "--batch-size", "4", "--device", "cpu", "--save-steps", "1000", "--out", str(out), "--json"]) == 0
    result = json.loads((out / RESULT_FILE).read_text())
    assert set(result["pairs"]["objectives"]) == {"synonyms"}
    assert result["config"]["pairs_file"] == str(path)
    trained = [p for p in load_pairset(path)[0].train if p.objective == "synonyms"]
    assert result["pairs"]["train"] == len(trained)
    # the overlap mark's hashes come from the pairs the run trained on, written before pretrain.json
    assert json.loads((out / TERMS_FILE).read_text())["hashes"] == pair_terms(trained)


def test_excluded_names_reach_no_pair(data_dir, tmp_path, capsys):
    everything = tmp_path / "all.pairs.json.gz"
    assert _save(data_dir, everything) == 0
    pairs = load_pairset(everything)[0]
    banned = pairs.train[0].names[0]
    names_file = tmp_path / "queries.txt"
    names_file.write_text(f"{banned.upper()}\n\n", encoding="utf-8")
    kept = tmp_path / "kept.pairs.json.gz"
    assert _save(data_dir, kept, "--exclude-names", str(names_file)) == 0
    left, _ = load_pairset(kept)
    texts = {normalise_name(t) for p in left.train + left.validation for t in (p.anchor, p.positive, *p.names)}
    assert normalise_name(banned) not in texts
    assert left.excluded["total"] > 0 and left.excluded["names"] == [{"names_from": "queries.txt",
                                                                       "held_out_names": 1}]


def test_a_name_listed_by_its_hash_reaches_no_pair_as_if_it_were_written_out(data_dir, tmp_path):
    """``sha256:<hex>`` lines: how recipes/med-minilm-excluded.txt keeps development texts out without showing them."""
    from trainer.pretrain.leakage import name_hash

    everything = tmp_path / "all.pairs.json.gz"
    assert _save(data_dir, everything) == 0
    pairs = load_pairset(everything)[0]
    banned = pairs.train[0].names[0]
    written, hashed = tmp_path / "written.txt", tmp_path / "hashed.txt"
    written.write_text(f"{banned}\n", encoding="utf-8")
    hashed.write_text(f"{name_hash(normalise_name(banned)).upper()}\n", encoding="utf-8")  # case of the hex ignored
    assert banned not in hashed.read_text(encoding="utf-8")
    kept = {}
    for names_file in (written, hashed):
        out = tmp_path / f"{names_file.stem}.pairs.json.gz"
        assert _save(data_dir, out, "--exclude-names", str(names_file)) == 0
        kept[names_file.stem] = load_pairset(out)[0]
    assert kept["hashed"].train == kept["written"].train and kept["hashed"].validation == kept["written"].validation
    assert kept["hashed"].excluded["total"] == kept["written"].excluded["total"] > 0


def _gz(data: bytes) -> bytes:
    # mtime=0: the same bytes in every process, so parallel workers (pytest -n) collect the same test ids
    return gzip.compress(data, mtime=0)


@pytest.mark.parametrize("content, reason", [
    (b"not gzip at all", "is not a pair file"),
    (_gz(b'{"format": "something else"}'), "is not a pair file"),
    (_gz(b'{"format": "bioviz-pretrain-pairs", "version": 99}'), "version 99"),
    (_gz(b'{"format": "bioviz-pretrain-pairs", "version": 1, "train": [["a"]], "validation": []}'),
     "training pair 1: not a pair row"),
    (_gz(b'{"format": "bioviz-pretrain-pairs", "version": 1, "train": []}'), "not a complete pair file"),
    (_gz(b'{"format": "bioviz-pretrain-pairs", "version": 1, "train": [], "validation": [], '
                   b'"available": [1, 2]}'), "not a complete pair file"),
    (_gz(b'{"format": "bioviz-pretrain-pairs", "version": 1, "train": [], "validation": [], '
                   b'"overlap_dropped": "many"}'), "not a complete pair file"),
])
def test_a_damaged_or_foreign_pair_file_is_one_line_and_trains_nothing(content, reason, tmp_home, tmp_path, capsys):
    path = tmp_path / "bad.pairs.json.gz"
    path.write_bytes(content)
    out = tmp_path / "pretrained"
    assert main(["pretrain", "--pairs", str(path), "--device", "cpu", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and reason in err and "\n" not in err
    assert not out.exists()


def test_pair_file_refusals(data_dir, tmp_home, tmp_path, capsys):
    path = tmp_path / "mini.pairs.json.gz"
    assert _save(data_dir, path) == 0
    capsys.readouterr()
    refusals = [
        (["--pairs", str(path), "--exclude-level", "hpo::1"], "do not apply to --pairs"),
        (["--pairs", str(path), "--save-pairs", str(tmp_path / "b.gz")], "not both"),
        (["--pairs", str(path), "--sources", "hpo", "--out", str(tmp_path / "d")], "holds no source hpo"),
        (["--pairs", str(path)], "no --out"),
        (["--sources", "hpo", "--objectives", "synonyms", "--exclude-names", str(tmp_path / "none.txt"),
          "--save-pairs", str(tmp_path / "c.gz")], "no such file"),
    ]
    for extra, reason in refusals:
        assert main(["pretrain", *extra]) == 2, extra
        err = capsys.readouterr().err.strip()
        assert reason in err and "\n" not in err, (extra, err)
    assert not any((tmp_path / name).exists() for name in ("b.gz", "c.gz", "d"))


def test_subset_keeps_validation_of_the_same_part(data_dir, tmp_path, capsys):
    path = tmp_path / "mini.pairs.json.gz"
    assert _save(data_dir, path) == 0
    pairs = load_pairset(path)[0]
    part = subset(pairs, ["hierarchy"], None)
    assert part.train and {p.objective for p in part.train + part.validation} == {"hierarchy"}
    with pytest.raises(BiovizError, match="holds no objective"):
        subset(subset(pairs, ["synonyms"], None), ["hierarchy"], None)
    # a round trip through the file is lossless
    again = tmp_path / "again.pairs.json.gz"
    save_pairset(part, again, {})
    assert load_pairset(again)[0].train == part.train
