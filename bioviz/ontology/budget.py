"""Memory and time budgets for parsing a user's source, so that no file can take the server down.

A source a user supplies (an OBO file, a table, a UMLS release; not a bundled source) is
parsed in a child process: a 275 KB file once took gigabytes and minutes, and an upload may
be 200 MB. The child limits its own address space (``RLIMIT_AS``) and CPU time
(``RLIMIT_CPU``, a backstop should the parent die), and the parent kills it when the
wall-clock budget runs out. Whatever goes wrong there, the caller gets one
:class:`~bioviz.errors.SourceError` line and the server process stays as it was.

The child is a fresh interpreter (``python -m bioviz.ontology.budget``), not a
``multiprocessing`` child: forking a multi-threaded server is unsafe, and the spawn and
fork-server methods re-run the caller's main script in the child, which a script without
an ``if __name__ == "__main__"`` guard cannot survive. Starting it costs about half a second,
once per source: the parsed form is cached. Requests and answers travel as
``multiprocessing.connection`` messages over the child's stdin and stdout.

Settings, read from the environment at each load:

``BIOVIZ_LOAD_MAX_SECONDS``
    Wall-clock seconds for one source (default 60).
``BIOVIZ_LOAD_SECONDS_PER_GB``
    Extra seconds per GiB of input (default 120): a UMLS release of several GB is read
    line by line in linear time and needs minutes, which a small file never does.
``BIOVIZ_LOAD_MAX_MEMORY_MB``
    Address space in MiB that parsing may add to the child once its libraries are imported
    (default 4096): the limit is set relative to what is mapped then (about 170 MiB), so the
    budget means the same wherever the libraries are larger.
"""

from __future__ import annotations

import importlib
import logging
import math
import os
import signal
import subprocess
import sys
import time
import traceback
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Callable

import bioviz
from bioviz import errors
from bioviz.errors import BiovizError, SourceError
from bioviz.settings import env_number

SECONDS_VARIABLE = "BIOVIZ_LOAD_MAX_SECONDS"
SECONDS_PER_GB_VARIABLE = "BIOVIZ_LOAD_SECONDS_PER_GB"
MEMORY_VARIABLE = "BIOVIZ_LOAD_MAX_MEMORY_MB"
DEFAULT_SECONDS = 60.0
DEFAULT_SECONDS_PER_GB = 120.0
DEFAULT_MEMORY_MB = 4096


@dataclass(frozen=True)
class Budget:
    """Limits for parsing one source.

    Attributes
    ----------
    seconds : float
        Wall-clock limit.
    memory_mb : int
        Address space the parse may add to the child process, in MiB.
    """

    seconds: float
    memory_mb: int

    @classmethod
    def from_env(cls, input_bytes: int = 0) -> "Budget":
        """The budget the environment sets for an input of ``input_bytes`` (see the module docstring).

        Raises
        ------
        SourceError
            If a setting is not a positive number.
        """
        seconds = env_number(SECONDS_VARIABLE, DEFAULT_SECONDS)
        per_gb = env_number(SECONDS_PER_GB_VARIABLE, DEFAULT_SECONDS_PER_GB, allow_zero=True)
        memory = env_number(MEMORY_VARIABLE, DEFAULT_MEMORY_MB)
        return cls(seconds + per_gb * input_bytes / 2**30, max(1, int(memory)))

    def describe(self) -> str:
        """``60 s / 4 GiB``: the budget as the error message states it."""
        memory = f"{self.memory_mb // 1024} GiB" if self.memory_mb % 1024 == 0 else f"{self.memory_mb} MiB"
        return f"{self.seconds:.3g} s / {memory}"


def exceeded(label: str, budget: Budget, what: str) -> SourceError:
    """The one-line error for a parse that ran out of its budget (``what``: time, memory, ...)."""
    return SourceError(
        f"{label} exceeded the {budget.describe()} budget for loading a source ({what}); use a smaller or "
        f"simpler source, or raise {SECONDS_VARIABLE} / {MEMORY_VARIABLE} on the server"
    )


