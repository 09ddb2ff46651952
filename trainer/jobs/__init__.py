"""The job queue: the job store, the executor that runs jobs, and its command line."""
