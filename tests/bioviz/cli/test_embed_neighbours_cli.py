"""``python -m bioviz embed`` and ``neighbours``: JSON contract, cache hits, exit codes."""

import json

from bioviz.cli import main


def run_cli(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_embed_reports_throughput_and_cache_hits_on_the_second_run(capsys, data_dir, tmp_home):
    argv = ["embed", str(data_dir / "mini.obo"), "--model", "minilm", "--depth", "1", "--json"]
    code, out, _ = run_cli(capsys, *argv)
    first = json.loads(out)
    assert code == 0
    for key in ("names", "seconds", "names_per_second", "cache_hits", "model", "dim"):
        assert key in first
    assert first["cache_hits"] == 0 and first["names"] == first["encoded"] > 0
    code, out, _ = run_cli(capsys, *argv)
    second = json.loads(out)
    assert second["cache_hits"] == second["names"] == first["names"] and second["encoded"] == 0


def test_neighbours_of_an_ontology_name_marks_class_and_concept(capsys, data_dir, tmp_home):
    code, out, _ = run_cli(capsys, "neighbours", "heart attack", "--source", str(data_dir / "mini.obo"),
                           "--model", "minilm", "-k", "3", "--compare", "minilm", "--quiet", "--json")
    result = json.loads(out)
    assert code == 0 and result["query_in_ontology"] and result["query_class"] == "MINI:0000010"
    rows = result["neighbours"]
    assert [r["rank"] for r in rows] == [1, 2, 3]
    assert "heart attack" not in [r["name"] for r in rows]  # the query itself is left out
    for key in ("name", "concept_id", "class_id", "class_label", "score", "same_class", "same_concept"):
        assert key in rows[0]
    assert any(r["same_concept"] for r in rows if r["concept_id"] == "MINI:0000011")
    assert all(r["rank_change"] == 0 for r in rows)  # compared with itself


def test_free_text_query_and_class_restriction(capsys, data_dir, tmp_home):
    code, out, _ = run_cli(capsys, "neighbours", "wheezing in children", "--source", str(data_dir / "mini.obo"),
                           "--model", "minilm", "-k", "10", "--restrict-class", "MINI:0000020", "--json")
    result = json.loads(out)
    assert code == 0 and not result["query_in_ontology"] and result["query_class"] is None
    assert result["neighbours"] and {r["class_id"] for r in result["neighbours"]} == {"MINI:0000020"}


def test_unknown_model_exits_2_with_one_line(capsys, data_dir, tmp_home):
    code, _, err = run_cli(capsys, "neighbours", "fever", "--source", str(data_dir / "mini.obo"),
                           "--model", "nobody/no-model", "--json")
    assert code == 2 and "nobody/no-model" in err and err.count("\n") == 1


def test_bad_k_exits_2(capsys, data_dir, tmp_home):
    code, _, err = run_cli(capsys, "neighbours", "fever", "--source", str(data_dir / "mini.obo"), "-k", "0")
    assert code == 2 and "-k must be at least 1" in err


def test_ranking_among_hypernyms_and_training_names(capsys, data_dir, tmp_home):
    code, out, _ = run_cli(capsys, "neighbours", "heart attack", "--source", str(data_dir / "mini.obo"),
                           "--model", "minilm", "--among", "hypernyms", "-k", "2", "--json")
    result = json.loads(out)
    assert code == 0 and result["among"] == "hypernyms"
    names = {r["name"]: r for r in result["neighbours"]}
    assert set(names) <= {"heart disease", "cardiac disease", "cardiopathy", "lung disease", "pulmonary disease"}
    assert all(r["same_class"] == (r["class_id"] == "MINI:0000010") for r in result["neighbours"])
    code, out, _ = run_cli(capsys, "neighbours", "heart attack", "--source", str(data_dir / "mini.obo"),
                           "--model", "minilm", "--among", "train", "-k", "50", "--json")
    result = json.loads(out)
    assert code == 0 and len(result["neighbours"]) <= result["candidates"] < result["names"]


def test_a_concept_id_query_ranks_the_concepts_name(capsys, data_dir, tmp_home):
    code, out, _ = run_cli(capsys, "neighbours", "mini:0000011", "--source", str(data_dir / "mini.obo"),
                           "--model", "minilm", "-k", "3", "--quiet", "--json")
    result = json.loads(out)
    assert code == 0 and result["query"] == "mini:0000011"
    assert result["ranked_text"] == "myocardial infarction" and result["resolved_by"] == "id"
    assert result["query_class"] == "MINI:0000010" and result["query_concepts"][0] == "MINI:0000011"
    assert "myocardial infarction" not in [r["name"] for r in result["neighbours"]]
    assert any(r["same_concept"] for r in result["neighbours"])  # "heart attack", its synonym
