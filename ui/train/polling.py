"""When the Train page's job panel refreshes itself, and when the whole page must.

The job panel is an ``st.fragment`` that re-runs on a timer while something can change
(a job runs, starts or waits); with every job finished it stays still, so the page goes
idle instead of redrawing its charts every two seconds. When a job the panel saw active has
finished, or a job it saw is gone (deleted, perhaps with its run), the rest of the page (the
run list, the form's run pickers) is out of date: the page re-runs as a whole once.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from trainer.jobs.store import ACTIVE, SUCCEEDED, Job

POLL_S = 2.0  # seconds between two looks at the jobs while one is active


def poll_interval(jobs: Iterable[Job]) -> float | None:
    """Seconds between refreshes of the job panel: :data:`POLL_S` while a job is queued,
    starting or running; None (no timer) when every job has finished or there is none.

    >>> poll_interval([]) is None
    True
    """
    return POLL_S if any(job.status in ACTIVE for job in jobs) else None


def newly_finished(previous: Mapping[str, str] | None, jobs: Iterable[Job]) -> list[str]:
    """Ids of jobs that were active at the ``previous`` look (``id -> status``) and have finished since.

    Parameters
    ----------
    previous : mapping or None
        The statuses the panel saw last time (None: it has not looked yet, nothing changed).
    jobs : iterable of Job
        The jobs now.
    """
    if not previous:
        return []
    return [job.id for job in jobs if job.finished and previous.get(job.id) in ACTIVE]


def page_out_of_date(previous: Mapping[str, str] | None, jobs: Iterable[Job]) -> bool:
    """Whether the parts of the page outside the job panel need drawing again since the ``previous`` look.

    True when a job succeeded meanwhile (:func:`newly_finished`: its run joins the run list)
    or a job seen then is gone (deleted, its run perhaps with it). A job cancelled, failed or
    interrupted leaves no run, so the rest of the page is still right: no whole-page rerun
    (a rerun of the app from inside the fragment, right after the fragment's own Cancel
    callback, left a stale copy of the job picker in chromium). A new job alone is not a
    reason either: the page's own launch already re-ran the whole page.
    """
    jobs = list(jobs)
    if not previous:
        return False
    succeeded = {job.id for job in jobs if job.status == SUCCEEDED}
    return bool(set(newly_finished(previous, jobs)) & succeeded) or bool(set(previous) - {job.id for job in jobs})
