"""The Home page's vectors upload says a disk's or memory's refusal in one line (issue 41, finding 7).

It caught only :class:`~bioviz.errors.BiovizError`: a full disk while storing or converting an
upload escaped the callback as a traceback.
"""

import errno
import os
from types import SimpleNamespace

import pytest

from ui import vectors_upload


@pytest.mark.parametrize("error, note", [
    (OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), "/home/uploads/x.npz"),
     "cannot store or read these vectors (x.npz): No space left on device"),
    (MemoryError(), "not enough memory to read these vectors"),
])
def test_a_disk_or_memory_refusal_is_one_note(monkeypatch, error, note):
    session = {"_vectors_path": "/data/v.npz"}
    monkeypatch.setattr(vectors_upload, "st", SimpleNamespace(session_state=session))

    def refuse(text):
        raise error

    monkeypatch.setattr(vectors_upload, "_use", refuse)
    vectors_upload.use_vectors_path()
    assert session[vectors_upload.NOTE] == ("error", note)
