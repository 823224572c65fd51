"""A Run pickles, so spawn and forkserver workers get it, as an inert copy (issue 12, item 2).

Before the fix ``pickle.dumps(run)`` raised "Can't pickle local object
'_make_run.<locals>.make_writer'", and with it every spawn or forkserver worker (a
DataLoader's, forkserver being Python 3.14's default) handed anything holding a run.
The copy in the worker must log nothing and never touch the parent's files.
"""

from __future__ import annotations

import copy
import os
import pickle
import subprocess
import sys
from pathlib import Path

import pytest
from _nbproc import base_env, wait

import nblog as nb

SCRIPT = Path(__file__).resolve().parent / "_scripts" / "pickle_run.py"


def files(run_dir: Path) -> dict[str, int]:
    return {name: (run_dir / name).stat().st_size for name in sorted(os.listdir(run_dir))}


def test_a_run_pickles_to_an_inert_copy_in_process(tmp_path):
    run = nb.init("p", run_id="pk-local", config={"lr": 0.1}, root=tmp_path, system=False, _environ={})
    run.add_scalar("loss", 1.0, step=0)
    run.flush()
    before = files(Path(run.dir))
    for clone in (pickle.loads(pickle.dumps(run)), copy.copy(run), copy.deepcopy(run)):
        assert (clone.id, clone.dir, clone.session, clone.rank, clone.config) == (
            run.id, run.dir, run.session, run.rank, {"lr": 0.1})
        assert clone.is_logging is False
        clone.add_scalar("loss", 2.0, step=1)
        clone.add_text("t", "x", step=1)
        with clone.timer("time", all_ranks=True):
            pass
        clone.finish()
    assert files(Path(run.dir)) == before
    run.add_scalar("loss", 3.0, step=2)
    run.finish()
    r = nb.RunReader(run.dir)
    assert r.scalars()[["step", "value"]].rows() == [(0, 1.0), (2, 3.0)]
    assert r.meta["status"] == "finished"


@pytest.mark.parametrize("mode", ["spawn", "forkserver", "dataloader"])
def test_spawn_forkserver_and_dataloader_workers_get_an_inert_run(tmp_path, mode):
    root = tmp_path / "runs"
    done = wait(subprocess.Popen(
        [sys.executable, str(SCRIPT), str(root), mode], env=base_env(), cwd=tmp_path,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True), expect_rc=None)
    assert done.rc == 0, done
    assert "Traceback" not in done.err, done
    seen = done.result["seen"]
    if mode == "dataloader":
        assert sorted(seen) == [[i, 0, 1] for i in range(4)]  # index, is_logging, a Run
    else:
        info, status = seen
        assert status == {"exitcode": 0}
        assert info == {"id": f"pk-{mode}", "dir": done.result["dir"], "session": 0, "rank": 0,
                        "config": {"lr": 0.1}, "is_logging": False, "type": "Run"}
    r = nb.RunReader(f"pk-{mode}", root=str(root))
    assert r.scalars()[["step", "value"]].rows() == [(s, float(s)) for s in range(20)]
    assert r.text().is_empty() and r.timers().is_empty() and r.media().is_empty()
    assert set(r.scalars()["tag"]) == {"loss"}
    assert r.meta["status"] == "finished"
    assert sorted(os.listdir(done.result["dir"])) == ["events.r0.s0.log", "run.json"]
