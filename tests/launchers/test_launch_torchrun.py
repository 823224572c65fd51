"""nb under the real torchrun (torch 2.13): standalone, c10d with --rdzv-id, elastic restarts.

What torchrun really sets is measured in shared/launchers/README.md: a standalone (or
backend-less) launch gets a fresh uuid4 as TORCHELASTIC_RUN_ID at every torchrun call, even
when --rdzv-id is given; only c10d/static rendezvous with --rdzv-id passes the id through.
"""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from launchkit import (
    REPO,
    TINY,
    VENV_BIN,
    assert_agree,
    assert_clean_curve,
    free_port,
    reports,
    run,
    run_dirs,
)

import nblog as nb
from nblog.write._runid import derive_run_id, is_torchrun_uuid

pytestmark = pytest.mark.launchers

# torchrun in a network namespace of loopback only (scripts/loopback.sh): its stores listen
# on every interface, whatever address it is given
LOOPBACK = ["env", "NB_LOOPBACK=require", "bash", str(REPO / "scripts" / "loopback.sh")]
TORCHRUN = str(VENV_BIN / "torchrun")


def test_standalone_four_ranks_agree_with_all_ranks_timers(env, tmp_path):
    out = tmp_path / "out"
    run([*LOOPBACK, TORCHRUN, "--standalone", "--nproc-per-node", "4", TINY,
         "--name", "standalone", "--steps", "5", "--sleep", "0.1", "--out", out], env)

    rs = reports(out)
    run_dir = assert_agree(rs, 4)
    assert run_dirs(tmp_path / "runs") == [Path(run_dir)]
    elastic = {r["env"]["TORCHELASTIC_RUN_ID"] for r in rs}
    assert len(elastic) == 1 and is_torchrun_uuid(elastic.pop())  # torchrun made it up

    reader = nb.RunReader(run_dir)
    meta = reader.meta
    assert (meta["launcher"], meta["world_size"]) == ("torchrun", 4)
    assert (meta["job_id_source"], meta["run_id_source"]) == ("torchelastic_uuid", "derived")
    assert meta["status"] == "finished"
    assert reader.ranks() == [0, 1, 2, 3]  # every rank wrote its own readable log
    timers = reader.timers("step", all_ranks=True)
    for rank in range(4):
        assert timers.filter(timers["rank"] == rank)["step"].to_list() == list(range(5))
    assert_clean_curve(reader, 5)
    machines = reader.machines()
    assert [(m["hostname"], m["rank"]) for m in machines] == [(socket.gethostname(), 0)]
    assert len(reader.system()) > 0


def test_c10d_with_rdzv_id_derives_the_id_from_it(env, tmp_path):
    out = tmp_path / "out"
    rdzv_id = f"exp-{tmp_path.name[-12:]}"
    run([*LOOPBACK, TORCHRUN, "--nnodes", "1", "--nproc-per-node", "4", "--rdzv-backend", "c10d",
         "--rdzv-endpoint", f"127.0.0.1:{free_port()}", "--rdzv-id", rdzv_id,
         TINY, "--name", "c10d", "--steps", "4", "--out", out], env)

    rs = reports(out)
    run_dir = assert_agree(rs, 4)
    assert {r["env"]["TORCHELASTIC_RUN_ID"] for r in rs} == {rdzv_id}
    assert Path(run_dir).name == derive_run_id("launchers", "c10d", rdzv_id)
    reader = nb.RunReader(run_dir)
    assert (reader.meta["job_id"], reader.meta["job_id_source"]) == (rdzv_id, "torchelastic")
    assert reader.ranks() == [0, 1, 2, 3]
    timers = reader.timers("step", all_ranks=True)
    assert sorted(timers["rank"].unique().to_list()) == [0, 1, 2, 3]


