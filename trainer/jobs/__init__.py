"""Background training jobs: :mod:`~trainer.jobs.store` (the SQLite job table),
:mod:`~trainer.jobs.executor` (what starts and stops processes), :mod:`~trainer.jobs.progress`
(progress events, stage, ETA, table rows), :mod:`~trainer.jobs.queue` (submit, reconcile,
cancel, delete, slots), :mod:`~trainer.jobs.runner` (one job's process) and
:mod:`~trainer.jobs.cli` (``python -m trainer jobs``)."""
