"""Bounded server memory for uploads: per session (file ids, bytes), per server, released when a session ends.

Streamlit keeps every uploaded file's bytes in the server process (``MemoryUploadedFileManager``)
until the session that sent it shuts down, with no bound but the size of each file: a scripted
client (``PUT /_stcore/upload_file/<session>/<any id>``, ids it invents) made the server hold
1 GiB in 6 s, and a disconnected session's files were never freed when Streamlit forgot the
session (its reconnect store drops an expired session without shutting it down). This module
turns the server's manager into a :class:`BoundedUploadedFileManager`:

* a session holds at most ``session_files`` file ids and ``session_bytes`` bytes; a new file past
  either releases that session's oldest files (a stale upload of a widget no longer shown);
* all sessions together hold at most ``server_bytes``; past it the upload is refused with HTTP
  413 and nothing is kept;
* the files of a session that has had no connection for ``server.disconnectedSessionTTL`` are
  released, checked on every upload and every :data:`SWEEP_S` seconds by a daemon thread.

The bounds are :func:`bioviz.uploads.upload_memory_limits` (environment variables, docs/security.md).
:func:`install` applies them to the running server (called by the router on every run: the first
run converts the manager); ``python -m ui.serve`` applies them before the server accepts a
connection, closing the window before the first page view.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from starlette.exceptions import HTTPException
from streamlit import config, runtime
from streamlit.runtime.memory_uploaded_file_manager import MemoryUploadedFileManager
from streamlit.runtime.uploaded_file_manager import UploadedFileRec

from bioviz.uploads import UploadMemoryLimits, upload_memory_limits

logger = logging.getLogger(__name__)

SWEEP_S = 15.0  # how often the daemon releases the files of sessions that have gone


def _session_is_active(session_id: str) -> bool:
    """Whether the running server has a live connection for ``session_id`` (False without a runtime)."""
    return runtime.exists() and runtime.get_instance().is_active_session(session_id)


def _grace_s() -> float:
    """How long a disconnected session may come back and find its files: Streamlit's own reconnect TTL."""
    return float(config.get_option("server.disconnectedSessionTTL"))


class BoundedUploadedFileManager(MemoryUploadedFileManager):
    """Streamlit's in-memory upload store with the bounds of this module; safe from any thread."""

    def __init__(self, upload_endpoint: str) -> None:
        super().__init__(upload_endpoint)
        self._init_bounds()

    def _init_bounds(self, is_active: Callable[[str], bool] = _session_is_active) -> None:
        """The state the bounds need (also called on a manager whose class :func:`install` changed)."""
        self._is_active = is_active
        self._gone_since: dict[str, float] = {}  # session id -> when it was first seen without a connection
        self.refused = 0  # uploads refused for the server's bound, for logs and tests
        self._sweeping = False

    def add_file(self, session_id: str, file: UploadedFileRec) -> None:
        """Keep ``file`` for ``session_id`` within the bounds.

        Raises
        ------
        starlette.exceptions.HTTPException
            413 when the file alone is over the session's bound, or the server's uploads
            would exceed theirs even after releasing the files of sessions that have gone.
        """
        limits = upload_memory_limits()
        size = len(file.data)
        if size > limits.session_bytes:
            raise HTTPException(status_code=413, detail="File too large for one session's uploads")
        with self._lock:
            self._release_gone(time.monotonic())
            self._pop(session_id, file.file_id)  # a replaced file counts once
            self._release_oldest(session_id, size, limits)
            if self._total_bytes + size > limits.server_bytes:
                self.refused += 1
                logger.warning("upload refused: the server's uploads hold %d MiB (BIOVIZ_UPLOAD_MEMORY_MB)",
                               self._total_bytes // 2**20)
                raise HTTPException(status_code=413, detail="The server holds too many uploads; try again later")
            self.file_storage[session_id][file.file_id] = file
            self._total_bytes += size
            self._file_count += 1

    def _pop(self, session_id: str, file_id: str) -> None:
        """Forget one file (lock held); the session's entry goes with its last file."""
        own = self.file_storage.get(session_id)
        if own is None or file_id not in own:
            return
        self._total_bytes -= len(own.pop(file_id).data)
        self._file_count -= 1
        if not own:
            del self.file_storage[session_id]

    def _release_oldest(self, session_id: str, incoming: int, limits: UploadMemoryLimits) -> None:
        """Release the session's oldest files until one more of ``incoming`` bytes fits its bounds (lock held)."""
        own = self.file_storage.get(session_id, {})
        while own and (len(own) + 1 > limits.session_files
                       or sum(len(f.data) for f in own.values()) + incoming > limits.session_bytes):
            self._pop(session_id, next(iter(own)))  # dicts keep insertion order: the first is the oldest

    def _release_gone(self, now: float) -> int:
        """Release the files of sessions without a connection for longer than the grace (lock held).

        Returns the number of sessions released.
        """
        grace, released = _grace_s(), 0
        for session_id in list(self.file_storage):
            if self._is_active(session_id):
                self._gone_since.pop(session_id, None)
                continue
            since = self._gone_since.setdefault(session_id, now)
            if now - since >= grace:
                for file_id in list(self.file_storage.get(session_id, {})):
                    self._pop(session_id, file_id)
                self._gone_since.pop(session_id, None)
                released += 1
        for session_id in list(self._gone_since):  # ended sessions Streamlit released itself
            if session_id not in self.file_storage:
                del self._gone_since[session_id]
        return released

    def sweep(self) -> int:
        """Release the files of sessions that have gone (see :meth:`_release_gone`); the daemon's step."""
        with self._lock:
            return self._release_gone(time.monotonic())

    def remove_session_files(self, session_id: str) -> None:
        """Remove every file of a session that ended (Streamlit's own release)."""
        super().remove_session_files(session_id)
        with self._lock:
            self._gone_since.pop(session_id, None)


def _sweep_forever(manager: BoundedUploadedFileManager) -> None:
    """The daemon: release gone sessions' files every :data:`SWEEP_S` seconds, whoever uploads."""
    while True:
        time.sleep(SWEEP_S)
        try:
            manager.sweep()
        except Exception:  # a sweep that fails must not end the sweeping: logged, tried again
            logger.exception("releasing the uploads of ended sessions failed")


_install_lock = threading.Lock()


def bound(manager: MemoryUploadedFileManager) -> BoundedUploadedFileManager:
    """Give ``manager`` (the server's, already shared with its upload routes) the bounds, in place; idempotent.

    The upload routes hold the manager object itself, so it is converted rather than
    replaced: its class becomes :class:`BoundedUploadedFileManager` (a subclass adding state
    only), files it already holds are kept, and the next upload and sweep bring it within the bounds.
    """
    with _install_lock:
        if not isinstance(manager, BoundedUploadedFileManager):
            manager.__class__ = BoundedUploadedFileManager
            manager._init_bounds()
        if not manager._sweeping:  # one daemon per manager, also for one the launcher created bounded
            manager._sweeping = True
            threading.Thread(target=_sweep_forever, args=(manager,), name="bioviz-upload-release",
                             daemon=True).start()
        return manager


def install() -> BoundedUploadedFileManager | None:
    """Bound the running server's upload manager (None outside a server, e.g. under AppTest)."""
    if not runtime.exists():
        return None
    manager = runtime.get_instance().uploaded_file_mgr
    if not isinstance(manager, MemoryUploadedFileManager):  # a manager of another kind: left as it is
        return None
    return bound(manager)
