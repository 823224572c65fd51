"""``RunReader.timers`` over every rank pauses the cyclic garbage collector (issue 18): the
files of 1,024-8,192 ranks make a LogFile, its tags, header and chunk lists per file, none
in a cycle, which the collector scanned again and again (~0.1 s of the CPU of ``nb timers``
at either size). It is restored after, and left off when it was off."""

from __future__ import annotations

import gc

import nblog as nb


def write_job(root: str, world: int = 60) -> str:
    run_dir = ""
    for rank in range(world):
        env = {"RANK": str(rank), "LOCAL_RANK": str(rank % 8), "WORLD_SIZE": str(world),
               "TORCHELASTIC_RUN_ID": "job-gc", "NB_DIR": root, "NB_HOSTNAME": f"node{rank // 8}"}
        run = nb.init("p", _environ=env, system=False, provenance=False)
        for step in range(5):
            for name in ("time/data", "time/step"):
                with run.timer(name, step=step, all_ranks=True):
                    pass
        run.finish()
        run_dir = run.dir
    return run_dir


def test_reading_every_ranks_timers_collects_no_garbage_and_restores_it(tmp_path):
    run_dir = write_job(str(tmp_path))
    collections: list[int] = []
    inside: list[int] = []

    def seen(phase: str, info: dict) -> None:
        if phase == "start" and inside:
            collections.append(info["generation"])

    gc.callbacks.append(seen)
    try:
        for read in (lambda r: r.timers(all_ranks=True), lambda r: r.timer_stats()):
            reader = nb.RunReader(run_dir)
            gc.collect()
            inside.append(1)
            df = read(reader)
            inside.clear()
            assert len(df) in (60 * 2 * 5, 60 * 2)
            # none while reading; the one put off may run as the collector is turned back on
            assert len(collections) <= 1, collections
            collections.clear()
    finally:
        gc.callbacks.remove(seen)
    assert gc.isenabled()
    gc.disable()
    try:
        nb.RunReader(run_dir).timers(all_ranks=True)
        assert not gc.isenabled()  # off before: left off
    finally:
        gc.enable()
