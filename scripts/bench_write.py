"""Write-path benchmark: nblog against torch.utils.tensorboard.SummaryWriter, side by side.

Prints one table. Every figure is measured in this run (the machine drifts, so only
ratios within one run mean much). Usage::

    python scripts/bench_write.py [--points 1000000] [--repeat 5] [--no-tensorboard]
    python scripts/bench_write.py --against ../other-checkout [--rounds 5]  # before/after

Figures: µs per add_scalar call on rank 0 (one tag; a dict of 10 tags), ns per call on
a non-logging rank (beside an unpickled, inert run, a hand-written no-op object and an
``if rank == 0`` guard, measured in turns; and with a dict of 10 built at the call),
µs per timer enter+exit, the worst single call in a long loop,
``import nblog`` time, bytes on disk per point, and the time to read the points back
into a Polars frame.
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

# --tree DIR: measure the nblog of another checkout (--against runs this script so)
_TREE = sys.argv[sys.argv.index("--tree") + 1] if "--tree" in sys.argv[:-1] else None
sys.path.insert(0, _TREE or os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import nblog as nb  # noqa: E402

NS = time.perf_counter_ns


def per_call_ns(fn, n: int, repeat: int) -> float:
    """Median over ``repeat`` batches of the mean ns per call of ``fn(i)``."""
    out = []
    for _ in range(repeat):
        t0 = NS()
        fn(n)
        out.append((NS() - t0) / n)
    return statistics.median(out)


def worst_call_ms(call, n: int) -> float:
    """The slowest single call of ``call(i)`` over ``n`` calls, in milliseconds."""
    worst = 0
    for i in range(n):
        t0 = NS()
        call(i)
        dt = NS() - t0
        if dt > worst:
            worst = dt
    return worst / 1e6


def bench_nblog(root: str, points: int, repeat: int) -> dict:
    env = {"NB_DIR": root}
    run = nb.init("bench", run_name="write", _environ=env, system=False)
    add = run.add_scalar
    base = [0]

    def one_tag(n):
        s = base[0]
        for i in range(s, s + n):
            add("train/loss", 0.5, step=i)
        base[0] = s + n

    tags = {f"train/metric{k}": 0.1 * k for k in range(10)}

    def ten_tags(n):
        s = base[0]
        for i in range(s, s + n):
            add(tags, step=i)
        base[0] = s + n

    res = {}
    res["add_scalar 1 tag (µs)"] = per_call_ns(one_tag, points // repeat, repeat) / 1000
    res["add_scalar dict of 10 (µs)"] = per_call_ns(ten_tags, points // repeat // 10, repeat) / 1000
    timer = run.timer

    def timers(n):
        for _ in range(n):
            with timer("time/step"):
                pass

    res["timer enter+exit (µs)"] = per_call_ns(timers, points // repeat // 4, repeat) / 1000
    run.flush()
    worst_start = base[0]
    res["worst call in loop (ms)"] = worst_call_ms(lambda i: add("train/loss", 0.5, step=worst_start + i), points)
    run.finish()

    def nothing(i):
        return None

    # the machine's own noise: the worst call of a function that does nothing
    res["worst no-op call, same loop (ms)"] = worst_call_ms(nothing, points)

    # bytes per point: a run holding exactly `points` one-tag points
    run2 = nb.init("bench", run_name="size", _environ=env, system=False)
    for i in range(points):
        run2.add_scalar("train/loss", i * 1e-3, step=i)
    run2.finish()
    size = sum(os.path.getsize(os.path.join(run2.dir, f)) for f in os.listdir(run2.dir) if f.startswith("events."))
    res["bytes per point"] = size / points
    times = []
    for _ in range(3):
        t0 = time.perf_counter()
        df = nb.RunReader(run2.dir).scalars()
        times.append(time.perf_counter() - t0)
        assert len(df) == points
    res[f"read {points:,} points (s)"] = min(times)

    # the writer thread's CPU per million points: its drains (framing, writing, the
    # run summary's fold), read from its own CPU clock once it has drained everything
    for label, width in (("1 tag", 1), ("10 tags", 10)):
        res[f"writer thread CPU, {label} (ms per 1M points)"] = writer_cpu_ms(env, points, width)

    # a non-logging rank of a torchrun job (it only remembers the step, for timers)
    rid = "bench-nonzero"
    nb.init("bench", run_id=rid, _environ={"NB_DIR": root, "RANK": "0", "WORLD_SIZE": "2", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "2"}, system=False).finish()
    r1 = nb.init("bench", run_id=rid, resume="auto", _environ={"NB_DIR": root, "RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2"}, system=False)
    add1 = r1.add_scalar

    def nonlogging(n):
        for i in range(n):
            add1("train/loss", 0.5, step=i)

    # the same call against what a user would write instead, measured in turns
    inert = pickle.loads(pickle.dumps(r1))  # an unpickled run (a DataLoader worker's)
    noop = _NoOp()
    rank = r1.rank
    loss = 0.5

    def calls(add):
        def loop(n):
            for i in range(n):
                add("train/loss", 0.5, step=i)
        return loop

    def guard(n):
        for i in range(n):
            if rank == 0:
                add1("train/loss", 0.5, step=i)

    def dict_at_call(add):
        def loop(n):
            for i in range(n):
                add({"loss": loss, "lr": 1e-3, "m2": loss, "m3": loss, "m4": loss, "m5": loss,
                     "m6": loss, "m7": loss, "m8": loss, "m9": loss}, step=i)
        return loop

    res.update(interleaved({
        "non-logging rank add_scalar (ns)": calls(add1),
        "inert run (unpickled) add_scalar (ns)": calls(inert.add_scalar),
        "hand-written no-op object (ns)": calls(noop.add_scalar),
        "`if rank == 0:` guard (ns)": guard,
    }, points // repeat, repeat))
    res.update(interleaved({
        "non-logging rank, dict of 10 built at call (ns)": dict_at_call(add1),
        "no-op object, dict of 10 built at call (ns)": dict_at_call(noop.add_scalar),
    }, points // repeat // 10, repeat))
    r1.finish()
    return res


class _NoOp:
    """What a user writes to silence logging on other ranks: a no-op object."""

    def add_scalar(self, *args, **kwargs):
        pass


def interleaved(fns: dict, n: int, repeat: int) -> dict:
    """Median ns per call of each of ``fns`` (name -> ``fn(n)``), measured in turns
    (one batch of each, ``repeat`` times), so load changes hit them all alike."""
    times: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(repeat):
        for name, fn in fns.items():
            t0 = NS()
            fn(n)
            times[name].append((NS() - t0) / n)
    return {name: statistics.median(t) for name, t in times.items()}


def writer_cpu_ms(env: dict, points: int, width: int) -> float:
    """CPU milliseconds the writer thread spends per million points of ``width`` tags
    per step (a dict), logged as fast as the caller can, drained by that thread alone."""
    run = nb.init("bench", run_name=f"writer{width}", _environ=env, system=False)
    tags = {f"train/metric{k}": 0.1 * k for k in range(width)}
    add = run.add_scalar
    thread = run._writer._thread
    clock = time.pthread_getcpuclockid(thread.ident)
    cpu0 = time.clock_gettime_ns(clock)
    if width == 1:
        for i in range(points):
            add("train/loss", i * 1e-3, step=i)
    else:
        for i in range(points // width):
            add(tags, step=i)
    while run._points:  # wait for the writer thread's own drain (a benchmark: polling is fine)
        time.sleep(0.05)
    time.sleep(2 * run._writer._flush_interval)  # and for the progress update after it
    cpu = time.clock_gettime_ns(clock) - cpu0
    run.finish()
    return cpu / 1e6 * 1e6 / points


def bench_tensorboard(root: str, points: int, repeat: int) -> dict | None:
    try:
        from torch.utils.tensorboard import SummaryWriter
    except Exception as err:  # tensorboard not installed
        print(f"(SummaryWriter unavailable: {err})", file=sys.stderr)
        return None
    logdir = os.path.join(root, "tb")
    w = SummaryWriter(logdir)
    base = [0]

    def one_tag(n):
        s = base[0]
        for i in range(s, s + n):
            w.add_scalar("train/loss", 0.5, i)
        base[0] = s + n

    tags = {f"train/metric{k}": 0.1 * k for k in range(10)}

    def ten_tags(n):
        s = base[0]
        for i in range(s, s + n):
            for k, v in tags.items():
                w.add_scalar(k, v, i)
        base[0] = s + n

    n = max(points // 20, 1000)  # SummaryWriter is slow: fewer calls
    res = {}
    res["add_scalar 1 tag (µs)"] = per_call_ns(one_tag, n // repeat, repeat) / 1000
    res["add_scalar dict of 10 (µs)"] = per_call_ns(ten_tags, n // repeat // 10, repeat) / 1000
    worst_start = base[0]
    res["worst call in loop (ms)"] = worst_call_ms(lambda i: w.add_scalar("train/loss", 0.5, worst_start + i), n)
    w.close()
    logdir2 = os.path.join(root, "tb2")
    w2 = SummaryWriter(logdir2)
    for i in range(n):
        w2.add_scalar("train/loss", i * 1e-3, i)
    w2.close()
    size = sum(os.path.getsize(os.path.join(logdir2, f)) for f in os.listdir(logdir2))
    res["bytes per point"] = size / n
    try:
        from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

        t0 = time.perf_counter()
        acc = EventAccumulator(logdir2, size_guidance={"scalars": 0})
        acc.Reload()
        got = len(acc.Scalars("train/loss"))
        dt = time.perf_counter() - t0
        res[f"read {points:,} points (s)"] = dt * points / got  # scaled from n points
    except Exception as err:
        print(f"(EventAccumulator unavailable: {err})", file=sys.stderr)
    return res


def import_time_ms(repeat: int) -> float:
    code = "import time; t=time.perf_counter(); import nblog; print(time.perf_counter()-t)"
    times = []
    for _ in range(repeat):
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
        times.append(float(out.stdout) * 1000)
    return statistics.median(times)


def caller_figures(root: str, points: int, repeat: int) -> dict:
    """The training thread's figures only (rank 0: one tag, a dict of 10; a non-logging
    rank beside a no-op object and a guard), each measured in turns with the others."""
    env = {"NB_DIR": root}
    run = nb.init("bench", run_name="caller", _environ=env, system=False)
    add = run.add_scalar
    base = [0]
    tags = {f"train/metric{k}": 0.1 * k for k in range(10)}

    def one_tag(n):
        s = base[0]
        for i in range(s, s + n):
            add("train/loss", 0.5, step=i)
        base[0] = s + n

    def ten_tags(n):
        s = base[0]
        for i in range(s, s + n):
            add(tags, step=i)
        base[0] = s + n

    res = {}
    res["add_scalar 1 tag (µs)"] = interleaved({"x": one_tag}, points // repeat, repeat)["x"] / 1000
    res["add_scalar dict of 10 (µs)"] = interleaved({"x": ten_tags}, points // repeat // 10, repeat)["x"] / 1000
    run.finish()
    rid = "caller-nonzero"
    ranks = {"NB_DIR": root, "WORLD_SIZE": "2", "LOCAL_WORLD_SIZE": "2"}
    nb.init("bench", run_id=rid, _environ={**ranks, "RANK": "0", "LOCAL_RANK": "0"}, system=False).finish()
    r1 = nb.init("bench", run_id=rid, resume="auto", _environ={**ranks, "RANK": "1", "LOCAL_RANK": "1"},
                 system=False)
    inert = pickle.loads(pickle.dumps(r1))
    noop = _NoOp()
    a1, ai, an = r1.add_scalar, inert.add_scalar, noop.add_scalar
    rank = r1.rank

    def calls(f):
        def loop(n):
            for i in range(n):
                f("train/loss", 0.5, step=i)
        return loop

    def guard(n):
        for i in range(n):
            if rank == 0:
                a1("train/loss", 0.5, step=i)

    res.update(interleaved({
        "non-logging rank add_scalar (ns)": calls(a1),
        "inert run (unpickled) add_scalar (ns)": calls(ai),
        "hand-written no-op object (ns)": calls(an),
        "`if rank == 0:` guard (ns)": guard,
    }, points // repeat, repeat))
    r1.finish()
    return res


def against(other: str, rounds: int, points: int, repeat: int) -> None:
    """Print the caller's figures of ``other``'s nblog (before) and this one (after),
    each from ``rounds`` fresh processes taken in turns: median (min-max)."""
    me = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    got: dict[str, dict[str, list[float]]] = {"before": {}, "after": {}}
    load0 = os.getloadavg()
    for _ in range(rounds):
        for label, tree in (("before", other), ("after", me)):
            out = subprocess.run([sys.executable, os.path.abspath(__file__), "--tree", tree, "--caller-json",
                                  "--points", str(points), "--repeat", str(repeat)],
                                 capture_output=True, text=True, check=True)
            for key, val in json.loads(out.stdout.splitlines()[-1]).items():
                got[label].setdefault(key, []).append(val)
    load1 = os.getloadavg()
    print(f"{'caller figure':40} {'before: median (min-max)':>28} {'after: median (min-max)':>28} {'after/before':>12}")
    for key, vals in got["after"].items():
        b, a = got["before"].get(key, []), vals
        cell = lambda v: f"{statistics.median(v):.3f} ({min(v):.3f}-{max(v):.3f})" if v else "-"  # noqa: E731
        ratio = f"{statistics.median(a) / statistics.median(b):.2f}" if a and b else ""
        print(f"{key:40} {cell(b):>28} {cell(a):>28} {ratio:>12}")
    print(f"before = {other}, after = {me}; {rounds} rounds of fresh processes in turns")
    print(f"load average at start {' '.join(f'{x:.2f}' for x in load0)}, at end "
          f"{' '.join(f'{x:.2f}' for x in load1)} on {os.cpu_count()} CPUs")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--points", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--no-tensorboard", action="store_true")
    ap.add_argument("--against", metavar="DIR", help="compare the caller's figures with the nblog in DIR, in turns")
    ap.add_argument("--rounds", type=int, default=5, help="processes per side with --against")
    ap.add_argument("--tree", metavar="DIR", help=argparse.SUPPRESS)
    ap.add_argument("--caller-json", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.against:
        against(args.against, args.rounds, args.points, args.repeat)
        return
    if args.caller_json:
        root = tempfile.mkdtemp(prefix="nb-bench-")
        try:
            print(json.dumps(caller_figures(root, args.points, args.repeat)))
        finally:
            shutil.rmtree(root, ignore_errors=True)
        return
    root = tempfile.mkdtemp(prefix="nb-bench-")
    try:
        ours = bench_nblog(root, args.points, args.repeat)
        ours["import nblog (ms)"] = import_time_ms(args.repeat)
        tb = None if args.no_tensorboard else bench_tensorboard(root, args.points, args.repeat)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(f"{'measure':38} {'nblog':>12} {'SummaryWriter':>14} {'ratio':>8}")
    for key, val in ours.items():
        other = tb.get(key) if tb else None
        ratio = f"{other / val:7.1f}x" if other and val else ""
        other_s = f"{other:14.3f}" if other is not None else f"{'-':>14}"
        print(f"{key:38} {val:12.3f} {other_s} {ratio:>8}")
    print("(ratio = SummaryWriter / nblog; SummaryWriter measured on fewer calls, its read time scaled)")
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())} on {os.cpu_count()} CPUs")


if __name__ == "__main__":
    main()
