"""``python -m bioviz sources`` and ``levels``: JSON contract and exit codes."""

import json
import subprocess
import sys

import pytest

from bioviz.cli import main


def run_cli(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_sources_lists_bundled_and_path_kinds(capsys):
    code, out, _ = run_cli(capsys, "sources", "--json")
    names = [s["name"] for s in json.loads(out)["sources"]]
    assert code == 0 and {"icd10", "icd10cm", "hpo"} <= set(names)


def test_levels_json_has_the_contract_keys(capsys, data_dir, tmp_home):
    code, out, _ = run_cli(capsys, "levels", str(data_dir / "mini.obo"), "--depth", "1", "--json", "--shots", "2")
    result = json.loads(out)
    assert code == 0
    for key in ("source", "root", "depth", "classes", "names", "hypernym_names", "ambiguous_dropped"):
        assert key in result
    assert set(result["names_per_class"]) == {"min", "max", "mean", "stdev"}
    assert result["classes"] == 2 and result["split"]["train"] == 4


@pytest.mark.parametrize(
    "argv, reason",
    [
        (["levels", "{obo}", "--depth", "9"], "too deep"),
        (["levels", "{obo}", "--root", "MINI:404", "--depth", "1"], "unknown concept id"),
        (["levels", "{bad}", "--depth", "1"], "malformed OBO"),
    ],
)
def test_bad_input_exits_2_with_one_line(capsys, data_dir, tmp_home, argv, reason):
    argv = [a.format(obo=data_dir / "mini.obo", bad=data_dir / "malformed.obo") for a in argv]
    code, _, err = run_cli(capsys, *argv)
    assert code == 2
    assert reason in err and err.count("\n") == 1 and "Traceback" not in err


def test_bad_option_value_exits_2(capsys, data_dir):
    with pytest.raises(SystemExit) as exit_info:
        main(["levels", str(data_dir / "mini.obo"), "--depth", "x"])
    assert exit_info.value.code == 2
    assert "invalid int value" in capsys.readouterr().err


def test_module_entry_point_icd10_chapters(shared_home):
    result = subprocess.run(
        [sys.executable, "-m", "bioviz", "levels", "icd10", "--depth", "1", "--json"],
        capture_output=True, text=True, env={"BIOVIZ_HOME": str(shared_home), "PATH": ""}, check=True,
    )
    assert json.loads(result.stdout)["classes"] == 22


def test_umls_hierarchy_flag_chooses_the_relations(capsys, umls_isa_only, tmp_home):
    meta = str(umls_isa_only)
    code, out, _ = run_cli(capsys, "levels", meta, "--sab", "SNOMEDCT_US", "--semantic-group", "DISO",
                           "--hierarchy", "isa", "--depth", "1", "--json")
    assert code == 0
    assert json.loads(out)["classes"] == 2 and json.loads(out)["names"] == 20
    # PAR/CHD (the default, and given explicitly) finds no edges in this release
    for argv in ([], ["--hierarchy", "parchd"]):
        code, _, err = run_cli(capsys, "levels", meta, "--depth", "1", *argv)
        assert code == 2 and "no IS-A edges" in err and err.count("\n") == 1


def test_umls_options_on_the_fixture_release(capsys, data_dir, tmp_home):
    meta = str(data_dir / "umls/META")
    code, out, _ = run_cli(capsys, "levels", meta, "--semantic-group", "DISO", "--hierarchy", "parchd",
                           "--depth", "1", "--json")
    disorders = json.loads(out)
    assert code == 0 and disorders["root"] == "UMLS:ROOT" and disorders["source"].startswith("umls-SNOMEDCT_US-DISO")
    _, out, _ = run_cli(capsys, "levels", meta, "--depth", "1", "--json")
    assert json.loads(out)["root"] == "C2720507", "without a group, the SNOMED CT root concept is the root"
    with pytest.raises(SystemExit) as exit_info:
        main(["levels", meta, "--depth", "1", "--hierarchy", "rela"])
    assert exit_info.value.code == 2 and "invalid choice" in capsys.readouterr().err
