"""AppTest of the Evaluation page (app_pages/6_Evaluation.py) on the tiny mini.obo ontology.

Models are replaced by a deterministic trigram encoder (the page and the library run in
this process), so the test checks the page's flow, not a model's figures.
"""

from __future__ import annotations

import json

import pytest

from bioviz.evaluation import run as evaluation

PAGE = "app_pages/6_Evaluation.py"


@pytest.fixture
def app(tmp_home, fake_eval_models, data_dir, open_app):
    return open_app(PAGE, {"source": str(data_dir / "mini.obo"), "depth": "1", "eval_boot": "50",
                           "model_a": "minilm", "model_b": "char-tfidf"}, timeout=120)


def run_button(at):
    return next(b for b in at.button if b.label == "Run evaluation")


def _result_frames(at) -> int:
    """How many of the page's first tables are the results (one per task family; the sample sizes follow)."""
    frames = [d.value for d in at.dataframe]
    return next((i for i, f in enumerate(frames) if "model" in f.columns), len(frames))


def results_of(at):
    """The results, every family's table side by side (the page splits them to fit its width)."""
    import pandas as pd  # local: only these helpers need it

    return pd.concat([d.value for d in at.dataframe[:_result_frames(at)]], axis=1)


def after_results(at, i: int):
    """After the results, 0: the sample sizes; 1: the differences from the baseline (its family tables side by side)."""
    import pandas as pd  # local: only these helpers need it

    n = _result_frames(at)
    if i == 0:
        return at.dataframe[n].value
    frames = []
    for d in at.dataframe[n + 1:]:  # the difference tables: models x figures, until another kind of table
        if d.value.index.name != "model":
            break
        frames.append(d.value)
    return pd.concat(frames, axis=1)


def test_evaluate_two_models_on_every_task_and_benchmark(app):
    at = app.run()
    assert not at.exception and not at.error
    assert "Choose models and tasks" in at.info[0].value
    run_button(at).click().run()
    assert not at.exception and not at.error
    table = results_of(at)
    assert list(table.index) == ["tri-minilm", "tri-char-tfidf"]
    assert "Semantic similarity ranking · mAP" in table.columns and "MayoSRS · Spearman" in table.columns
    assert all(sum(cell.startswith("★") for cell in table[c]) <= 1 for c in table.columns)  # never a tie starred
    labels = [b.label for b in at.get("download_button")]
    assert labels == ["Download CSV", "Download LaTeX (booktabs)"]
    assert any(r"\toprule" in c.value for c in at.code)
    assert len(at.get("plotly_chart")) == 1 + len(evaluation.TASKS)  # benchmarks + one per task


def test_url_chooses_tasks_and_cross_level(app):
    app.query_params["eval_tasks"] = "ranking"
    app.query_params["eval_bench"] = ""
    app.query_params["eval_cross"] = "1,2"
    at = app.run()
    run_button(at).click().run()
    assert not at.exception and not at.error
    table = results_of(at)
    assert list(table.columns) == ["Semantic similarity ranking · mAP"]
    charts = at.get("plotly_chart")
    assert len(charts) == 2  # ranking bars + cross-level heatmap


def test_bad_cross_level_is_a_one_line_error(app):
    at = app.run()
    at.text_input(key="eval_cross").set_value("one,two").run()
    assert not at.exception
    assert "cross-level levels must be numbers" in at.error[0].value


def test_changed_choices_say_results_are_stale(app):
    at = app.run()
    run_button(at).click().run()
    at.number_input(key="eval_boot").set_value(20).run()
    assert any("choices changed" in i.value for i in at.info)
    assert at.dataframe  # previous results stay visible


