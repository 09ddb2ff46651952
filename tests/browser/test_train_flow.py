"""Real-browser test of the Train page: launch, queue, keep exploring, curves, open in views.

Drives the running app in headless Debian chromium through what a researcher does: choose
an ontology on the home page (``tests/data/mini.obo`` as a server path), set the form on the
Train page and launch a run, launch a second one at once (it waits in the queue; cancelled),
open the home page while the first trains, come back and wait in the self-refreshing job
table until it succeeds, look at its loss/validation curves and baseline-vs-trained figure,
then *Open in views* and check that the Neighbours page compares the run with its base, and
that every other view keeps the comparison, naming the run by its readable label.

By default the run is tiny (1 shot, hidden 32, 2 epochs: well under a minute in all).
``BIOVIZ_TRAIN_FLOW=icd10`` runs the real thing instead: ICD-10 chapters, 15 shots,
residual on minilm with the default hyperparameters, and also opens the Neighbours page
while it trains; it prints the timings (and writes them as JSON to
``BIOVIZ_TRAIN_FLOW_REPORT`` when set). Screenshots go to ``BIOVIZ_SCREENSHOT_DIR``
(relative to the project) when set, else to a temporary directory.
"""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path

import pytest

from bioviz.models.model_spec import DEFAULT_BASE
from tests.browser.support import (MEASURE_JS, ROOT, chromium, page_problems, require_browser, streamlit_app,
                                   wait_until_idle)

pytestmark = [pytest.mark.browser, pytest.mark.slow]
expect = pytest.importorskip("playwright.sync_api", reason="playwright (python) is not installed").expect
expect.set_options(timeout=60_000)

FLOWS = {
    # the CI flow: a level of 2 classes, a head 32 wide, 2 epochs
    "tiny": {"server_path": str(ROOT / "tests" / "data" / "mini.obo"), "classes": "2", "shots": "1",
             "hyperparameters": {"Maximum epochs": "2", "Hidden layer width": "32"}, "job_timeout_s": 180,
             "query": "asthma", "neighbours_while_training": False},
    # the issue's "Done when": ICD-10 chapters (the default selection), papers' defaults
    "icd10": {"server_path": None, "classes": "22", "shots": "15", "hyperparameters": {},
              "job_timeout_s": 3600, "query": "fracture of neck of femur", "query2": "asthma",
              "neighbours_while_training": True},
}
VIEWPORT = {"width": 1500, "height": 1250}
PAGE_TIMEOUT_S = 900  # the real flow's Neighbours page encodes a level while the CPU trains


def nav(page, name: str) -> None:
    """Follow a link of the page list in the sidebar (the same session, as a user does)."""
    page.locator('[data-testid="stSidebarNavLink"]', has_text=re.compile(f"^{re.escape(name)}$")).click()


def no_exception(page, where: str) -> None:
    problems = page_problems(page)  # exceptions, tracebacks and st.error boxes
    assert not problems, f"{where}: {problems}"


def alert_text(page, pattern: str, timeout_s: float = 60) -> re.Match:
    """The first alert (success/info/error box) matching ``pattern``, waiting for it."""
    box = page.get_by_test_id("stAlert").filter(has_text=re.compile(pattern)).first
    box.wait_for(timeout=timeout_s * 1000)
    return re.search(pattern, box.inner_text())


def job_table(page) -> dict[str, list[str]]:
    """The job table as shown: job id -> the row's cells (the grid's table for screen readers)."""
    rows = {}
    for row in page.get_by_test_id("stDataFrame").first.locator("[role=row]").all():
        cells = [c.strip() for c in row.locator("[role=gridcell]").all_text_contents()]
        if cells:
            rows[cells[0]] = cells
    return rows


def wait_for_row_status(page, job_id: str, status: str, timeout_s: float = 60) -> None:
    """Until the job table's row of ``job_id`` says ``status``: the grid's rows for screen readers are
    redrawn a moment after the alerts of the same run, so a row read at once can still say the last status."""
    page.wait_for_function(
        "([id, status]) => [...document.querySelectorAll('[data-testid=stDataFrame] [role=row]')].some("
        "r => [...r.querySelectorAll('[role=gridcell]')].map(c => c.textContent.trim()).join('|')"
        ".startsWith(id + '|') && [...r.querySelectorAll('[role=gridcell]')].some(c => c.textContent.trim() === status))",
        arg=[job_id, status], timeout=timeout_s * 1000)


