"""Vectors files on the command line: ``embed --out`` and back, coverage in every command, stand-in queries."""

from __future__ import annotations

import json

import numpy as np
import pytest

from bioviz.cli import main
from bioviz.models.vectors_export import write_vectors
from bioviz.models.vectors_file import open_vectors
from bioviz.ontology import LevelSpec


def run_cli(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def _values(results: list[dict], spec: str) -> dict:
    return {(r["task"], key): value for r in results if r["model_spec"] == spec
            for key, value in r["metrics"].items()}


def test_round_trip_embed_out_then_eval_gives_the_model_s_numbers(capsys, data_dir, tmp_home, tmp_path):
    out = tmp_path / "v.parquet"
    code, text, err = run_cli(capsys, "embed", data_dir / "mini.obo", "--model", "minilm", "--out", out,
                              "--quiet", "--json")
    assert code == 0, err
    assert json.loads(text)["out"] == [str(out), str(tmp_path / "v.json")]
    assert json.loads((tmp_path / "v.json").read_text())["name"] == "minilm vectors"
    code, text, err = run_cli(capsys, "eval", "--source", data_dir / "mini.obo", "--model", "minilm", "--model", out,
                              "--n-boot", "20", "--quiet", "--json")
    assert code == 0, err
    result = json.loads(text)
    assert result["coverage"] == ["minilm vectors: all 11 names have a vector"]
    minilm, file = _values(result["results"], "minilm"), _values(result["results"], str(out))
    assert minilm and minilm.keys() == file.keys()
    for key, value in minilm.items():
        assert file[key] == pytest.approx(value, abs=1e-6), key


def test_the_projector_pair_written_by_embed_reads_back(capsys, data_dir, tmp_home, tmp_path):
    out = tmp_path / "mini_vectors.tsv"
    code, text, err = run_cli(capsys, "embed", data_dir / "mini.obo", "--model", "minilm", "--out", out,
                              "--quiet", "--json")
    assert code == 0, err
    assert (tmp_path / "mini_metadata.tsv").is_file()
    file = open_vectors(out)
    code, text, _ = run_cli(capsys, "embed", data_dir / "mini.obo", "--model", out, "--quiet", "--json")
    assert code == 0 and json.loads(text)["names"] == 11 and file.dim == 384


@pytest.fixture
def partial_file(data_dir, tmp_home, tmp_path):
    """Random vectors for every name of mini.obo but the level's first and sixth (about 10 % missing)."""
    ontology = LevelSpec(str(data_dir / "mini.obo")).ontology()
    level = LevelSpec(str(data_dir / "mini.obo")).load(ontology).names
    names = [n for n in dict.fromkeys([*level, *(n for c in ontology.concepts.values() for n in c.names)])
             if n not in (level[0], level[5])]
    path = tmp_path / "partial.npz"
    write_vectors(names, np.random.default_rng(0).normal(size=(len(names), 8)), path)
    return path


LINE = "partial: 9 of 11 names; 2 without a vector are left out"


@pytest.mark.parametrize("command", [
    ["embed", "{mini}", "--quiet"],
    ["project", "{mini}", "--method", "pca", "--quiet"],
    ["neighbours", "heart attack", "--source", "{mini}", "--no-expand", "--quiet"],
    ["eval", "--source", "{mini}", "--task", "ranking", "--n-boot", "10", "--quiet"],
])
def test_every_command_says_the_coverage(command, capsys, data_dir, partial_file):
    argv = [a.replace("{mini}", str(data_dir / "mini.obo")) for a in command]
    code, text, err = run_cli(capsys, *argv, "--model", partial_file, "--json")
    assert code == 0, err
    assert json.loads(text)["coverage"] == [LINE]


def test_a_query_the_file_lacks_is_answered_by_its_nearest_name_or_refused(capsys, data_dir, partial_file):
    mini = data_dir / "mini.obo"
    code, text, err = run_cli(capsys, "neighbours", "heart", "--source", mini, "--model", partial_file,
                              "--no-expand", "--quiet", "--json")
    assert code == 0, err
    assert json.loads(text)["query_stand_in"] == [
        "'heart' is not in partial: answered from its nearest name 'heart attack' (lexical ranking)"]
    code, _, err = run_cli(capsys, "neighbours", "qqqq", "--source", mini, "--model", partial_file, "--no-expand",
                           "--quiet")
    assert code == 2 and err.count("\n") == 1 and "'qqqq' is not in partial" in err


def test_out_in_another_format_is_refused_before_encoding(capsys, data_dir, tmp_home, tmp_path):
    code, _, err = run_cli(capsys, "embed", data_dir / "mini.obo", "--model", "minilm", "--out", tmp_path / "v.csv")
    assert code == 2 and "write vectors as .parquet, .npz, .tsv" in err
