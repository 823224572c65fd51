"""Run ids: explicit, derived from a shared job id, or random on rank 0 alone.

A run id is ``<slug of run name, or "run">-<8 lowercase hex>``. With a shared job
id every rank derives the same suffix from (project, run name, job id) with no
communication (README, "Distributed launchers"). ``nb resume-id`` uses the same functions.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

from ..format._names import slug

_UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")


def is_torchrun_uuid(value: str) -> bool:
    """True if ``value`` looks like the uuid4 torchrun makes up when no usable
    ``--rdzv-id`` was given (plain and ``--standalone`` launches)."""
    return bool(_UUID.match(value.lower()))


def shared_job_id(env: Mapping[str, str]) -> tuple[str, str] | tuple[None, None]:
    """Return ``(job id, source)`` shared by every rank of the job, or ``(None, None)``.

    Order (README, "Distributed launchers", run id rule 2):
      a. ``TORCHELASTIC_RUN_ID`` given with ``--rdzv-id`` (not ``none``, not a uuid4
         torchrun made up) → source ``"torchelastic"``;
      b. ``SLURM_JOB_ID`` (same on every node, kept by requeue) → ``"slurm"``;
      c. a uuid4 torchrun made up (shared by one launch and its restarts) →
         ``"torchelastic_uuid"``.
    """
    elastic = env.get("TORCHELASTIC_RUN_ID", "").strip()
    if elastic and elastic.lower() != "none" and not is_torchrun_uuid(elastic):
        return elastic, "torchelastic"
    slurm = env.get("SLURM_JOB_ID", "").strip()
    if slurm:
        return slurm, "slurm"
    if elastic and is_torchrun_uuid(elastic):
        return elastic, "torchelastic_uuid"
    return None, None


def derive_run_id(project: str, run_name: str | None, job_id: str) -> str:
    """The run id every rank of job ``job_id`` computes for (project, run name)."""
    import hashlib

    h = hashlib.sha256(f"{project}\0{run_name or ''}\0{job_id}".encode()).hexdigest()
    return f"{slug(run_name)}-{h[:8]}"


def random_run_id(run_name: str | None) -> str:
    """A fresh run id with a random suffix (rank 0 alone, or ``nb resume-id``)."""
    return f"{slug(run_name)}-{os.urandom(4).hex()}"
