"""Damaged or foreign model files (issue 25, items 2-4): one line, never a traceback, nothing cached.

Every model here is built from the bundled minilm (its files linked, not copied) or from one
head run saved once per module: weights that are a pickle (one that would run a command if
unpickled), truncated or random safetensors, a head's Dense weight of the wrong shape, NaN,
infinite or overflowing (1e30) Dense weights, and modules.json naming a module type outside
sentence-transformers. Each is refused through the library and the command line with one
line, and vectors.sqlite holds no row afterwards.
"""

from __future__ import annotations

import json
import os
import pickle
import re
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from bioviz.cli import main
from bioviz.errors import ModelError
from bioviz.models.model_spec import bundled_minilm_path
from bioviz.models.registry import embed, load_encoder
from bioviz.models.load_errors import check_finite
from bioviz.models.vector_cache import DB_NAME
from test_app_support import DATA, ROOT, no_traceback, open_app, share
from ui.markdown import md

NAMES = ["fever", "asthma", "heart attack"]
DAMAGED = "its weights are damaged or not in safetensors form"
FOREIGN = "modules.json names module type {!r}, which bioviz does not load: only sentence-transformers' own modules"


class _RunsACommand:
    """Unpickled, this would run ``touch MARKER``: torch's safe loader must refuse it unread."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return os.system, (f"touch {self.marker}",)


def linked_minilm(folder: Path, leave_out: tuple[str, ...] = ()) -> Path:
    """minilm's files linked into ``folder`` (except ``leave_out``): a model directory to damage cheaply."""
    folder.mkdir()
    for file in bundled_minilm_path().iterdir():
        if file.name not in leave_out:
            os.symlink(file, folder / file.name)
    return folder


def linked_run(source: Path, target: Path, **config) -> Path:
    """A head run's copy: its big files linked, its module folders and run.json copied (to be edited)."""
    target.mkdir()
    for entry in source.iterdir():
        if entry.is_dir():
            shutil.copytree(entry, target / entry.name)
        elif entry.name != "run.json":
            os.symlink(entry, target / entry.name)
    record = json.loads((source / "run.json").read_text())
    record["config"].update(config)
    (target / "run.json").write_text(json.dumps(record))
    return target


def with_modules(folder: Path, kind: str) -> Path:
    """``folder``'s modules.json with its Normalize entry's type replaced by ``kind``."""
    modules = json.loads((bundled_minilm_path() / "modules.json").read_text())
    modules[-1]["type"] = kind
    (folder / "modules.json").unlink()
    (folder / "modules.json").write_text(json.dumps(modules))
    return folder


def dense_weights(run: Path, change) -> Path:
    """Replace the first Dense module's weights of ``run`` by ``change(weight, bias)`` -> dict."""
    from safetensors.numpy import load_file, save_file

    file = run / "3_Dense" / "model.safetensors"
    weights = load_file(str(file))
    save_file(change(weights["linear.weight"], weights["linear.bias"]), str(file))
    return run


def pickled_dense(run: Path, marker: Path) -> Path:
    (run / "3_Dense" / "model.safetensors").unlink()
    (run / "3_Dense" / "pytorch_model.bin").write_bytes(pickle.dumps(_RunsACommand(marker)))
    return run


def filled(value: float):
    return lambda weight, bias: {"linear.weight": np.full_like(weight, value), "linear.bias": bias}


def one_nan(weight, bias):
    weight = weight.copy()
    weight[0, 0] = np.nan
    return {"linear.weight": weight, "linear.bias": bias}


