"""What recording provenance costs the training thread: ``nb.init`` time with it on and
off, and ``add_scalar`` calls done in the 300 ms after ``init`` while the provenance
thread collects (it shares the GIL with the loop).

    python scripts/bench_provenance.py [--n 30]

Run from a git checkout to include git's calls (a dirty tree adds the diff).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time

import nblog as nb


def one(root: str, i: int, provenance: bool) -> tuple[float, int]:
    t0 = time.perf_counter()
    run = nb.init("bench", run_name=f"r{i}", root=root, system=False, provenance=provenance)
    init_s = time.perf_counter() - t0
    calls, end = 0, time.perf_counter() + 0.3
    while time.perf_counter() < end:
        for _ in range(1000):
            run.add_scalar("loss", 0.5)
        calls += 1000
    run.finish()
    return init_s, calls


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=30, help="runs per setting, alternated")
    args = ap.parse_args()
    res: dict[bool, list[tuple[float, int]]] = {True: [], False: []}
    with tempfile.TemporaryDirectory() as root:
        one(root, -1, True)  # warm up imports
        for i in range(args.n):
            for p in (False, True):
                res[p].append(one(root, 2 * i + p, p))
    print(f"{'provenance':>10} {'init p50 ms':>12} {'init p90 ms':>12} {'add_scalar in 300 ms':>22}")
    for p in (False, True):
        inits = sorted(r[0] * 1e3 for r in res[p])
        calls = statistics.median(r[1] for r in res[p])
        print(f"{'on' if p else 'off':>10} {statistics.median(inits):12.3f} {inits[int(0.9 * len(inits))]:12.3f} "
              f"{calls:22,.0f}")


if __name__ == "__main__":
    main()
