"""Where a resumed session's step counter starts: one after the run's last step.

``add_scalar`` without a step uses the run's own counter. A new session of an existing
run (``resume="auto"``/``"must"``, a Slurm requeue or torchrun restart of a derived id)
must continue after the steps already logged; starting again at 0 would make every
reader hide the whole earlier curve (the hiding rule, ``man 5 nb-format``).

The run's last step is the one every reader shows (``nblog.format._steps``): rank 0's
latest session that logged a step, the higher of run.json's ``last_step`` for it (written
every few seconds and at finish, so stale after a ``kill -9``) and what its event log holds
(read from its ends, standard library only).
"""

from __future__ import annotations

from ..format._steps import rank_last_step, recorded_steps


def resume_step(run_dir: str, sessions: list, rank: int = 0, before: int | None = None) -> int:
    """The first step of the counter of a new session of ``rank`` in ``run_dir``.

    Args:
        run_dir: the run folder.
        sessions: run.json's session entries (their ``last_step`` counts as well).
        rank: whose event logs to read (rank 0 for every rank: one numbering).
        before: only sessions numbered below this count (None: all).

    Returns:
        One more than the highest step of the latest session that logged a step
        (its event log and its ``last_step`` in run.json, whichever is higher); 0
        when no session logged any.
    """
    found = rank_last_step(run_dir, recorded_steps(sessions) if rank == 0 else None, rank, before)
    return 0 if found is None else min(found + 1, (1 << 63) - 1)
