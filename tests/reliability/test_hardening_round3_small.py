"""The smaller findings of issue 32's probe (finding 9), one test each."""

from __future__ import annotations

import json
import os
import stat
import tempfile

from bioviz.models.runs import list_runs, runs_dir
from bioviz.paths import current_umask, share_tree


def test_a_run_folder_is_shared_as_the_umask_says_not_0700(tmp_path):
    """mkdtemp's 0700 folder and a library's 0600 file become 0755/0644 under umask 022 (docs/security.md)."""
    old = os.umask(0o022)
    try:
        assert current_umask() == 0o022
        partial = tempfile.mkdtemp(dir=tmp_path)
        weights = os.path.join(partial, "model.safetensors")
        os.close(os.open(weights, os.O_CREAT | os.O_WRONLY, 0o600))
        share_tree(partial)
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(partial).st_mode) == 0o755
    assert stat.S_IMODE(os.stat(weights).st_mode) == 0o644


def test_a_run_that_links_outside_the_runs_folder_is_not_offered(tmp_home, tmp_path):
    outside = tmp_path / "elsewhere" / "stolen"
    outside.mkdir(parents=True)
    (outside / "run.json").write_text(json.dumps({"config": {}, "metrics": {}}))
    (runs_dir() / "stolen").symlink_to(outside)
    assert [run.path.name for run in list_runs(include_damaged=True)] == []


def test_an_obo_with_a_duplicate_term_id_is_refused_in_one_line(tmp_path):
    """obonet kept the last stanza of an id without a word; now the file is refused, naming both lines."""
    import pytest

    from bioviz.errors import SourceError
    from bioviz.ontology.obo import load_obo

    obo = tmp_path / "dup.obo"
    obo.write_text("format-version: 1.2\n\n[Term]\nid: X:1\nname: asthma\n\n[Term]\nid: X:1\nname: gout\n")
    with pytest.raises(SourceError, match=r"the term id 'X:1' has two \[Term\] stanzas \(lines 4 and 8\)"):
        load_obo(obo)
