"""Fork safety (DataLoader workers) and thread safety, in real processes."""

from __future__ import annotations

import os
import textwrap

from _nbproc import base_env, start_code, wait

import nblog as nb

FORK = """
import multiprocessing, os, sys
import nblog as nb

run = nb.init("fork", run_id="f-00000000", system=False, flush_interval=60)
run.add_scalar("x", 0.0, step=0)
run.flush()
run.add_scalar("x", 1.0, step=1)  # still in the buffer when the children are forked

def child_work(_=None):
    run.add_scalar("x", 99.0, step=99)
    run.add_scalar({"child": 1.0}, step=99)
    run.add_text("t", "from a child", step=99)
    with run.timer("child_timer", step=99):
        pass
    run.flush()
    run.finish()
    return os.getpid()

pid = os.fork()
if pid == 0:
    child_work()
    sys.exit(0)  # a normal exit: the child's atexit hooks run, and must not write either
_, status = os.waitpid(pid, 0)
assert os.waitstatus_to_exitcode(status) == 0

ctx = multiprocessing.get_context("fork")
p = ctx.Process(target=child_work)
p.start()
p.join()
assert p.exitcode == 0
with ctx.Pool(2) as pool:
    assert len(pool.map(child_work, range(4))) == 4

run.add_scalar("x", 2.0, step=2)
run.finish()
print("DONE", flush=True)
"""


def test_forked_children_write_nothing_and_the_parents_file_stays_valid(tmp_path):
    root = tmp_path / "runs"
    done = wait(start_code(FORK, base_env(NB_DIR=str(root)), tmp_path))
    assert done.out.strip() == "DONE"
    assert "nblog" not in done.err  # a forked child's run is silent, not "called after finish"
    run_dir = root / "fork" / "f-00000000"
    assert sorted(os.listdir(run_dir)) == ["events.r0.s0.log", "run.json"]
    r = nb.RunReader(str(run_dir))
    assert r.scalars()[["step", "value"]].rows() == [(0, 0.0), (1, 1.0), (2, 2.0)]
    assert r.tags(kind=None) == ["x"]
    (s0,) = r.sessions()
    assert (s0["skipped_bytes"], s0["pending_bytes"], s0["end"]["status"]) == (0, 0, "finished")
    assert [s["session"] for s in r.meta["sessions"]] == [0]
    assert r.meta["status"] == "finished"


THREADS = """
import threading
import nblog as nb

N = 10_000
run = nb.init("threads", run_id="th-00000000", system=False, flush_interval=0.005)
start = threading.Barrier(4)

def work(k):
    start.wait()
    for i in range(N):
        run.add_scalar("shared", float(k * N + i), step=k * N + i)
        if i % 1000 == 0:
            run.add_scalar({f"own{k}": float(i), "dict_shared": float(k)}, step=i)
            with run.timer("t", step=k):
                pass

threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
for t in threads:
    t.start()
for t in threads:
    t.join()
run.finish()
"""


def test_four_threads_lose_and_tear_nothing(tmp_path):
    root = tmp_path / "runs"
    wait(start_code(textwrap.dedent(THREADS), base_env(NB_DIR=str(root)), tmp_path))
    r = nb.RunReader("th-00000000", root=str(root))
    shared = r.scalars("shared").sort("step")
    assert shared["step"].to_list() == list(range(40_000))
    assert shared["value"].to_list() == [float(s) for s in range(40_000)]
    for k in range(4):
        own = r.scalars(f"own{k}")
        assert sorted(own[["step", "value"]].rows()) == [(i, float(i)) for i in range(0, 10_000, 1000)]
    assert sorted(r.scalars("dict_shared")["value"].to_list()) == sorted([0.0, 1.0, 2.0, 3.0] * 10)
    assert sorted(r.timers("t")["step"].to_list()) == sorted([0, 1, 2, 3] * 10)
    (s0,) = r.sessions()
    assert (s0["skipped_bytes"], s0["pending_bytes"], s0["dropped"]) == (0, 0, {})
    assert s0["points"] == 40_000 + 4 * 10 * 3
