"""``python -m bioviz eval``: JSON contract, several models side by side, exit codes."""

from __future__ import annotations

import json

import pytest

from bioviz.cli import main


def run_cli(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_two_models_on_a_source_and_a_benchmark_file(capsys, data_dir, tmp_home):
    import torch
    torch.set_num_threads(1)
    code, out, err = run_cli(
        capsys, "eval", "--model", "minilm", "--model", "minilm",
        "--benchmark", str(data_dir / "benchmarks" / "pairs.csv"),
        "--source", str(data_dir / "mini.obo"), "--depth", "1", "--shots", "2",
        "--task", "ranking", "--task", "hypernym", "--n-boot", "50", "--json",
    )
    assert code == 0, err
    result = json.loads(out)
    assert [(r["task"], r["model"]) for r in result["results"]] == [
        ("pairs.csv", "minilm"), ("pairs.csv", "minilm"),
        ("ranking", "minilm"), ("hypernym", "minilm"), ("ranking", "minilm"), ("hypernym", "minilm")]
    bench = result["results"][0]
    assert bench["sizes"] == {"pairs": 3, "covered": 3} and "spearman" in bench["ci"]
    ranking = result["results"][2]
    assert ranking["sizes"]["queries"] == result["split"]["test"] == 2
    assert result["split"]["shots"] == 2 and result["view"]["classes"] == 2
    assert result["results"][4]["cached"]  # the same model again: served from the result cache
    assert result["models"][0]["label"] == "minilm"
    assert "evaluating" in err  # progress on stderr, stdout stays one JSON object


def test_text_output_is_a_table(capsys, data_dir, tmp_home, fake_eval_models):
    code, out, _ = run_cli(capsys, "eval", "--model", "x", "--benchmark", "mayosrs", "--n-boot", "20", "--quiet")
    assert code == 0
    assert "model=tri-x  task=MayoSRS  metric=Spearman" in out and "n=101" in out


@pytest.mark.parametrize("argv, reason", [
    (["eval", "--model", "minilm"], "nothing to evaluate"),
    (["eval", "--model", "minilm", "--benchmark", "nope"], "unknown benchmark 'nope'"),
    (["eval", "--model", "minilm", "--benchmark", "{bad}"], "bad_score.tsv line 2: the score (third column) is not a number"),
    (["eval", "--model", "minilm", "--source", "{obo}", "--depth", "1", "--task", "nope"], "unknown task 'nope'"),
    (["eval", "--model", "/no/such/model", "--benchmark", "mayosrs"], "not found"),
    (["eval", "--model", "minilm", "--source", "{obo}", "--depth", "1", "--cross-level", "a,b"], "--cross-level"),
])
def test_bad_input_exits_2_with_one_line(capsys, data_dir, tmp_home, request, argv, reason):
    if "/no/such/model" not in argv:
        request.getfixturevalue("fake_eval_models")
    argv = [a.format(obo=data_dir / "mini.obo", bad=data_dir / "benchmarks" / "bad_score.tsv") for a in argv]
    code, _, err = run_cli(capsys, *argv)
    assert code == 2
    assert reason in err and err.count("\n") == 1 and "Traceback" not in err


def test_runs_on_different_splits_need_an_explicit_split(capsys, data_dir, tmp_home, tmp_path, fake_eval_models):
    runs = []
    for seed in (0, 1):
        run = tmp_path / f"run{seed}"
        run.mkdir()
        (run / "run.json").write_text(json.dumps({"run_id": run.name, "config": {
            "source": str(data_dir / "mini.obo"), "depth": 1, "shots": 2, "seed": seed, "test_per_class": 1}}))
        (run / "config.json").write_text("{}")  # parses as a model (the fake models load no weights)
        runs += ["--model", str(run)]
    base = ["eval", *runs, "--source", str(data_dir / "mini.obo"), "--depth", "1", "--task", "ranking", "--json"]
    code, _, err = run_cli(capsys, *base)
    assert code == 2 and "different splits" in err
    code, out, _ = run_cli(capsys, *base, "--seed", "0", "--shots", "2")
    assert code == 0
    warnings = json.loads(out)["warnings"]
    assert len(warnings) == 1 and "run1 was trained on another split" in warnings[0]
    (tmp_path / "run1" / "split.json").write_text(json.dumps({"train": ["asthma"], "validation": []}))
    code, out, _ = run_cli(capsys, *base, "--seed", "0", "--shots", "2")
    assert code == 0 and json.loads(out)["warnings"] == []  # its training names leave the queries


def test_synonym_sets_with_zero_shot_concepts(capsys, data_dir, tmp_home, fake_eval_models):
    code, out, err = run_cli(capsys, "eval", "--model", "a", "--source", str(data_dir / "mini.obo"), "--synonyms",
                             "--zero-shot", "0.3", "--task", "synonym", "--n-boot", "20", "--json", "--quiet")
    assert code == 0, err
    result = json.loads(out)
    assert result["view"]["mode"] == "synonyms" and result["view"]["classes"] == 10  # one class per concept
    assert result["split"]["zero_shot_classes"] == 3 and result["split"]["zero_shot"] == 5  # 0.3 of 10 concepts
    [synonym] = result["results"]
    assert {k.split(".")[0] for k in synonym["metrics"]} == {"train", "test", "zero_shot"}
    assert synonym["sizes"]["zero_shot.references"] == 5  # zero-shot names rank each other
    assert synonym["sizes"]["test.references"] == result["split"]["train"]  # test names map onto training names


def test_baseline_gives_paired_differences_and_latex_is_written(capsys, data_dir, tmp_home, tmp_path,
                                                                 fake_eval_models):
    tex = tmp_path / "table.tex"
    code, out, err = run_cli(capsys, "eval", "--model", "a", "--model", "b", "--benchmark", "mayosrs",
                             "--source", str(data_dir / "mini.obo"), "--depth", "1", "--shots", "2",
                             "--task", "ranking", "--task", "hierarchy-auc", "--n-boot", "30",
                             "--baseline", "a", "--latex", str(tex), "--json", "--quiet")
    assert code == 0, err
    result = json.loads(out)
    differences = result["differences"]
    assert {(d["model"], d["baseline"]) for d in differences} == {("tri-b", "tri-a")}
    assert {(d["task"], d["metric"]) for d in differences} >= {("MayoSRS", "spearman"), ("ranking", "map"),
                                                              ("hierarchy-auc", "mean_auc")}
    for d in differences:  # the same trigram encoder under two names: no difference, a zero interval
        assert d["delta"] == 0.0 and d["delta_ci"] == [0.0, 0.0] and d["n"] > 0
    assert all("per_item" not in r for r in result["results"])  # kept out of the JSON
    from bioviz.evaluation.latex import MAX_COLUMNS, numeric_columns
    text = tex.read_text()
    assert result["latex"] == str(tex) and r"\toprule" in text
    assert 0 < max(numeric_columns(text)) <= MAX_COLUMNS
    code, _, err = run_cli(capsys, "eval", "--model", "a", "--benchmark", "mayosrs", "--n-boot", "5",
                           "--baseline", "zzz", "--quiet")
    assert code == 2 and "baseline 'zzz' is not among the evaluated models" in err
