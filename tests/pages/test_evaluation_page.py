"""AppTest of the Evaluation page (app_pages/6_Evaluation.py) on the tiny mini.obo ontology.

Models are replaced by a deterministic trigram encoder (the page and the library run in
this process), so the test checks the page's flow, not a model's figures.
"""

from __future__ import annotations

import pytest

from bioviz.evaluation import run as evaluation

PAGE = "app_pages/6_Evaluation.py"


@pytest.fixture
def app(tmp_home, fake_eval_models, data_dir, open_app):
    return open_app(PAGE, {"source": str(data_dir / "mini.obo"), "depth": "1", "eval_boot": "50"}, timeout=120)


def run_button(at):
    return next(b for b in at.button if b.label == "Run evaluation")


def test_evaluate_two_models_on_every_task_and_benchmark(app):
    at = app.run()
    assert not at.exception and not at.error
    assert "Choose models and tasks" in at.info[0].value
    run_button(at).click().run()
    assert not at.exception and not at.error
    table = at.dataframe[0].value
    assert list(table.index) == ["tri-minilm", "tri-char-tfidf"]
    assert "Semantic similarity ranking · mAP" in table.columns and "MayoSRS · Spearman" in table.columns
    assert all(any(cell.startswith("★") for cell in table[c]) for c in table.columns)  # best marked per column
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
    table = at.dataframe[0].value
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
    table = at.dataframe[0].value
    parts = {c.split(" · ")[1].split(" ")[0] for c in table.columns}
    assert parts == {"train", "test", "zero-shot"}  # train, test and zero-shot concepts
    assert len(table.columns) == 9  # mAP, Acc@1, MRR per part
    sizes = at.dataframe[1].value.iloc[0]
    assert sizes["zero_shot.queries"] > 0  # zero-shot concepts with two or more names rank each other


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
    assert list(at.dataframe[0].value.index) == ["tri-minilm", "tri-char-tfidf"]  # the sidebar's baseline first
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