def test_synonym_sets_with_zero_shot_concepts_give_the_concept_level_table(app):
    app.query_params["synonyms"] = "1"
    app.query_params["eval_tasks"] = "synonym"
    app.query_params["eval_bench"] = ""
    app.query_params["eval_own"] = "0"
    at = app.run()
    assert not at.exception and not at.error
    assert not any("For concept-level synonym retrieval" in c.value for c in at.caption)  # already concepts
    at.number_input(key="eval_zero").set_value(0.3).run()
    assert any("seed 0, 1 test name(s) per class, 0.3 zero-shot classes" in c.value for c in at.caption)
    run_button(at).click().run()
    assert not at.exception and not at.error
    table = results_of(at)
    parts = {c.split(" · ")[1].split(" ")[0] for c in table.columns}
    assert parts == {"train", "test", "zero-shot"}  # train, test and zero-shot concepts
    assert len(table.columns) == 9  # mAP, Acc@1, MRR per part
    sizes = after_results(at, 0).set_index("count")
    assert int(sizes.loc[["zero_shot.queries"], "n"].iloc[0].replace(",", "")) > 0  # zero-shot concepts of 2+ names rank each other


def test_synonym_task_on_a_level_points_to_synonym_sets(app):
    app.query_params["eval_tasks"] = "synonym"
    at = app.run()
    assert any("For concept-level synonym retrieval" in c.value for c in at.caption)


def test_the_baseline_comes_first_in_the_pair_colours_and_progress_has_steps(app, monkeypatch):
    import json

    from bioviz.figures.theme import pair_colours
    from ui import cache

    shown = []
    real = cache._StepBar.__call__
    monkeypatch.setattr(cache._StepBar, "__call__",
                        lambda bar, done, total, message: shown.append(f"{bar.what}: {done}/{total} {message}")
                        or real(bar, done, total, message))
    # Picked compared-first, with a bootstrap size no other test uses (nothing cached in this process).
    app.query_params.update({"eval_models": "char-tfidf|minilm", "eval_tasks": "ranking,hypernym",
                             "eval_bench": "mayosrs", "eval_boot": "37"})
    at = app.run()
    run_button(at).click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert list(results_of(at).index) == ["tri-minilm", "tri-char-tfidf"]  # the sidebar's baseline first
    for chart in at.get("plotly_chart"):
        bars = json.loads(chart.proto.spec)["data"]
        assert [(b["name"], b["marker"]["color"]) for b in bars] == list(zip(["tri-minilm", "tri-char-tfidf"],
                                                                               pair_colours()))
    assert "Ontology tasks: 0.0/4 tri-minilm: Semantic similarity ranking" in shown
    assert "Ontology tasks: 4.0/4 done" in shown and "Relatedness benchmarks: 2.0/2 done" in shown
    assert not at.get("progress")  # the bars are gone once the results are in
    files = [json.loads(c.proto.config)["toImageButtonOptions"]["filename"] for c in at.get("plotly_chart")]
    assert files[0].startswith("evaluation-tri-minilm-tri-char-tfidf-mini-d1-")  # a slug: no spaces or dots
    assert all(" " not in f and "·" not in f for f in files)


def pretrained_run(home, data_dir, split_shots: int, terms=("antalgic gait",)):
    """A pretrained model as a pretrain job publishes it (records only: the fake models load no weights)."""
    from bioviz.evaluation.overlap import PRETRAIN_FILE, TERMS_FILE, term_hash

    run = home / "runs" / "20261123-010203-abcd"
    run.mkdir(parents=True)
    (run / "run.json").write_text(json.dumps({"run_id": run.name, "config": {
        "kind": "pretrain", "encoder": "pretrain", "finetune": True, "base": "minilm", "sources": ["hpo"],
        "objectives": ["synonyms"], "max_pairs": 20000, "train_pairs": 20000}}))
    (run / "config.json").write_text("{}")  # parses as a model (the fake models load no weights)
    (run / PRETRAIN_FILE).write_text(json.dumps({"config": {"sources": ["hpo"]}, "excluded": {"levels": [
        {"level": {"source": str(data_dir / "mini.obo"), "depth": "1"},
         "split": {"shots": split_shots, "seed": 0, "test_per_class": 1, "zero_shot_classes": 0}}]}}))
    (run / TERMS_FILE).write_text(json.dumps({"hashes": [term_hash(t) for t in terms]}))
    return run