def test_max_restarts_continues_the_run_in_a_new_session(env, tmp_path):
    """In attempt 0 rank 0 raises at step 6 (checkpoint after step 3) while the other
    ranks wait in DDP's all-reduce; torchrun stops them with SIGTERM (nb flushes) and
    restarts every worker; attempt 1 resumes at step 4 in session 1 of the same run.
    Steps 4-5 of session 0 are hidden on every rank: the curves read back are clean."""
    out, ckpt = tmp_path / "out", tmp_path / "ckpt.json"
    # torch >= 2.4 shares the rendezvous TCPStore with the workers and does not isolate
    # restarts in it: gloo's init after a restart reads the crashed attempt's addresses
    # and fails ("Gloo connectFullMesh failed ... Connection refused"; pytorch#135712).
    # Not an nb matter, but every restartable torchrun job needs this:
    env = dict(env, TORCH_DISABLE_SHARE_RDZV_TCP_STORE="1")
    run([*LOOPBACK, TORCHRUN, "--standalone", "--nproc-per-node", "4", "--max-restarts", "1", TINY,
         "--dist", "gloo", "--name", "elastic", "--steps", "8", "--crash-at", "6",
         "--ckpt", ckpt, "--ckpt-every", "4", "--out", out], env)

    first, second = reports(out, 0), reports(out, 1)
    run_dir = assert_agree(first, 4)
    assert assert_agree(second, 4) == run_dir
    assert run_dirs(tmp_path / "runs") == [Path(run_dir)]
    # every rank ended its second attempt in session 1 (a rank > 0 numbers its session
    # when it first writes, so the report written right after init cannot say yet)
    assert sorted(p.name for p in out.glob("done.*")) == [f"done.rank{r}.a1.s1.json" for r in range(4)]

    reader = nb.RunReader(run_dir)
    assert [s["session"] for s in reader.meta["sessions"]] == [0, 1]
    assert reader.meta["status"] == "finished"
    for rank in range(4):
        sessions = reader.sessions(rank)
        assert [s["session"] for s in sessions] == [0, 1]
        assert [s["restart_counts"].get("TORCHELASTIC_RESTART_COUNT") for s in sessions] == ["0", "1"]
        assert sessions[1]["first_step"] == 4
        timers = reader.timers("step", rank=rank)
        assert timers["step"].to_list() == list(range(8)), f"rank {rank}: {timers}"
    assert reader.sessions(0)[0]["hidden_points"] > 0
    assert_clean_curve(reader, 8)
    attempt = reader.scalars("train/attempt")
    assert attempt["value"].to_list() == [0.0] * 4 + [1.0] * 4
    hidden = reader.scalars("train/step", include_hidden=True).filter("hidden")
    assert hidden["step"].to_list() == [4, 5] and set(hidden["session"].to_list()) == {0}


def test_torchrun_example_restarts_and_relaunches_into_one_run(env, tmp_path):
    """scripts/torchrun_example.sh: a crash is restarted inside the launch (session 1),
    and launching it again with the same RUN_KEY continues the same run (session 2)."""
    out, ckpt = tmp_path / "out", tmp_path / "ckpt.json"
    env = dict(env, NPROC="4", RUN_KEY=f"key-{tmp_path.name[-10:]}", RDZV_PORT=str(free_port()))
    script = REPO / "scripts" / "torchrun_example.sh"
    common = [TINY, "--name", "example", "--ckpt", ckpt, "--ckpt-every", "2", "--out", out]
    # every rank raises at step 3; torchrun stops those still finishing with SIGTERM, which
    # used to kill them before nb had written their points (test_launch_sigterm.py)
    run([*LOOPBACK, "bash", script, *common, "--steps", "6", "--crash-at", "3", "--crash-rank", "-1"],
        env, cwd=tmp_path)
    run([*LOOPBACK, "bash", script, *common, "--steps", "9"], env, cwd=tmp_path)

    dirs = run_dirs(tmp_path / "runs")
    assert len(dirs) == 1, dirs
    assert Path(assert_agree(reports(out, 1), 4)) == dirs[0]
    reader = nb.RunReader(dirs[0])
    assert reader.meta["job_id"] == env["RUN_KEY"]
    sessions = reader.sessions(0)
    assert [s["session"] for s in sessions] == [0, 1, 2]
    assert [s["restart_counts"].get("TORCHELASTIC_RESTART_COUNT") for s in sessions] == ["0", "1", "0"]
    # rank 0 may be stopped before its first checkpoint (after step 1) when another rank
    # reaches step 3 first: nothing holds ranks together without gloo
    assert [s["first_step"] for s in sessions] in ([0, 2, 6], [0, 0, 6])
    assert_clean_curve(reader, 9)
    assert reader.ranks() == [0, 1, 2, 3]
    for rank in range(4):  # every rank's own curve is clean too
        assert reader.sessions(rank)[-1]["first_step"] == 6
        assert reader.timers("step", rank=rank)["step"].to_list() == list(range(9)), rank
