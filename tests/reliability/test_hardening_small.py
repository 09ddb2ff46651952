"""Issue 25, item 9: files under the user's umask, one cancel grace period, uploads bounded where received,
bounded "no such column" messages."""

from __future__ import annotations

import inspect
import os
import stat

import pytest
from streamlit.runtime.uploaded_file_manager import UploadedFile

from bioviz.errors import BiovizError, SourceError
from bioviz.paths import write_bytes_atomic, write_text_atomic
from bioviz.search import term_coding
from bioviz.search.term_coding import read_term_table, terms_from_column
from bioviz.uploads import check_upload_size
from tests.pages.routed_app import app_on
from trainer.cli import main as trainer_main
from trainer.jobs import cli as jobs_cli
from trainer.jobs.executor import CANCEL_GRACE_S
from trainer.jobs.queue import Worker


# --- (a) exported files and pair files keep the user's umask --------------------------------------

@pytest.mark.parametrize("umask", [0o022, 0o002, 0o077])
def test_atomic_writes_create_files_under_the_users_umask(tmp_path, umask):
    old = os.umask(umask)
    try:
        write_text_atomic(tmp_path / "coded.csv", "term\nasthma\n")
        write_bytes_atomic(tmp_path / "pairs.json.gz", b"\x1f\x8b")
    finally:
        os.umask(old)
    for name in ("coded.csv", "pairs.json.gz"):
        assert stat.S_IMODE((tmp_path / name).stat().st_mode) == 0o666 & ~umask, name
    assert sorted(p.name for p in tmp_path.iterdir()) == ["coded.csv", "pairs.json.gz"]  # no temporary left


# --- (b) one cancel grace period ----------------------------------------------------------------

def test_jobs_cancel_waits_the_one_grace_period(monkeypatch, capsys):
    asked = []

    class Recorder:
        def cancel(self, job_id, grace_s, wait=True):
            asked.append((job_id, grace_s))
            raise BiovizError("recorded (test)")

    monkeypatch.setattr(jobs_cli, "Worker", Recorder)
    assert trainer_main(["jobs", "cancel", "job-1"]) == 2
    assert asked == [("job-1", CANCEL_GRACE_S)]
    assert inspect.signature(Worker.cancel).parameters["grace_s"].default == CANCEL_GRACE_S
    trainer_main(["jobs", "cancel", "job-1", "--grace", "0"])
    assert asked[-1] == ("job-1", 0.0)


# --- (c) uploads bounded where they are received --------------------------------------------------

def test_check_upload_size_refuses_before_reading():
    check_upload_size("terms.csv", 10, max_bytes=10)
    with pytest.raises(SourceError, match=r"terms.csv is 2.0 MiB; the limit is 1 MiB"):
        check_upload_size("terms.csv", 2 * 2**20, max_bytes=2**20)


@pytest.fixture
def reads(monkeypatch):
    """Every ``getvalue()`` of an uploaded file, recorded (by file name)."""
    seen = []
    getvalue = UploadedFile.getvalue

    def recording(self):
        seen.append(self.name)
        return getvalue(self)

    monkeypatch.setattr(UploadedFile, "getvalue", recording)
    return seen


def test_code_terms_refuses_a_scripted_oversized_upload_before_reading_it(shared_home, data_dir, monkeypatch, reads):
    # minilm: its label needs no weights and no char-tfidf fit, and nothing is coded here
    monkeypatch.setenv("BIOVIZ_HOME", str(shared_home))
    monkeypatch.setenv("BIOVIZ_DATA_DIRS", str(data_dir))
    monkeypatch.setattr(term_coding, "MAX_TABLE_BYTES", 2 * 2**20)  # the page reads the limit on every run
    at = app_on("app_pages/7_Code_terms.py", {"source": str(data_dir / "mini.obo"), "depth": "1",
                                              "model_a": "minilm", "two": "0", "input": "upload"},
                timeout=240).run()
    uploader = at.file_uploader(key="ct_file")
    assert uploader.proto.max_upload_size_mb == 2
    # a script, not the browser: the uploader's own limit is not applied on the way in
    uploader.set_value(("big.csv", b"term\n" + b"asthma\n" * (3 * 2**20 // 7), "text/csv")).run()
    assert not at.exception
    assert [e.value for e in at.error] == ["big.csv is 3.0 MiB; the limit is 2 MiB"]
    assert reads == []


def test_the_benchmark_uploader_has_its_own_limit(tmp_home, fake_eval_models, data_dir, monkeypatch, reads):
    monkeypatch.setenv("BIOVIZ_DATA_DIRS", str(data_dir))
    at = app_on("app_pages/6_Evaluation.py", {"source": str(data_dir / "mini.obo"), "depth": "1"},
                timeout=120).run()
    uploader = at.file_uploader(key="_eval_upload")
    assert uploader.proto.max_upload_size_mb == 20  # bioviz.evaluation.benchmarks.MAX_BYTES, not the server's 200
    uploader.set_value(("big.tsv", b"a\tb\t1\n" * (21 * 2**20 // 6), "text/tab-separated-values")).run()
    assert not at.exception
    assert any("a benchmark file is at most 20 MiB" in e.value for e in at.error)
    assert reads == []


# --- (d) a huge header does not become a huge message --------------------------------------------

def test_no_such_column_quotes_short_prefixes_of_a_huge_header():
    header = ",".join(["x" * 3 * 2**20, "y" * 100] + [f"c{i}" for i in range(200)])
    table = read_term_table((header + "\n" + ",".join(["1"] * 202) + "\n").encode(), "visits.csv")
    with pytest.raises(BiovizError) as caught:
        terms_from_column(table, "z" * 10_000)
    message = str(caught.value)
    assert len(message) < 400 and "\n" not in message
    assert message.startswith("no column 'zzzzzzzzzz") and "…" in message and "more)" in message
    assert "'xxxxxxxxxx" in message and "x" * 100 not in message