def test_results_whose_data_overlapped_pretraining_are_marked_and_explained(tmp_home, fake_eval_models, data_dir,
                                                                            open_app):
    run = pretrained_run(tmp_home, data_dir, split_shots=2)  # pretrained with another split of this level kept out
    query = {"source": str(data_dir / "mini.obo"), "depth": "1", "eval_boot": "20", "eval_own": "0",
             "eval_shots": "1", "eval_tasks": "ranking", "eval_bench": "mayosrs", "eval_models": f"minilm|{run}",
             "eval_cross": "1"}
    at = open_app(PAGE, query, timeout=120).run()
    run_button(at).click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    table = results_of(at)
    pretrained = f"tri-{run}"
    assert table.loc[pretrained, "Semantic similarity ranking · mAP"].endswith(" †")
    assert not table.loc["tri-minilm", "Semantic similarity ranking · mAP"].endswith("†")
    # "antalgic gait" is a MayoSRS term and one of its pretraining texts
    assert table.loc[pretrained, "MayoSRS · Spearman"].endswith(" †")
    caption = next(c.value for c in at.caption if "Not a held-out figure" in c.value)
    assert "without keeping this level's held-out names out (split 1 shots, seed 0)" in caption
    assert "on MayoSRS: 1 of its" in caption and "terms are texts of the pretraining pairs (hpo)" in caption
    crossed = [c.value for c in at.caption if "in the cross-level table" in c.value]
    assert len(crossed) == 1 and "level(s) 1: pretrained on hpo" in crossed[0]


def test_a_level_kept_out_of_pretraining_under_the_same_split_is_not_marked(tmp_home, fake_eval_models, data_dir,
                                                                           open_app):
    run = pretrained_run(tmp_home, data_dir, split_shots=1, terms=())
    query = {"source": str(data_dir / "mini.obo"), "depth": "1", "eval_boot": "20", "eval_own": "0",
             "eval_shots": "1", "eval_tasks": "ranking", "eval_bench": "mayosrs", "eval_models": str(run)}
    at = open_app(PAGE, query, timeout=120).run()
    run_button(at).click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert not any(str(cell).endswith("†") for cell in results_of(at).to_numpy().ravel())
    assert not any("Not a held-out figure" in c.value for c in at.caption)


def test_difference_view_gives_paired_intervals_against_the_chosen_baseline(app):
    app.query_params.update({"eval_tasks": "ranking,synonym", "eval_bench": "mayosrs"})
    at = app.run()
    run_button(at).click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    table = results_of(at)
    assert "Synonym retrieval / concept mapping · test mAP" not in table.columns  # the ranking mAP, shown once
    assert any("shown once, under ranking" in c.value for c in at.caption)
    assert at.subheader[-1].value == "Difference from a baseline" or "Difference from a baseline" in \
        [h.value for h in at.subheader]
    differences = after_results(at, 1)
    assert list(differences.index) == ["tri-char-tfidf"]
    assert "Semantic similarity ranking · mAP" in differences.columns and "MayoSRS · Spearman" in differences.columns
    cell = differences.loc["tri-char-tfidf", "Semantic similarity ranking · mAP"]
    assert cell.count("[") == 1 and cell[0] in "+-"  # a signed difference with its paired interval
    assert any("95% paired bootstrap intervals" in c.value for c in at.caption)
    at.selectbox(key="_eval_baseline").set_value("tri-char-tfidf").run()
    assert not at.exception
    assert list(after_results(at, 1).index) == ["tri-minilm"]
    assert any("Model minus tri-char-tfidf" in c.value for c in at.caption)
