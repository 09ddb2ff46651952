"""The server's upload memory is bounded per session and per server, and released when a session has gone.

Streamlit's own manager kept every PUT (20 x 50 MiB from one scripted session, all held) and
never freed the files of a session its reconnect store forgot. These tests drive the manager
the upload route calls, with the route's own request objects' data.
"""

from __future__ import annotations

import pytest
from starlette.exceptions import HTTPException
from streamlit.runtime.memory_uploaded_file_manager import MemoryUploadedFileManager
from streamlit.runtime.uploaded_file_manager import UploadedFileRec

from ui import upload_memory

MiB = 2**20


@pytest.fixture
def manager(monkeypatch):
    """Streamlit's manager, bounded as the router bounds it: 3 files and 3 MiB a session, 5 MiB a server."""
    monkeypatch.setenv("BIOVIZ_UPLOAD_SESSION_FILES", "3")
    monkeypatch.setenv("BIOVIZ_UPLOAD_SESSION_MB", "3")
    monkeypatch.setenv("BIOVIZ_UPLOAD_MEMORY_MB", "5")
    monkeypatch.setattr(upload_memory, "_grace_s", lambda: 60.0)
    monkeypatch.setattr(upload_memory.threading.Thread, "start", lambda self: None)  # no daemon in a test
    bounded = upload_memory.bound(MemoryUploadedFileManager("/_stcore/upload_file"))
    bounded.active = {"a", "b", "c"}
    bounded._is_active = bounded.active.__contains__
    return bounded


def put(manager, session: str, file_id: str, mib: float) -> None:
    manager.add_file(session, UploadedFileRec(file_id=file_id, name="x.obo", type="text/plain",
                                              data=b"x" * int(mib * MiB)))


def held(manager, session=None) -> int:
    stores = [manager.file_storage.get(session, {})] if session else manager.file_storage.values()
    return sum(len(f.data) for store in stores for f in store.values())


def test_a_flood_from_one_session_keeps_within_its_bounds(manager):
    for i in range(20):  # the probe's flood, scaled down: 20 files of 1 MiB under invented ids
        put(manager, "a", f"id{i}", 1)
    assert held(manager, "a") <= 3 * MiB and len(manager.file_storage["a"]) <= 3
    assert list(manager.file_storage["a"]) == ["id17", "id18", "id19"]  # the newest kept, the oldest released
    assert manager._total_bytes == held(manager) and manager._file_count == 3


def test_a_file_over_a_sessions_bound_is_refused_and_nothing_kept(manager):
    with pytest.raises(HTTPException) as refused:
        put(manager, "a", "big", 3.5)
    assert refused.value.status_code == 413 and held(manager) == 0


def test_the_server_bound_refuses_once_every_session_is_full(manager):
    put(manager, "a", "1", 2.5)
    put(manager, "b", "1", 2.5)
    with pytest.raises(HTTPException) as refused:
        put(manager, "c", "1", 1)
    assert refused.value.status_code == 413 and held(manager) == 5 * MiB and manager.refused == 1
    manager.remove_session_files("a")  # the session ends: Streamlit's release, counted
    put(manager, "c", "1", 1)
    assert held(manager) == int(3.5 * MiB) == manager._total_bytes


def test_a_replaced_file_counts_once(manager):
    put(manager, "a", "same", 2)
    put(manager, "a", "same", 2)
    assert held(manager) == 2 * MiB == manager._total_bytes and manager._file_count == 1


def test_the_files_of_a_session_that_has_gone_are_released_after_the_grace(manager, monkeypatch):
    put(manager, "a", "1", 1)
    manager.active.discard("a")  # disconnected; Streamlit's reconnect store forgets it without a shutdown
    clock = iter([1000.0, 1030.0, 1061.0])
    monkeypatch.setattr(upload_memory.time, "monotonic", lambda: next(clock))
    assert manager.sweep() == 0 and held(manager) == MiB  # first seen gone: it may still reconnect
    assert manager.sweep() == 0
    assert manager.sweep() == 1 and held(manager) == 0 and manager._total_bytes == 0 == manager._file_count


def test_binding_is_idempotent_and_keeps_what_is_held(manager):
    put(manager, "a", "1", 1)
    assert upload_memory.bound(manager) is manager and held(manager) == MiB
