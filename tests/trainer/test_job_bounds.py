"""A bounded job queue and bounded hyper-parameters (issue 32, finding 6).

Before: 200 submissions were accepted in 9 s, and ``--hidden 50000000 --epochs 1000000000``
was a valid job.
"""

from __future__ import annotations

import pytest

from bioviz.errors import BiovizError
from trainer.config import TrainConfig, validate
from trainer.jobs.queue import Worker, check_queue_room
from trainer.jobs.store import QUEUED, JobError

STANDIN = "tests.trainer.standin_trainer"


@pytest.mark.parametrize("field, value", [("hidden", 50_000_000), ("epochs", 1_000_000_000), ("batch_size", 10**7),
                                          ("patience", 10**9), ("lr", 5.0), ("depth", 10_000)])
def test_hyper_parameters_past_their_range_are_refused_in_one_line(field, value):
    with pytest.raises(BiovizError) as refused:
        validate(TrainConfig(source="icd10", **{field: value}))
    assert field in str(refused.value) and "\n" not in str(refused.value)


def test_the_queue_refuses_past_its_bound(tmp_home, monkeypatch):
    monkeypatch.setenv("BIOVIZ_MAX_QUEUED_JOBS", "2")
    worker = Worker(module=STANDIN, slots={"cpu": 0, "cuda": 0})  # no slot: every job waits
    config = {"source": "icd10", "encoder": "residual"}
    for _ in range(2):
        worker.submit(config, device="cpu", validate=False)
    with pytest.raises(JobError, match="2 jobs are already waiting.*BIOVIZ_MAX_QUEUED_JOBS"):
        worker.submit(config, device="cpu", validate=False)
    assert len(worker.store.list((QUEUED,))) == 2


def test_the_default_bound(monkeypatch):
    monkeypatch.delenv("BIOVIZ_MAX_QUEUED_JOBS", raising=False)
    check_queue_room(19)
    with pytest.raises(JobError):
        check_queue_room(20)
