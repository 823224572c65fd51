"""Non-zero ranks join only a session opened by rank 0 of their own launch."""

from __future__ import annotations

import os
import uuid

import nblog as nb


def _env(root, rank, elastic_id, **extra):
    return {
        "NB_DIR": str(root),
        "RANK": str(rank),
        "LOCAL_RANK": str(rank),
        "WORLD_SIZE": "2",
        "LOCAL_WORLD_SIZE": "2",
        "TORCHELASTIC_RUN_ID": elastic_id,
        "TORCHELASTIC_RESTART_COUNT": "0",
        "NB_WAIT_S": "0.5",
        **extra,
    }


def test_rank_of_a_relaunch_does_not_write_into_the_old_run(tmp_path):
    first, second = str(uuid.uuid4()), str(uuid.uuid4())
    nb.init("p", run_id="r-1", system=False, _environ=_env(tmp_path, 0, first)).finish()
    # the relaunch: rank 0 would refuse the existing id (no resume); rank 1 must not join
    r1 = nb.init("p", run_id="r-1", system=False, timing_all_ranks=True,
                 _environ=_env(tmp_path, 1, second))
    with r1.timer("t"):
        pass
    r1.finish()
    assert r1.dir is None
    names = sorted(n for n in os.listdir(tmp_path / "p" / "r-1") if not n.startswith("provenance."))
    assert names == ["events.r0.s0.log", "run.json"]


def test_rank_of_the_same_launch_joins_and_times(tmp_path):
    launch = str(uuid.uuid4())
    r0 = nb.init("p", run_id="r-2", system=False, _environ=_env(tmp_path, 0, launch))
    r1 = nb.init("p", run_id="r-2", system=False, _environ=_env(tmp_path, 1, launch))
    with r1.timer("t", all_ranks=True):
        pass
    r1.finish()
    r0.finish()
    assert r1.dir == r0.dir
    assert nb.RunReader(r0.dir).timers(rank=1)["tag"].to_list() == ["t"]


def test_restarted_rank_waits_for_the_session_of_its_restart(tmp_path):
    launch = str(uuid.uuid4())
    nb.init("p", run_id="r-3", system=False, _environ=_env(tmp_path, 0, launch)).finish()
    restarted = {"TORCHELASTIC_RESTART_COUNT": "1"}
    # rank 1 of restart 1 comes first: run.json exists, but not rank 0's new session yet
    early = nb.init("p", run_id="r-3", resume="auto", system=False,
                    _environ=_env(tmp_path, 1, launch, **restarted))
    assert early.dir is None
    r0 = nb.init("p", run_id="r-3", resume="auto", system=False,
                 _environ=_env(tmp_path, 0, launch, **restarted))
    r1 = nb.init("p", run_id="r-3", resume="auto", system=False,
                 _environ=_env(tmp_path, 1, launch, **restarted))
    assert r1.dir == r0.dir and r0.session == 1
    r1.finish()
    r0.finish()
