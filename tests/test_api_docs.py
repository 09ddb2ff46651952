"""docs/api.md and the public API: every python block runs as written, every public name is documented.

The blocks run in order in one fresh interpreter from the repository root, in an empty
``BIOVIZ_HOME`` (as a reader pasting them would), so a block that needs an earlier one's names
gets them and a broken example fails here, not in a reader's notebook.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "api.md"
BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)
# Runs the blocks handed over on stdin (a JSON list), one after another in one namespace, each
# compiled under its own name so that a failure says which block it was.
RUNNER = """
import json, sys
blocks = json.load(sys.stdin)
namespace = {"__name__": "__main__"}
for number, block in enumerate(blocks, 1):
    print(f"--- block {number} ---", flush=True)
    exec(compile(block, f"docs/api.md block {number}", "exec"), namespace)
print("--- all blocks ran ---")
"""


def python_blocks(text: str) -> list[str]:
    """The ```python fenced blocks of a Markdown text, in order."""
    return BLOCK.findall(text)


def api_environment(home: Path) -> dict:
    """The test suite's environment for a child interpreter, with ``home`` as ``BIOVIZ_HOME``."""
    env = dict(os.environ, BIOVIZ_HOME=str(home), HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false",
               BIOVIZ_WARMUP="0")
    env.setdefault("BIOVIZ_BACKEND", "torch")  # as tests/conftest.py: no onnx export on a first encoding
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    return env


def test_the_blocks_are_found():
    assert python_blocks("a\n```python\nx = 1\n```\nb\n```bash\nls\n```\n```python\ny = 2\n```\n") == [
        "x = 1\n", "y = 2\n"]


@pytest.mark.slow
def test_every_python_block_of_docs_api_md_runs_in_order_in_a_fresh_interpreter(tmp_path):
    blocks = python_blocks(DOC.read_text(encoding="utf-8"))
    assert len(blocks) >= 6
    done = subprocess.run([sys.executable, "-c", RUNNER], input=json.dumps(blocks), capture_output=True, text=True,
                          cwd=ROOT, env=api_environment(tmp_path / "home"), timeout=600)
    assert done.returncode == 0 and "--- all blocks ran ---" in done.stdout, (
        f"exit {done.returncode}\n{done.stdout[-4000:]}\n{done.stderr[-6000:]}")
    assert "refused:" in done.stdout  # the last block's one-line error


@pytest.mark.slow  # imports the whole API (torch, plotly, anywidget): 5-7 s
def test_every_public_name_exists_has_a_numpy_docstring_and_is_in_docs_api_md():
    import bioviz

    doc = DOC.read_text(encoding="utf-8")
    assert bioviz.__all__ and len(bioviz.__all__) == len(set(bioviz.__all__))
    for name in bioviz.__all__:
        value = getattr(bioviz, name)
        text = value.__doc__ or ""
        assert f"`{name}`" in doc or f"bioviz.{name}" in doc, f"{name} is not documented in docs/api.md"
        if name == "BiovizError":  # the library's error class: documented where it is defined
            continue
        assert re.search(r"^\s*(Parameters|Returns|Attributes)\n\s*-{3,}$", text, re.M), (
            f"bioviz.{name} has no numpydoc section (Parameters, Returns or Attributes)")
    assert "__version__" in dir(bioviz) and set(bioviz.__all__) <= set(dir(bioviz))


def test_a_name_outside_the_api_is_an_attribute_error():
    import bioviz

    with pytest.raises(AttributeError, match="no attribute 'nothing_here'"):
        bioviz.nothing_here  # noqa: B018 - the lookup is the test


@pytest.mark.slow  # a fresh interpreter importing the API: 5-10 s
def test_in_ipython_bad_input_is_one_error_line_without_a_traceback(tmp_path):
    script = ("from IPython.core.interactiveshell import InteractiveShell\n"
              "shell = InteractiveShell.instance()\n"
              "result = shell.run_cell(\"import bioviz\\nbioviz.open_level('tests/data/mini.obo', root='NOPE:1')\")\n"
              "print('failed:', type(result.error_in_exec).__name__)\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT,
                          env=api_environment(tmp_path / "home"), timeout=300)
    assert "failed: UnknownConceptError" in done.stdout  # the cell still fails (nbclient, CI see it)
    shown = (done.stdout + done.stderr).replace("failed: UnknownConceptError", "")
    assert "UnknownConceptError: unknown concept id 'NOPE:1'" in shown and "Traceback" not in shown
