"""trainer.cli_common: what ``python -m trainer train`` and ``pretrain`` share (exit codes, cancel, summary)."""

from __future__ import annotations

import json
import os
import signal

import pytest

from bioviz.errors import BiovizError
from trainer.cli_common import EXIT_BAD_INPUT, EXIT_CANCELLED, print_summary, refuse, run_cancellable
from trainer.events import Cancelled


@pytest.fixture
def own_signal_handlers():
    """Put pytest's SIGTERM/SIGINT handlers back: after a cancel, cancel_on_signals keeps its own until exit."""
    saved = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
    yield
    for sig, handler in saved.items():
        signal.signal(sig, handler)


def test_sigterm_cancels_the_work_with_130_and_one_cancel_event(capsys, own_signal_handlers):
    events = []

    def work(cancel):
        print("a library's progress bar")  # must not reach stdout
        os.kill(os.getpid(), signal.SIGTERM)
        assert cancel.is_set()
        raise Cancelled("pretraining interrupted; continue it with --resume")

    assert run_cancellable(work, events.append) == (EXIT_CANCELLED, None)
    assert events == [{"event": "error", "message": "pretraining interrupted; continue it with --resume",
                       "cancelled": True}]
    captured = capsys.readouterr()
    assert captured.out == "" and "progress bar" in captured.err


def test_the_cancel_message_can_be_the_commands_own(own_signal_handlers):
    events = []

    def work(cancel):
        raise Cancelled("training cancelled")

    assert run_cancellable(work, events.append, cancelled_message="cancelled")[0] == EXIT_CANCELLED
    assert events[-1]["message"] == "cancelled" and events[-1]["cancelled"] is True


def test_refused_input_is_one_event_and_exit_2_and_a_bug_is_reported_then_raised():
    events = []
    assert refuse(events.append, BiovizError("no source")) == EXIT_BAD_INPUT
    assert run_cancellable(lambda cancel: (_ for _ in ()).throw(BiovizError("bad level")), events.append) == (2, None)
    assert events == [{"event": "error", "message": "no source"}, {"event": "error", "message": "bad level"}]

    def bug(cancel):
        raise KeyError("x")

    with pytest.raises(KeyError):
        run_cancellable(bug, events.append)
    assert events[-1] == {"event": "error", "message": "KeyError: 'x'"}


def test_done_work_returns_its_summary_and_prints_it_as_json_or_lines(capsys):
    assert run_cancellable(lambda cancel: {"run": "runs/a"}, print) == (0, {"run": "runs/a"})
    summary = {"run": "runs/a", "metrics": {"mAP": 0.5}, "seconds": 3.0, "resumed_from_step": None}
    print_summary(summary, as_json=True)
    assert json.loads(capsys.readouterr().out) == summary
    print_summary(summary, as_json=False)
    assert capsys.readouterr().out.splitlines() == [
        "run: runs/a", 'metrics: {"mAP": 0.5}', "seconds: 3.0", "resumed_from_step: null"]
    print_summary(summary, as_json=False, keys=("seconds",))
    assert capsys.readouterr().out == "seconds: 3.0\n"
