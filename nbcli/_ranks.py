"""Which ranks of a run wrote an event log, said briefly; and the error a command gives
when asked for a rank that did not."""

from __future__ import annotations

import os


def ranks_with_logs(run_dir: str) -> list[int]:
    """The ranks that have at least one event log in ``run_dir``, in order
    (:func:`nblog.reader.lowlevel.ranks_with_logs`)."""
    from nblog.reader.lowlevel import ranks_with_logs as ranks

    return ranks(run_dir)


def rank_ranges(ranks: list[int]) -> str:
    """Sorted ranks as short text: ``[0, 1, 2, 5, 7, 8]`` → ``"0-2, 5, 7-8"``."""
    parts: list[str] = []
    i = 0
    while i < len(ranks):
        j = i
        while j + 1 < len(ranks) and ranks[j + 1] == ranks[j] + 1:
            j += 1
        parts.append(str(ranks[i]) if i == j else f"{ranks[i]}-{ranks[j]}")
        i = j + 1
    return ", ".join(parts)


def missing_rank(run_dir: str, rank: int) -> tuple[str, list[int]] | None:
    """None when ``rank`` has an event log in ``run_dir``; else the error message and
    the ranks that do have one."""
    present = ranks_with_logs(run_dir)
    if rank in present:
        return None
    have = f"ranks with event logs: {rank_ranges(present)}" if present else "no rank has written an event log yet"
    return f"rank {rank} has no event log in run {os.path.basename(run_dir)} ({have})", present
