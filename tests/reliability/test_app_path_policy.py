"""The app opens server paths only inside the data folders it shares, and a refusal reveals nothing.

A link's ``source`` or ``model_a``/``model_b``, the home page's server path and a typed base
model are refused with ONE message, whatever lies at the path (a system file, a system
folder, /proc, nothing at all), after ``..`` and symlinks are resolved and before any loader
looks at the disk. Inside ``BIOVIZ_DATA_DIRS`` paths work; the command line is not
restricted.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from bioviz import server_paths
from bioviz.errors import ModelError
from bioviz.models.model_spec import ModelSpec
from bioviz.server_paths import UnsharedPathError, refusal, shared_path, shared_source
from test_app_support import DATA, ROOT, no_traceback, open_app, share
from ui.markdown import md

TAIL = "is not in a data folder this server shares (BIOVIZ_DATA_DIRS)"


@pytest.fixture
def disk(tmp_path, monkeypatch):
    """A shared folder ``data`` (a table, symlinks in and out) beside an unshared ``private`` one."""
    home, data, private = tmp_path / "home", tmp_path / "data", tmp_path / "private"
    for folder in (home, data, private):
        folder.mkdir()
    shutil.copy(DATA / "mini.obo", data / "mini.obo")
    (private / "secret.tsv").write_text("concept_id\tname\tparent_id\nS\tsecret\t\n")
    (data / "inside.obo").symlink_to(data / "mini.obo")
    (data / "leak.tsv").symlink_to(private / "secret.tsv")
    (data / "etc").symlink_to("/etc")
    monkeypatch.setenv("BIOVIZ_HOME", str(home))
    share(monkeypatch, data)
    return tmp_path


def refused_texts(disk) -> list[str]:
    """Paths outside the data folder: existing or not, files or folders, spelled every way."""
    data = disk / "data"
    return ["/etc/passwd", "/etc/no-such-file", "/etc", "/proc/self", "/proc/self/environ", "/no/such/dir/x.obo",
            str(disk / "private" / "secret.tsv"), str(disk / "private" / "missing.tsv"),
            f"{data}/../private/secret.tsv", "../private/secret.tsv", "../../../../etc/passwd",
            "leak.tsv", str(data / "leak.tsv"), "etc/passwd", str(data / "etc"), "~/.bashrc", "", "   ",
            "/etc/passwd\0.obo", "x" * 5000]


def test_every_refusal_is_the_same_message_whatever_lies_at_the_path(disk):
    for text in refused_texts(disk):
        with pytest.raises(UnsharedPathError) as caught:
            shared_source(text)
        message = str(caught.value)
        assert message == str(refusal(text)) and message.endswith(TAIL), text
        assert "\n" not in message and len(message) < 300


def test_paths_inside_the_data_folder_resolve_to_their_real_place(disk):
    data = disk / "data"
    assert shared_source(str(data / "mini.obo")) == str(data / "mini.obo")
    assert shared_source("mini.obo") == str(data / "mini.obo"), "relative paths are read inside the data folders"
    assert shared_source("inside.obo") == str(data / "mini.obo"), "a symlink staying inside is followed"
    assert shared_source(f"{data}/sub/../mini.obo") == str(data / "mini.obo")
    assert shared_source(str(data / "not-yet.tsv")) == str(data / "not-yet.tsv"), "missing inside: the loader says so"
    assert shared_source("icd10") == "icd10" and shared_source(" hpo ") == "hpo"


def test_uploads_are_shared_and_nothing_else_by_default(tmp_path, monkeypatch):
    monkeypatch.setenv("BIOVIZ_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("BIOVIZ_DATA_DIRS", raising=False)
    assert server_paths.data_dirs() == ((tmp_path / "home" / "uploads").resolve(),)
    upload = server_paths.data_dirs()[0] / "x.obo"
    assert shared_path(str(upload)) == upload
    with pytest.raises(UnsharedPathError):
        shared_source(str(DATA / "mini.obo"))


def test_a_symlinked_data_folder_still_shares_its_files(tmp_path, monkeypatch):
    real = tmp_path / "real"
    real.mkdir()
    (real / "a.obo").write_text("")
    (tmp_path / "link").symlink_to(real)
    monkeypatch.setenv("BIOVIZ_HOME", str(tmp_path / "home"))
    share(monkeypatch, tmp_path / "link")
    assert shared_source(str(tmp_path / "link" / "a.obo")) == str(real / "a.obo")


def test_model_paths_follow_the_policy_and_hub_ids_stay_hub_ids(disk, monkeypatch):
    runs = disk / "home" / "runs" / "r1"
    runs.mkdir(parents=True)
    (runs / "config.json").write_text("{}")  # a transformers checkpoint, as far as parsing goes
    model = ModelSpec.shared(str(runs))
    assert (model.spec, model.kind, model.path) == (str(runs), "directory", runs)
    assert model.to_query() == "r1" and ModelSpec.from_query("r1") == model, "a link carries a run by its id"
    assert ModelSpec.shared("minilm").kind == "bundled"
    assert ModelSpec.shared("someone/some-model") == ModelSpec("someone/some-model", "hub", None, "someone/some-model")
    with pytest.raises(ModelError, match="^model directory .*biolord not found$"):  # relative: inside the data folder
        ModelSpec.shared("./biolord")
    for text in ("/etc", "/no/such/model", "../private", str(disk / "private"), "~", "./etc/ssl"):
        with pytest.raises(UnsharedPathError) as caught:
            ModelSpec.shared(text)
        assert str(caught.value) == str(refusal(text))
    monkeypatch.chdir(ROOT)  # an org/name that is a folder of the server's working directory is not a hub id
    with pytest.raises(UnsharedPathError):
        ModelSpec.shared("tests/data")


@pytest.fixture
def loader_calls(monkeypatch):
    """Every path the source loaders were asked about (the policy must come first)."""
    from bioviz.ontology import sources
    from ui import state

    seen = []
    real = sources.source_kind

    def recording(spec):
        seen.append(spec)
        return real(spec)

    monkeypatch.setattr(sources, "source_kind", recording)
    monkeypatch.setattr(state, "source_kind", recording)
    return seen


def test_a_link_to_any_server_path_shows_one_message_and_touches_nothing(disk, loader_calls):
    texts = ["/etc/passwd", "/etc", "/proc/self", "/no/such/file.tsv", f"{disk}/data/../private/secret.tsv",
             "leak.tsv", "../private/secret.tsv"]
    for text in texts:
        at = open_app(None, {"source": text}).run()
        no_traceback(at)
        assert [e.value for e in at.error] == [md(refusal(text))], text
        assert not at.metric and not at.dataframe, "nothing of the file is shown"
    assert not [spec for spec in loader_calls if "private" in spec or spec.startswith(("/etc", "/proc", "/no"))]


def test_a_link_inside_the_data_folder_opens(disk):
    at = open_app(None, {"source": "mini.obo"}).run()
    no_traceback(at)
    assert not at.error and at.metric
    assert at.query_params["source"] in ("mini.obo", ["mini.obo"]), "the path inside the data folder, not the server's"


def test_the_home_pages_server_path_follows_the_policy(disk):
    at = open_app(None).run()
    for text, refused in (("/etc/passwd", True), ("/etc", True), ("/no/such.obo", True), ("mini.obo", False)):
        at.text_input(key="server_path").set_value(text).run()
        at.button(key="use_path").click().run()
        no_traceback(at)
        if refused:
            assert [e.value for e in at.error] == [md(refusal(text))], text
        else:
            assert not at.error and at.metric


def test_model_paths_from_a_link_are_refused_with_the_same_message(disk):
    for text in ("/etc", "/no/such/model", str(disk / "private"), "../private"):
        at = open_app("app_pages/3_Similarity_matrix.py", {"source": "mini.obo", "model_b": text}).run()
        no_traceback(at)
        assert [e.value for e in at.error] == [md(refusal(text))], text
        assert not at.get("plotly_chart"), "no model was loaded"


def test_a_typed_base_model_outside_the_folders_is_refused_before_a_job_exists(disk):
    from trainer.jobs.queue import Worker

    at = open_app("app_pages/1_Train.py", {"source": "mini.obo"}).run()
    at.selectbox(key="train_base").set_value("other…").run()
    at.text_input(key="train_base_other").set_value("/etc").run()
    next(b for b in at.button if b.label == "Launch training").click().run()
    no_traceback(at)
    assert md(refusal("/etc")) in [e.value for e in at.error]
    assert Worker().reconcile() == [], "no job was submitted"


def test_the_command_line_still_reads_any_path(tmp_path):
    env = {**os.environ, "BIOVIZ_HOME": str(tmp_path / "home"), "HF_HUB_OFFLINE": "1"}
    env.pop("BIOVIZ_DATA_DIRS", None)
    done = subprocess.run([sys.executable, "-m", "bioviz", "levels", str(DATA / "mini.obo"), "--depth", "1"],
                          cwd=tmp_path, env={**env, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert "data folder" not in done.stdout + done.stderr