def wrong_shape(weight, bias):
    return {"linear.weight": weight[:, :100].copy(), "linear.bias": bias}


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """Every damaged model of the matrix (name -> path), in a folder that also holds mini.obo."""
    from tests.bioviz.models.test_head_runs import save_run

    root = tmp_path_factory.mktemp("damaged-models")
    marker = root / "MARKER-the-pickle-ran"
    shutil.copy(DATA / "mini.obo", root / "mini.obo")
    made: dict[str, Path] = {"marker": marker}
    made["pickle weights"] = linked_minilm(root / "pickle", leave_out=("model.safetensors",))
    (made["pickle weights"] / "pytorch_model.bin").write_bytes(pickle.dumps(_RunsACommand(marker)))
    real = (bundled_minilm_path() / "model.safetensors").read_bytes()
    made["truncated safetensors"] = linked_minilm(root / "truncated", leave_out=("model.safetensors",))
    (made["truncated safetensors"] / "model.safetensors").write_bytes(real[:len(real) // 2])
    made["random safetensors"] = linked_minilm(root / "random", leave_out=("model.safetensors",))
    (made["random safetensors"] / "model.safetensors").write_bytes(np.random.default_rng(0).bytes(1 << 16))
    for name, kind in (("os.system", "os.system"), ("subprocess.Popen", "subprocess.Popen"),
                       ("a local class", "evil_module.Evil")):
        made[f"module type {name}"] = with_modules(linked_minilm(root / name.replace(" ", "-")), kind)
    # the local class's module would write the marker if it were ever imported
    (made["module type a local class"] / "evil_module.py").write_text(
        f"open({str(marker)!r}, 'w').close()\nclass Evil:\n    pass\n")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("BIOVIZ_HOME", str(root / "home"))
        head = save_run(root / "run-head", "minilm")
    made["head run: Dense of the wrong shape"] = dense_weights(linked_run(head, root / "run-shape"), wrong_shape)
    made["head run: NaN Dense"] = dense_weights(linked_run(head, root / "run-nan"), one_nan)
    made["head run: inf Dense"] = dense_weights(linked_run(head, root / "run-inf"), filled(np.inf))
    made["head run: 1e30 Dense"] = dense_weights(linked_run(head, root / "run-huge"), filled(1e30))
    made["head run: pickle Dense"] = pickled_dense(linked_run(head, root / "run-pickle"), marker)
    # encoded through its whole model (fine-tuned): the NaN reaches the vectors themselves
    made["whole model: NaN Dense"] = dense_weights(linked_run(head, root / "run-whole-nan", finetune=True), one_nan)
    made["root"] = root
    return made


# case -> the message after "cannot load model from PATH: " (a regular expression)
REFUSALS = {
    "pickle weights": DAMAGED,
    "truncated safetensors": DAMAGED,
    "random safetensors": DAMAGED,
    "module type os.system": FOREIGN.format("os.system"),
    "module type subprocess.Popen": FOREIGN.format("subprocess.Popen"),
    "module type a local class": FOREIGN.format("evil_module.Evil"),
    "head run: Dense of the wrong shape": r"its Dense weight \(3_Dense\) has shape \(816, 100\), expected \(816, 384\)",
    "head run: NaN Dense": r"its Dense weight \(3_Dense\) holds NaN or infinite values",
    "head run: inf Dense": r"its Dense weight \(3_Dense\) holds NaN or infinite values",
    "head run: 1e30 Dense": r"its Dense weights are too large: outputs up to .* overflow float32",
    "head run: pickle Dense": DAMAGED + r" \(3_Dense\)",
}


def expected(case: str, models) -> str:
    if case == "whole model: NaN Dense":
        return r"^.* gave vectors with NaN or infinite values for (\d+) of \1 names: its weights are damaged"
    why = REFUSALS[case] if case.startswith("head run") else re.escape(REFUSALS[case])
    return rf"^cannot load model from {re.escape(str(models[case].resolve()))}: {why}"


def cached_rows(home: Path, case: str = "") -> int:
    """Rows in vectors.sqlite (none when it was never created) that are not the input model's.

    A head run whose weights overflow is refused where its head gives the overflow, after its
    input model (minilm) encoded the names: minilm's rows are good vectors and stay cached.
    """
    db = home / "embeddings" / DB_NAME
    if not db.exists():
        return 0
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT COUNT(*) FROM vectors").fetchone()[0]
        if case.startswith("head run: 1e30"):
            rows -= conn.execute("SELECT COUNT(*) FROM vectors WHERE model = ?",
                                 (load_encoder("minilm").fingerprint,)).fetchone()[0]
        return rows


CASES = [*REFUSALS, "whole model: NaN Dense"]


@pytest.mark.parametrize("case", CASES)
def test_a_damaged_model_is_one_line_in_the_library_and_caches_nothing(models, tmp_home, case):
    with pytest.raises(ModelError, match=expected(case, models)) as caught:
        embed(NAMES, model=str(models[case]))
    assert "\n" not in str(caught.value)
    assert cached_rows(tmp_home, case) == 0
    assert not models["marker"].exists(), "the pickle or the local class was run"


@pytest.mark.parametrize("case", CASES)
def test_a_damaged_model_is_one_line_on_the_command_line(models, tmp_home, capsys, case):
    assert main(["embed", str(models["root"] / "mini.obo"), "--model", str(models[case]), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith("error: ") and re.match(expected(case, models), err[len("error: "):])
    assert cached_rows(tmp_home, case) == 0
    assert not models["marker"].exists()


@pytest.mark.slow  # over 5 s in a full run (CI lists the times)
def test_neighbours_refuses_a_pickle_in_a_fresh_process(models, tmp_home):
    """The whole stderr of a real process: no torch advice to turn the safety off, no warning, exit 2."""
    env = {**os.environ, "BIOVIZ_HOME": str(tmp_home), "HF_HUB_OFFLINE": "1"}
    model = str(models["pickle weights"])
    argv = ["neighbours", "fever", "--source", str(models["root"] / "mini.obo"), "--model", model, "--quiet"]
    done = subprocess.run([sys.executable, "-m", "bioviz", *argv], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 2, done.stderr
    assert done.stderr == f"error: cannot load model from {Path(model).resolve()}: {DAMAGED}\n"
    assert cached_rows(tmp_home) == 0
    assert not models["marker"].exists()


@pytest.mark.parametrize("case", ["pickle weights", "head run: NaN Dense", "module type os.system"])
def test_code_terms_refuses_a_damaged_model_in_one_line(models, tmp_home, tmp_path, capsys, case):
    terms = tmp_path / "terms.txt"
    terms.write_text("fever\nasthma\n")
    argv = ["code", str(terms), "--source", str(models["root"] / "mini.obo"), "--model", str(models[case]), "--quiet"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and re.match(expected(case, models), err[len("error: "):])
    assert cached_rows(tmp_home) == 0


def test_non_finite_vectors_are_refused_where_they_are_produced():
    check_finite(np.ones((2, 3), np.float32), "m")
    for bad in (np.nan, np.inf, -np.inf):
        vectors = np.ones((4, 3), np.float32)
        vectors[1, 2] = bad
        with pytest.raises(ModelError, match="^m gave vectors with NaN or infinite values for 1 of 4 names"):
            check_finite(vectors, "m")


def test_a_missing_module_folder_is_blamed_only_when_one_is_missing():
    """minilm names a 2_Normalize folder it does not ship: never the reason a load failed."""
    from bioviz.models.encoders import _missing_module_folder

    assert _missing_module_folder(bundled_minilm_path()) is None


def test_a_page_given_a_damaged_model_shows_one_error_line(models, tmp_home, monkeypatch):
    share(monkeypatch, models["root"])
    model = models["pickle weights"]
    at = open_app("app_pages/3_Similarity_matrix.py", {"source": "mini.obo", "model_a": str(model)}).run()
    no_traceback(at)
    assert [e.value for e in at.error] == [md(f"cannot load model from {model.resolve()}: {DAMAGED}")]
    assert not at.get("plotly_chart")
    assert cached_rows(tmp_home) == 0
