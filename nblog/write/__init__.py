"""The write path: ``init``, launch identity, run ids, settings, ``Run``, the writer
thread, the lifecycle (exit, signals, fork), resumed step counters, provenance, console capture.
"""

from ._runid import derive_run_id, random_run_id, shared_job_id

__all__ = ["derive_run_id", "random_run_id", "shared_job_id"]
