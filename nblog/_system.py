"""System metrics sampled by local rank 0 of each machine (placeholder until issue 4)."""

from __future__ import annotations


def start_sampler(run, groups, interval, env) -> None:
    """Start the system sampler for ``run`` (not implemented yet: does nothing)."""
