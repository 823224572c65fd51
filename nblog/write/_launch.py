"""Launch identity: this process's rank, local rank and world size from the launcher's
environment (the name of its machine: ``nblog.format._host``).

Order (the README, "Rank, local rank, world size"): torchrun's ``RANK`` first,
then Open MPI's ``OMPI_COMM_WORLD_*``, then Slurm's ``SLURM_PROCID`` family, else a
single process. The innermost launcher's variables are the true ones: under
``sbatch`` + ``mpirun`` every rank sees ``SLURM_PROCID=0``, and under ``srun`` +
``torchrun`` ``SLURM_PROCID`` is the agent's index.
"""

from __future__ import annotations

from collections import namedtuple
from collections.abc import Mapping

from .. import _log as log

# (launcher, rank, local rank, world size, local world size) variables, in order.
_SOURCES = (
    ("torchrun", "RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE"),
    (
        "mpirun",
        "OMPI_COMM_WORLD_RANK",
        "OMPI_COMM_WORLD_LOCAL_RANK",
        "OMPI_COMM_WORLD_SIZE",
        "OMPI_COMM_WORLD_LOCAL_SIZE",
    ),
    ("slurm", "SLURM_PROCID", "SLURM_LOCALID", "SLURM_NTASKS", None),
)


class RankInfo(
    namedtuple(
        "RankInfo",
        "rank local_rank world_size local_world_size launcher variable",
        defaults=(0, 0, 1, 1, "none", ""),
    )
):
    """Where this process sits in the job.

    Attributes:
        rank: global rank, 0 ≤ rank < world_size.
        local_rank: rank on this machine, or None when the launcher did not say and
            it could not be inferred (then this process never samples system metrics).
        world_size: number of processes in the job.
        local_world_size: processes on this machine, or None when unknown.
        launcher: "torchrun", "mpirun", "slurm" or "none".
        variable: the variable the rank was read from ("" for a single process).
    """

    __slots__ = ()

    @property
    def multi_machine(self) -> bool:
        """True when the job is known to span more than one machine."""
        return self.local_world_size is not None and self.local_world_size < self.world_size


def _int(env: Mapping[str, str], name: str) -> int | None:
    raw = env.get(name)
    if raw is None or raw == "":
        return None
    try:
        return int(raw.strip())
    except ValueError:
        raise ValueError(f"environment variable {name}={raw!r} is not an integer") from None


def detect_ranks(env: Mapping[str, str]) -> RankInfo:
    """Read the rank layout from ``env`` (usually ``os.environ``).

    Raises:
        ValueError: a variable is not an integer, or the rank is negative or not
            below the world size; the message names the variable.
    """
    for launcher, rank_var, local_var, size_var, local_size_var in _SOURCES:
        rank = _int(env, rank_var)
        if rank is None:
            continue
        size = _int(env, size_var)
        if size is None:
            raise ValueError(f"{rank_var} is set but {size_var} is not")
        if size < 1:
            raise ValueError(f"environment variable {size_var}={size} must be at least 1")
        if not 0 <= rank < size:
            raise ValueError(
                f"environment variable {rank_var}={rank} is not in [0, {size_var}={size})"
            )
        local_size = _int(env, local_size_var) if local_size_var else None
        if local_size is None and launcher == "slurm":
            nnodes = _int(env, "SLURM_NNODES")
            if nnodes == 1:
                local_size = size
        local = _int(env, local_var)
        if local is not None and local < 0:
            raise ValueError(f"environment variable {local_var}={local} must not be negative")
        if local is None:
            if rank == 0 or (local_size is not None and local_size == size):
                local = rank  # one machine: the local rank is the rank
            else:
                log.warning(
                    "nblog: %s is not set on rank %d; not guessing a local rank, so this "
                    "process will not sample system metrics",
                    local_var,
                    rank,
                )
        return RankInfo(rank, local, size, local_size, launcher, rank_var)
    return RankInfo()
