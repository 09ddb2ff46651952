"""Crash points: named places where a test can make the process die on the spot.

In the style of SQLite's crash tests, the job queue, the job runner and the run export
call :func:`crash_point` at each step whose interruption leaves a different state on disk
(after spawning a runner, before and after each COMMIT, before and after renaming a run
directory into place). With ``BIOVIZ_CRASH_AT=<name>`` in its environment, a process that
reaches the point named so ends at once with :data:`CRASH_EXIT_CODE`, through
``os._exit``: no ``finally`` block, no ``atexit`` handler, no flushing, as if it had been
killed there. Child processes inherit the variable, so a test can aim at a runner or a
trainer started by the queue. Unset (always, outside tests), a crash point is one
dictionary look-up.

docs/jobs.md lists the points and what the queue does after each crash.
"""

from __future__ import annotations

import os

CRASH_ENV = "BIOVIZ_CRASH_AT"
CRASH_EXIT_CODE = 86  # unusual on purpose: a test can tell an injected crash from a real exit


def crash_point(name: str) -> None:
    """End this process at once if ``BIOVIZ_CRASH_AT`` names this point.

    Parameters
    ----------
    name : str
        The point, ``<where>:<step>`` (``queue:after-spawn``, ``export:before-rename`` ...).
    """
    if os.environ.get(CRASH_ENV) == name:
        os._exit(CRASH_EXIT_CODE)
