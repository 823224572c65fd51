#!/usr/bin/env python
"""Cost of one system-metrics sample (nblog.system._system.Sampler.sample), in milliseconds.

    .venv/bin/python scripts/bench_system.py            # psutil, and psutil + 8 fake GPUs
    .venv/bin/python scripts/bench_system.py --real-nvml   # the installed pynvml instead

Measures the sampler alone (no event log): median, p95 and max over ``--samples``
samples, for psutil only (the budget: <= 5 ms per sample without GPUs) and for psutil
plus NVML with ``--gpus`` fake GPUs (tests/fakes/pynvml.py: the Python cost of our
code and of the pynvml calls, not the driver's). It also reports how late a thread that
sleeps 1 ms at a time woke up while sampling ran ("late wake-up": waiting for the GIL,
plus the OS scheduler's own delay, shown alone as the idle baseline).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from nblog.system._system import Sampler  # noqa: E402

PSUTIL_GROUPS = ("cpu", "memory", "disk", "network")


def load_fake_nvml(gpus: int) -> None:
    spec = importlib.util.spec_from_file_location("pynvml", REPO / "tests" / "fakes" / "pynvml.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.configure(gpus=gpus)
    sys.modules["pynvml"] = module


class Ticker:
    """A thread that sleeps 1 ms at a time and records how late it wakes (GIL + OS)."""

    def __init__(self):
        self.worst = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            t = time.perf_counter()
            time.sleep(0.001)
            self.worst = max(self.worst, time.perf_counter() - t - 0.001)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()


def measure(groups: tuple[str, ...], samples: int) -> dict:
    s = Sampler(groups, {})
    s.open()
    n_gpus = len(s.gpus.devices) if s.gpus is not None else 0
    s.sample()  # the first sample has no rates; not representative
    costs, keys = [], 0
    with Ticker() as ticker:
        for _ in range(samples):
            t = time.perf_counter()
            keys = len(s.sample())
            costs.append((time.perf_counter() - t) * 1000)
            time.sleep(0.002)  # leave the ticker room to run between samples
    s.close()
    costs.sort()
    return {
        "groups": ",".join(groups),
        "gpus": n_gpus,
        "keys": keys,
        "samples": samples,
        "median_ms": round(statistics.median(costs), 3),
        "p95_ms": round(costs[int(0.95 * (len(costs) - 1))], 3),
        "max_ms": round(costs[-1], 3),
        "late_wakeup_max_ms": round(ticker.worst * 1000, 3),
    }


def baseline(samples: int) -> float:
    """The ticker's worst lateness with nothing else running (OS scheduling alone), ms."""
    with Ticker() as ticker:
        time.sleep(samples * 0.003)
    return round(ticker.worst * 1000, 3)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--gpus", type=int, default=8, help="fake GPUs (default 8)")
    p.add_argument("--samples", type=int, default=200)
    p.add_argument("--real-nvml", action="store_true", help="use the installed pynvml")
    p.add_argument("--json", action="store_true", help="one JSON object per line")
    args = p.parse_args()
    if not args.real_nvml:
        load_fake_nvml(args.gpus)
    idle = baseline(args.samples)
    results = [measure(PSUTIL_GROUPS, args.samples), measure(PSUTIL_GROUPS + ("gpu",), args.samples)]
    if args.json:
        print(json.dumps({"idle_late_wakeup_max_ms": idle}))
    else:
        print(f"idle baseline: late wake-up max={idle:.3f} ms")
    for r in results:
        if args.json:
            print(json.dumps(r))
        else:
            print(
                f"{r['groups']:<28} gpus={r['gpus']} keys={r['keys']:<4} "
                f"median={r['median_ms']:.3f} ms  p95={r['p95_ms']:.3f} ms  max={r['max_ms']:.3f} ms  "
                f"late wake-up max={r['late_wakeup_max_ms']:.3f} ms"
            )
    budget = results[0]["median_ms"] <= 5.0
    print(f"budget (median <= 5 ms without GPUs): {'ok' if budget else 'EXCEEDED'}", file=sys.stderr)
    return 0 if budget else 1


if __name__ == "__main__":
    raise SystemExit(main())
