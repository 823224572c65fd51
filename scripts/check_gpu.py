#!/usr/bin/env python
"""Check system metrics on real NVIDIA hardware: sample every 1 s while a GPU burns.

    .venv/bin/python scripts/check_gpu.py [--seconds 8] [--root DIR]

Starts a run (system metrics every 1 s, all groups) in a temporary folder (or
``--root``), burns GPU 0 with torch matrix multiplications for ``--seconds`` if torch
with CUDA is there (otherwise just waits), finishes, and prints on stdout the machine
record and the system frame (every sample, one row per timestamp and tag). On stderr:
a summary per GPU (peak utilization, memory, power, temperature, throttle reasons seen)
and whether the checks passed.

With CUDA it also checks that logging a CUDA tensor does not wait for the device
(``check_device_values``): while a kernel keeps the stream busy for about a second,
100 ``add_scalar`` calls of a tensor computed behind it (each followed by an in-place
update of its source) must return with the stream still busy, and the values read back
must be those at each call. Their time per call is printed.

Exit code 0 when GPU metrics were recorded and, if a GPU was burnt, its utilization
rose above 50 % and the device-value check passed; 1 otherwise; 2 when NVML saw no GPU.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import nblog as nb  # noqa: E402


def burn(run, seconds: float) -> bool:
    """Matrix multiplications on cuda:0 for ``seconds``; False if torch/CUDA is missing."""
    try:
        import torch
    except ImportError:
        print("torch is not installed: not burning, only sampling", file=sys.stderr)
        time.sleep(seconds)
        return False
    if not torch.cuda.is_available():
        print("torch has no CUDA device: not burning, only sampling", file=sys.stderr)
        time.sleep(seconds)
        return False
    a = torch.randn(8192, 8192, device="cuda:0", dtype=torch.float16)
    b = torch.randn(8192, 8192, device="cuda:0", dtype=torch.float16)
    step, end = 0, time.monotonic() + seconds
    while time.monotonic() < end:
        for _ in range(20):
            c = a @ b
        torch.cuda.synchronize()
        run.add_scalar("burn/checksum", float(c[0, 0]), step=step)
        step += 1
    print(f"burnt cuda:0 for {seconds:.0f} s ({step * 20} matmuls of 8192x8192)", file=sys.stderr)
    return True


def check_device_values(root: str, calls: int = 100) -> bool:
    """add_scalar of CUDA tensors while the stream is busy: no wait, exact values."""
    import torch

    run = nb.init("check_gpu", run_name="device-values", root=root, system=False, provenance=False,
                  console=False)
    run.add_scalar("warm", 0.0, step=0)  # the session's first point (a device value there is converted at once)
    x = torch.zeros((), device="cuda:0")
    torch.cuda.synchronize()
    torch.cuda._sleep(2_000_000_000)  # ~1 s of GPU clock cycles: a sync would wait for it
    t0 = time.perf_counter()
    for i in range(calls):
        run.add_scalar("device/value", x + i, step=i)  # computed behind the busy kernel
        x.add_(0.5)  # an in-place update after the call: must not change what was logged
    elapsed = time.perf_counter() - t0
    busy = not torch.cuda.current_stream().query()
    torch.cuda.synchronize()
    run.finish()
    got = nb.RunReader(run.dir).scalars("device/value").sort("step")["value"].to_list()
    want = [1.5 * i for i in range(calls)]
    ok = busy and got == want
    print(f"device values: {calls} add_scalar calls of a CUDA tensor took {elapsed * 1e3:.2f} ms "
          f"({elapsed / calls * 1e6:.1f} us per call), stream still busy after them: {busy}; "
          f"values read back {'exact' if got == want else f'WRONG ({got[:5]}... vs {want[:5]}...)'}",
          file=sys.stderr)
    return ok


def summarize(df, machine: dict) -> dict:
    import polars as pl

    out = {}
    for gpu in machine.get("gpus", []):
        prefix = f"system/gpu{gpu['index']}/"
        g = df.filter(pl.col("tag").str.starts_with(prefix))
        peak = g.group_by("tag").agg(pl.col("value").max()).rows()
        peak = {tag[len(prefix):]: value for tag, value in peak}
        reasons = g.filter(pl.col("tag") == prefix + "throttle_reasons")["value"].unique().to_list()
        out[f"gpu{gpu['index']}"] = {
            "name": gpu.get("name"),
            "peak_utilization_percent": peak.get("utilization_percent"),
            "peak_memory_used_bytes": peak.get("memory_used_bytes"),
            "peak_power_w": peak.get("power_w"),
            "peak_temperature_c": peak.get("temperature_c"),
            "peak_sm_clock_mhz": peak.get("sm_clock_mhz"),
            "throttle_reasons_seen": [hex(int(r)) for r in sorted(reasons)],
            "metrics": sorted(peak),
        }
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seconds", type=float, default=8.0, help="how long to burn (default 8)")
    p.add_argument("--root", help="run root (default: a temporary folder)")
    args = p.parse_args()

    import polars as pl

    root = args.root or tempfile.mkdtemp(prefix="nb-check-gpu-")
    run = nb.init("check_gpu", run_name="gpu", root=root, system=True, system_interval=1.0)
    time.sleep(1.2)  # the first sample comes 1 s after start: an idle reading
    burnt = burn(run, args.seconds)
    time.sleep(1.5)  # one more sample after the burn
    run.finish()
    device_ok = check_device_values(root) if burnt else True

    r = nb.RunReader(run.dir)
    machines = r.machines()
    df = r.system()
    print(json.dumps(machines, indent=2))
    with pl.Config(tbl_rows=-1, tbl_cols=-1, fmt_str_lengths=60):
        print(df.select("hostname", "wall_time", "step", "tag", "value"))

    if not machines or not machines[0].get("gpus"):
        note = machines[0].get("gpu_note") if machines else "no machine record"
        print(f"no GPU seen by NVML: {note}", file=sys.stderr)
        return 2
    summary = summarize(df, machines[0])
    print(json.dumps(summary, indent=2), file=sys.stderr)
    ok = all(s["metrics"] for s in summary.values())
    if burnt:
        util = summary.get("gpu0", {}).get("peak_utilization_percent")
        ok = ok and util is not None and util > 50 and device_ok
    print(f"check {'passed' if ok else 'FAILED'} (run folder: {run.dir})", file=sys.stderr)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
