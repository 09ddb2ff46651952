"""A run's readable name labels its evaluation results, tables and LaTeX; the id stays in the results."""

from __future__ import annotations

import json
import os

from bioviz.evaluation import run as evaluation
from bioviz.evaluation import tables
from bioviz.models.model_spec import bundled_minilm_path
from bioviz.models.runs import set_run_name
from bioviz.ontology import SplitSpec, level_view, load_source

SETTINGS = evaluation.EvalSettings(n_boot=20)


def test_results_of_a_run_carry_its_current_name_and_its_id(data_dir, tmp_home):
    run = tmp_home / "runs" / "20261122-192803-ecd5"
    run.mkdir(parents=True)
    for file in bundled_minilm_path().iterdir():  # a fine-tuned run's weights: minilm's, linked
        os.symlink(file, run / file.name)
    (run / "run.json").write_text(json.dumps({"run_id": "20261122-192803-ecd5", "config": {
        "encoder": "definitions", "source": str(data_dir / "mini.obo"), "depth": 1, "shots": 2}}))
    onto = load_source(str(data_dir / "mini.obo"))
    view = level_view(onto, depth=1)
    split = SplitSpec(shots=2).make(view)
    [first] = evaluation.evaluate(view, split, [str(run)], ["ranking"], ontology=onto, settings=SETTINGS)
    assert first.model == "definitions · mini d1 · 2-shot (ecd5)" and first.run_id == "20261122-192803-ecd5"
    set_run_name(run, "BioLORD-style definitions_v2")
    [again] = evaluation.evaluate(view, split, [str(run)], ["ranking"], ontology=onto, settings=SETTINGS)
    assert again.cached and again.model == "BioLORD-style definitions_v2 (ecd5)"
    assert again.run_id == "20261122-192803-ecd5" and again.metrics == first.metrics
    latex = tables.to_latex(*tables.wide_tables(tables.results_table([again])))
    assert r"BioLORD-style definitions\_v2 (ecd5) &" in latex
