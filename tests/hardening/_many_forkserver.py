"""Start N ranks of one run as forked processes: ``python _many_forkserver.py N STEPS``.

This process imports nblog (and calls nothing), then forks N children; each sets
torchrun's variables for its rank in its own environment and runs ``worker`` below,
as a separate interpreter would, for a fraction of the cost of starting one. Run with
``NB_DIR`` and ``NB_RUN_ID`` set. Barriers through pipes: every child up, then every
child logged (all alive, files open), then every child finishes. Prints ``PIDS ...``
once all have logged (and waits for a line on stdin), then ``EXIT <codes>``.
"""

from __future__ import annotations

import os
import sys

import nblog as nb

N, STEPS = int(sys.argv[1]), int(sys.argv[2])


def worker(rank: int, ready_w: int, go_r: int, logged_w: int, done_r: int) -> None:
    os.environ.update({"RANK": str(rank), "LOCAL_RANK": str(rank), "WORLD_SIZE": str(N),
                       "LOCAL_WORLD_SIZE": str(N), "GROUP_RANK": "0"})
    run = nb.init("many", timing_all_ranks=True, system=False, flush_interval=60)
    os.write(ready_w, b"r")
    os.read(go_r, 1)  # every rank is up
    for step in range(STEPS):
        run.add_scalar("loss", step + run.rank / 1000, step=step)  # kept on rank 0 only
        with run.timer("step", step=step):
            pass
        with run.timer("data", step=step):
            pass
    run.flush()
    os.write(logged_w, b"l")
    os.read(done_r, 1)  # every rank has logged: all alive, files open
    run.finish()


def barrier(r: int, n: int) -> None:
    got = 0
    while got < n:
        chunk = os.read(r, n - got)
        assert chunk, "a child died"
        got += len(chunk)


def main() -> None:
    ready_r, ready_w = os.pipe()
    go_r, go_w = os.pipe()
    logged_r, logged_w = os.pipe()
    done_r, done_w = os.pipe()
    pids = []
    for rank in range(N):
        pid = os.fork()
        if pid == 0:
            code = 0
            try:
                worker(rank, ready_w, go_r, logged_w, done_r)
            except BaseException as err:  # report, never fall back into the parent's loop
                print(f"rank {rank}: {err!r}", file=sys.stderr, flush=True)
                code = 1
            os._exit(code)
        pids.append(pid)
        if rank == 0:  # rank 0 first: the others wait for its run.json anyway
            barrier(ready_r, 1)
    barrier(ready_r, N - 1)
    os.write(go_w, b"g" * N)
    barrier(logged_r, N)
    print("PIDS", *pids, flush=True)
    sys.stdin.readline()
    os.write(done_w, b"d" * N)
    codes = [os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) for pid in pids]
    print("EXIT", *codes, flush=True)


if __name__ == "__main__":
    main()
