"""``run.session`` on a non-zero rank after a restart (found by the launcher suite).

Under torchrun --max-restarts (or a Slurm requeue) rank 1's second launch writes its events
into session 1, but right after ``nb.init`` its ``run.session`` still says 0: the number is
worked out when the rank first wrote (now fixed: at init, ``_init._rank_session``). Code that
stores ``run.session`` with a checkpoint, or prints it, gets the wrong session. Seen with
the real torchrun in test_launch_torchrun.py (the per-rank reports written after init).
"""

from __future__ import annotations

import pytest

import nblog as nb

pytestmark = pytest.mark.launchers


def _env(rank: int, restart: int) -> dict:
    return {"RANK": str(rank), "LOCAL_RANK": str(rank), "WORLD_SIZE": "2",
            "LOCAL_WORLD_SIZE": "2", "TORCHELASTIC_RUN_ID": "job-7",
            "TORCHELASTIC_RESTART_COUNT": str(restart), "NB_WAIT_S": "5"}


def test_nonzero_rank_knows_its_session_right_after_init(tmp_path):
    root = tmp_path / "runs"
    for restart in (0, 1):  # the first launch, then torchrun's restart of every worker
        r0 = nb.init("p", run_name="s", root=root, system=False, _environ=_env(0, restart))
        r1 = nb.init("p", run_name="s", root=root, system=False, timing_all_ranks=True,
                     _environ=_env(1, restart))
        assert r0.dir == r1.dir and r0.session == restart
        session_after_init = r1.session
        with r1.timer("step", step=restart):
            pass
        assert r1.session == restart  # what it writes: events.r1.s<restart>.log
        r1.finish()
        r0.finish()
        assert session_after_init == restart
