"""examples/quickstart.ipynb runs top to bottom in a Jupyter kernel, in an empty BIOVIZ_HOME, and is kept without outputs."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = ROOT / "examples" / "quickstart.ipynb"


def test_the_notebook_is_committed_without_outputs():
    import nbformat

    notebook = nbformat.read(NOTEBOOK, as_version=4)
    nbformat.validate(notebook)
    code = [cell for cell in notebook.cells if cell.cell_type == "code"]
    assert code and all(not cell.outputs and cell.execution_count is None for cell in code)


@pytest.mark.slow
def test_the_quickstart_notebook_executes(tmp_path, monkeypatch):
    import nbformat
    from nbclient import NotebookClient

    # the kernel inherits this environment (tests/conftest.py: offline, torch backend, no warm-up)
    monkeypatch.setenv("BIOVIZ_HOME", str(tmp_path / "home"))
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    client = NotebookClient(notebook, timeout=600, kernel_name="python3",
                            resources={"metadata": {"path": str(ROOT / "examples")}})
    client.execute()  # CellExecutionError (with the cell and its traceback) on the first failing cell
    outputs = {cell.source.splitlines()[-1]: cell.outputs for cell in notebook.cells if cell.cell_type == "code"}
    status = outputs["job.status, job.id"][0]["data"]["text/plain"]
    assert "'succeeded'" in status
    widget = outputs["widget"][0]["data"]
    assert "application/vnd.jupyter.widget-view+json" in widget
    assert any("myocardial infarction" in str(o.get("data", {})) for o in outputs[
        'bioviz.neighbours(level, "heart attack", model=medical, compare=baseline, k=5, expand=False)'])