def chart_titles(page, expected: int) -> list[str]:
    """Titles of the page's charts, once ``expected`` of them are drawn (they render one by one)."""
    charts = page.get_by_test_id("stPlotlyChart")
    charts.nth(expected - 1).wait_for(state="attached", timeout=60_000)
    titles = []
    for i in range(charts.count()):
        title = charts.nth(i).locator(".gtitle").first
        title.wait_for(state="attached", timeout=60_000)
        titles.append(title.text_content())
    return titles


def rendered(page, what, timeout_s: float = PAGE_TIMEOUT_S) -> float:
    """Seconds until ``what`` (a locator) shows and the page has finished running."""
    start = time.time()
    what.wait_for(timeout=timeout_s * 1000)
    return round(time.time() - start + wait_until_idle(page, timeout_s), 1)


def test_launch_from_the_train_page_keep_exploring_and_open_the_run_in_views(tmp_path, monkeypatch):
    require_browser()
    flow_name = os.environ.get("BIOVIZ_TRAIN_FLOW", "tiny")
    flow = FLOWS[flow_name]
    chosen = os.environ.get("BIOVIZ_SCREENSHOT_DIR")
    shots = (ROOT / chosen) if chosen else tmp_path / "screenshots"
    shots.mkdir(parents=True, exist_ok=True)
    home = tmp_path / "home"
    monkeypatch.setenv("BIOVIZ_HOME", str(home))  # this process reads the same job table
    from trainer.jobs.store import RUNNING
    from trainer.jobs.queue import Worker

    timings: dict[str, float | str] = {"flow": flow_name}
    with streamlit_app(home, tmp_path / "streamlit.log", {"BIOVIZ_JOB_SLOTS": "cpu=1"}) as url, \
            chromium() as browser:
        page = browser.new_page(viewport=VIEWPORT, device_scale_factor=1)
        page.set_default_timeout(60_000)
        page.goto(url, wait_until="domcontentloaded")
        page.get_by_role("heading", name="bioviz").wait_for()
        if flow["server_path"]:  # the fixture as a path on the server, from the home page
            page.get_by_text("Use your own ontology").click()
            page.get_by_role("textbox", name="…or a path on this server", exact=False).fill(flow["server_path"])
            page.get_by_role("textbox", name="…or a path on this server", exact=False).press("Enter")
            page.get_by_role("button", name="Use this path").click()
            # the picker shows the file's own name, never the server's path to it
            expect(page.get_by_role("combobox", name="Source", exact=True)).to_have_value(Path(flow["server_path"]).name)
        page.get_by_text("Names in 2+ classes").wait_for()  # the level statistics
        wait_until_idle(page)
        no_exception(page, "home")

        # -- the form ------------------------------------------------------------------
        nav(page, "Train")
        launch = page.get_by_role("button", name="Launch training")
        launch.wait_for()
        shots_box = page.get_by_label("Shots per class", exact=True)
        shots_box.fill(flow["shots"])
        shots_box.press("Enter")
        page.get_by_role("combobox", name="Device", exact=True).click()
        page.get_by_role("option", name="cpu", exact=True).click()
        if flow["hyperparameters"]:
            page.get_by_text("Hyperparameters (the papers' defaults").click()
            for label, value in flow["hyperparameters"].items():
                box = page.get_by_label(label, exact=True)
                box.fill(value)
                box.press("Enter")
                expect(box).to_have_value(value)
        expect(page.get_by_role("combobox", name="Device", exact=True)).to_have_value("cpu")
        expect(shots_box).to_have_value(flow["shots"])
        wait_until_idle(page)
        classes = page.get_by_test_id("stMetric").filter(has_text="Classes trained on")
        assert classes.get_by_test_id("stMetricValue").inner_text() == flow["classes"]
        no_exception(page, "Train form")

        # -- two launches back to back: the second waits in the queue ----------------------
        started = time.time()
        launch.click()
        first = alert_text(page, r"Job (\S+) started").group(1)
        launch.click()
        second = alert_text(page, r"Job (\S+) queued").group(1)
        alert_text(page, r"Waiting in the queue \(#1\)")
        page.wait_for_function("n => document.querySelectorAll('[data-testid=stDataFrame] [role=row]').length >= n",
                               arg=3)
        rows = job_table(page)
        assert rows[second][2:4] == ["queued", "waiting (#1 in queue)"], rows
        assert rows[first][2] in ("starting", "running"), rows  # the runner may not have said "running" yet
        # the newest launch is the selected job; the panel may still be redrawing it when the table has its
        # row, so Cancel is pressed once the box names the queued job (not while an older panel is on screen)
        selected = page.get_by_role("combobox", name="Selected job").last
        expect(selected).to_have_value(re.compile(f"· queued · job {second}$"))
        page.get_by_role("button", name="Cancel", exact=True).click()
        wait_for_row_status(page, second, "cancelled")
        assert Worker().store.get(second).status == "cancelled"

        # -- the other pages stay usable while it trains ------------------------------------
        worker = Worker()
        assert worker.store.get(first).status == RUNNING  # so the visits below happen while it trains
        nav(page, "Home")
        timings["home_while_training_s"] = rendered(page, page.get_by_text("Names in 2+ classes"))
        no_exception(page, "home while training")
        if flow["neighbours_while_training"]:
            nav(page, "Neighbours")
            query = page.get_by_role("combobox", name="Query: an ontology name")
            timings["neighbours_open_while_training_s"] = rendered(page, query)
            query.click()
            query.fill(flow["query"])
            query.press("Enter")
            timings["neighbours_first_query_while_training_s"] = rendered(
                page, page.get_by_text("Download the comparison (CSV)"))
            timings["job_status_after_the_first_query"] = worker.store.get(first).status
            query.click()  # a second query: the level's vectors are cached now
            query.fill(flow["query2"])
            query.press("Enter")
            timings["neighbours_second_query_while_training_s"] = rendered(
                page, page.get_by_test_id("stMarkdownContainer").filter(has_text=f"{flow['query2']} ·"))
            no_exception(page, "Neighbours while training")
            page.screenshot(path=str(shots / "neighbours-while-training.png"))
        timings["job_status_after_the_visits"] = worker.store.get(first).status

        # -- back on the Train page: the job table refreshes itself until it succeeds --------
        nav(page, "Train")
        selected = page.get_by_role("combobox", name="Selected job")
        selected.wait_for()
        if not selected.input_value().endswith(f"job {first}"):
            selected.click()
            page.get_by_role("option", name=re.compile(f"job {first}$")).click()
        alert_text(page, r"Finished in", timeout_s=flow["job_timeout_s"])
        timings["job_wall_s"] = round(time.time() - started, 1)
        wait_for_row_status(page, first, "succeeded")
        rows = job_table(page)
        assert rows[first][2] == "succeeded" and rows[second][2] == "cancelled", rows
        timings["job_table_row"] = " | ".join(rows[first])
        # Issue 27: at 1440 x 900 the job table (two jobs: one succeeded, one cancelled) fits its frame
        page.set_viewport_size({"width": 1440, "height": 900})
        page.wait_for_timeout(1000)  # the grid sizes its columns after the first frame
        widths = page.evaluate(MEASURE_JS, 1)
        assert not widths["problems"] and widths["tables"] >= 1, widths
        page.set_viewport_size(VIEWPORT)
        run = json.loads((home / "runs" / first / "run.json").read_text())
        metrics = run["metrics"]
        timings["run"] = {"device": run.get("device"), "timings": run.get("timings"),
                          "epochs": len(metrics.get("history", [])), "best_epoch": metrics.get("best_epoch"),
                          "test_mAP": [metrics["baseline"]["test"]["mAP"], metrics["trained"]["test"]["mAP"]]}
        wait_until_idle(page)  # the finished job's rerun has replaced the figures drawn before it
        weighed = len((metrics.get("base_mix") or {}).get("candidates") or []) > 1  # an automatic choice
        assert weighed or flow_name != "tiny", metrics.get("base_mix")  # the default weight is chosen on validation
        titles = chart_titles(page, 3 if weighed else 2)
        named = f"({first.rsplit('-', 1)[-1]})"  # figures name the run by its label and short id
        assert titles[0].startswith("Training curves") and named in titles[0], titles
        assert titles[1].startswith("Class-retrieval mAP") and named in titles[1], titles
        if weighed:  # the weight chosen on validation, and what it weighed
            assert len(titles) == 3 and titles[2].startswith("Base weight") and named in titles[2], titles
            assert "chosen: w = " in page.get_by_test_id("stPlotlyChart").nth(2).text_content()
        else:
            assert len(titles) == 2, titles
        timings["base_mix"] = {k: v for k, v in (metrics.get("base_mix") or {}).items() if k != "candidates"}
        curves = page.get_by_test_id("stPlotlyChart").first
        legend = curves.text_content().lower()  # the losses, the validation curves and the base model's mAP
        assert "total" in legend and "validation loss" in legend and "base model (validation map)" in legend
        assert f"baseline ({DEFAULT_BASE})" in page.get_by_test_id("stPlotlyChart").nth(1).text_content()
        no_exception(page, "Train, finished job")
        page.set_viewport_size({"width": 1500, "height": 2300})
        page.get_by_test_id("stPlotlyChart").nth(1).scroll_into_view_if_needed()
        page.wait_for_timeout(1500)
        bottom = page.get_by_test_id("stMainBlockContainer").bounding_box()
        page.screenshot(path=str(shots / "train-job.png"),
                        clip={"x": 0, "y": 0, "width": 1500, "height": min(2300, bottom["y"] + bottom["height"])})
        page.set_viewport_size(VIEWPORT)

        # -- open in views: the Neighbours page compares the run with its base ------------
        page.get_by_role("button", name="Open in views").click()
        page.get_by_role("heading", name="Neighbours").wait_for()
        compared = page.get_by_role("combobox", name="Compared model")
        compared.wait_for()
        short = first.rsplit("-", 1)[-1]  # pickers show the run's readable name with its short id
        assert compared.input_value().endswith(f"({short})"), compared.input_value()
        assert page.get_by_role("combobox", name="Baseline model").input_value() == DEFAULT_BASE  # the run's base
        query = page.get_by_role("combobox", name="Query: an ontology name")
        query.click()
        query.fill(flow["query"])
        query.press("Enter")
        timings["neighbours_with_run_s"] = rendered(page, page.get_by_text("Download the comparison (CSV)"))
        no_exception(page, "Neighbours after Open in views")
        headers = page.locator('[data-testid="stMain"] [data-testid="stMarkdownContainer"] strong').all_inner_texts()
        assert any("minilm" in h.lower() for h in headers) and any(f"({short})" in h or first in h for h in headers), headers
        # the link names the run by its id, never by the server's path to it
        assert f"model_b={first}" in page.url and str(home) not in page.url.replace("%2F", "/"), page.url
        page.screenshot(path=str(shots / "open-in-views.png"))

        # -- every other view keeps the comparison: the run against its base, by its readable name --
        for name in ("Projection", "Similarity matrix", "Hierarchy", "Evaluation", "Code terms"):
            nav(page, name)
            timings[f"{name.lower()}_with_run_s"] = rendered(page, page.get_by_test_id("stMain"))
            no_exception(page, f"{name} after Open in views")
            compared = page.get_by_role("combobox", name="Compared model")
            assert compared.input_value().endswith(f"({short})"), (name, compared.input_value())
            assert f"model_b={first}" in page.url, (name, page.url)
            if name in ("Projection", "Hierarchy"):  # their figures' titles name the run
                charts = page.get_by_test_id("stPlotlyChart")
                charts.first.locator(".gtitle").first.wait_for(state="attached", timeout=PAGE_TIMEOUT_S * 1000)
                assert f"({short})" in charts.first.text_content(), (name, charts.first.text_content()[:300])
        page.close()

    print(json.dumps(timings, indent=1))
    if os.environ.get("BIOVIZ_TRAIN_FLOW_REPORT"):
        Path(os.environ["BIOVIZ_TRAIN_FLOW_REPORT"]).write_text(json.dumps(timings, indent=1))