def run_within_budget(function: Callable, args: tuple, budget: Budget, label: str, *,
                      progress: Callable[[float, str], None] | None = None):
    """``function(*args, progress=...)`` in a child process under ``budget``; returns its result.

    Parameters
    ----------
    function : callable
        A module-level function of an importable module (the child imports it by name). It
        gets a ``progress`` keyword: a ``progress(fraction, message)`` callable relayed to
        ``progress`` here, or None.
    args : tuple
        Its positional arguments (picklable; pass absolute paths).
    budget : Budget
    label : str
        Names the source in error messages (a file name, not a path).
    progress : callable, optional
        Receives the child's progress reports.

    Raises
    ------
    SourceError
        When the child runs out of time or memory or dies, and for the
        :class:`~bioviz.errors.BiovizError` the function raises (same class and message).
    RuntimeError
        For any other exception in the child (a bug), with the child's traceback.
    """
    module = function.__module__
    if module == "__main__":
        raise ValueError("run_within_budget needs a function of an importable module")
    environment = dict(os.environ)
    package_root = str(Path(bioviz.__file__).resolve().parents[1])  # importable wherever the caller runs
    environment["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, environment.get("PYTHONPATH")) if p)
    child = subprocess.Popen(
        # -B: no .pyc writes from a child that may run under a full disk or `ulimit -f`
        [sys.executable, "-B", "-m", "bioviz.ontology.budget"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL, env=environment,  # stderr: the command line promises one line
    )
    requests = Connection(os.dup(child.stdin.fileno()))
    answers = Connection(os.dup(child.stdout.fileno()))
    child.stdin.close()
    child.stdout.close()
    deadline = time.monotonic() + budget.seconds
    try:
        requests.send((module, function.__qualname__, args, budget, progress is not None))
        requests.close()
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not answers.poll(remaining):
                raise exceeded(label, budget, "out of time")
            try:
                message = answers.recv()
                if message[0] == "result":
                    return answers.recv_bytes() if message[1] == "bytes" else message[2]
            except (EOFError, OSError):
                break  # the child died without (all of) an answer
            _handle(message, label, budget, progress)
        try:
            code = child.wait(5)
        except subprocess.TimeoutExpired:
            code = None
        # Without an answer the child died: SIGKILL from the kernel's OOM killer, SIGXCPU
        # from RLIMIT_CPU, SIGSEGV/SIGABRT or an exit from C code whose allocation failed
        # under RLIMIT_AS. Memory is by far the likeliest cause; the reason says which.
        if code is not None and code < 0:
            reason = "out of CPU time" if code == -signal.SIGXCPU else f"killed by {signal.Signals(-code).name}"
        else:
            reason = f"its worker stopped with exit code {code}"
        raise exceeded(label, budget, reason)
    except BrokenPipeError:
        raise exceeded(label, budget, "its worker did not start") from None
    finally:
        if child.poll() is None:
            child.kill()
        child.wait()
        requests.close()
        answers.close()


def _handle(message: tuple, label: str, budget: Budget, progress) -> None:
    """Act on one message from the child other than its result: relay it, or raise its error."""
    kind = message[0]
    if kind == "progress":
        if progress is not None:
            progress(*message[1:])
    elif kind == "log":
        logging.getLogger(message[1]).log(message[2], "%s", message[3])
    elif kind == "memory":
        raise exceeded(label, budget, "out of memory")
    elif kind == "error":
        error_class = getattr(errors, message[1], None)
        if not (isinstance(error_class, type) and issubclass(error_class, BiovizError)):
            error_class = SourceError
        raise error_class(message[2])
    else:  # "bug"
        raise RuntimeError(f"loading {label} failed in its worker process:\n{message[1]}")


def _mapped_bytes() -> int:
    """Address space this process has mapped now (0 where ``/proc`` is missing)."""
    try:
        with open("/proc/self/statm") as handle:
            return int(handle.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def _limit(kind: int, value: int) -> None:
    import resource  # Unix only (none on Windows): called under _child_main's ImportError guard

    soft, hard = resource.getrlimit(kind)
    if hard != resource.RLIM_INFINITY:
        value = min(value, hard)
    resource.setrlimit(kind, (value, hard))


class _RelayHandler(logging.Handler):
    """Sends the child's log records to the parent, which logs them under its own settings."""

    def __init__(self, sender) -> None:
        super().__init__(logging.INFO)
        self.sender = sender

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self.sender.send(("log", record.name, record.levelno, record.getMessage()))
        except Exception:  # noqa: BLE001 - logging must never fail the parse
            pass


def _child_main() -> None:
    """The child: read one request, limit itself, run the function, send one answer."""
    # The answers go over the original stdout; fds 1 and 2 then point nowhere, so that no
    # print or dying message of a library can corrupt the stream or reach the user.
    answers = Connection(os.dup(1))
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.dup2(devnull, 2)
    os.close(devnull)
    logging.root.handlers[:] = [_RelayHandler(answers)]
    logging.root.setLevel(logging.INFO)
    try:
        with Connection(os.dup(0)) as requests:
            module, name, args, budget, wants_progress = requests.recv()
        function = importlib.import_module(module)
        for part in name.split("."):
            function = getattr(function, part)
    except BaseException:  # noqa: BLE001 - no request, or no such function: a bug of the caller
        _answer(answers, ("bug", traceback.format_exc()))
        return
    try:
        import resource  # Unix only: on Windows the ImportError below runs the parse without limits

        # Set once the libraries are imported: the budget is what parsing adds.
        _limit(resource.RLIMIT_AS, _mapped_bytes() + budget.memory_mb * 2**20)
        # CPU seconds never exceed wall seconds in this single-threaded child: a backstop
        # that ends it even when the parent is gone and cannot kill it.
        _limit(resource.RLIMIT_CPU, math.ceil(budget.seconds) + 5)
    except (ImportError, ValueError, OSError):
        pass  # no resource module (Windows): the wall-clock limit still holds
    try:
        def report(fraction: float, message: str) -> None:
            answers.send(("progress", fraction, message))

        result = function(*args, progress=report if wants_progress else None)
    except MemoryError:
        _answer(answers, ("memory",))
    except BiovizError as error:
        _answer(answers, ("error", type(error).__name__, " ".join(str(error).split())))
    except BaseException:  # noqa: BLE001 - a bug: the parent raises it with this traceback
        _answer(answers, ("bug", traceback.format_exc()))
    else:
        try:
            if isinstance(result, bytes):
                answers.send(("result", "bytes"))
                answers.send_bytes(result)  # not pickled: no second copy of a large result
            else:
                answers.send(("result", "object", result))
        except BaseException:  # noqa: BLE001 - half an answer: end now, the parent sees EOF
            os._exit(70)
    finally:
        answers.close()


def _answer(answers, message: tuple) -> None:
    try:
        answers.send(message)
    except (OSError, MemoryError):
        pass  # the parent is gone, or not even this fits: it reports the exit instead


if __name__ == "__main__":
    _child_main()
