"""What the incident tests share (tests/integration/test_incident_watch.py under torchrun,
tests/launchers/test_incident_slurm.py under Slurm): the faults of the job
(_scripts/incident_ddp.py), a real ``nb watch --json`` following a run with what was on
disk when each alert arrived, and the checks of the alerts and of their latency.

Latency is judged from the data, not from a clock of the test: when an alert line
arrives, the test reads what is on disk at that moment; the newest data then must be at
most two poll intervals (by the ranks' own wall times) after the data that triggered
the alert. The ranks flush every 0.1 s (NB_FLUSH_INTERVAL), so that figure is the
latency from disk to alert give or take 0.1 s. It only measures while the job runs: an
alert that came after the ranks stopped (step 120) is too late. A stall has no
triggering data: its own ``idle_s`` (the watcher's clock minus the wall time of the
rank's last data) may pass its ``limit_s`` by at most two intervals.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path

import polars as pl

import nblog as nb

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "tests" / "integration" / "_scripts" / "incident_ddp.py"
NB = [sys.executable, "-c", "from nbcli.app import main; main()"]
HANG_S = 240
INTERVAL = 1.0  # nb watch --interval
FLUSH_S = "0.1"  # the ranks' NB_FLUSH_INTERVAL
STALL_FLOOR = 3.0  # nb watch --stall-floor
STOP_AT = 120
#: NaN at step 50, rank 2 slow in data loading from step 80, every rank stopped at step 120
FAULTS = ["--nan-at", "50", "--slow-rank", "2", "--slow-from", "80", "--slow-sleep", "0.1",
          "--stop-at", str(STOP_AT)]
EXPECTED = [
    ("nonfinite", 0, "train/loss"),
    ("stall", 0, None), ("stall", 1, None), ("stall", 2, None), ("stall", 3, None),
    ("straggler", 2, "time/data"),
]
STRAGGLER_RATIO, STRAGGLER_FLOOR_S = 1.2, 0.005  # nb watch's defaults: the rule (nb timers')
STRAGGLER_STEPS = 50  # and its window


def on_disk(run_dir: Path) -> dict | None:
    """What the ranks' files hold now: per rank the highest step of ``time/data`` (every
    rank times it every step), and the newest wall time of any rank's. (polars is
    imported with this module: an import at the first alert would make it look late.)"""
    if not (run_dir / "run.json").exists():
        return None
    df = nb.RunReader(run_dir).timers("time/data", all_ranks=True)
    if not len(df):
        return None
    rows = df.group_by("rank").agg(pl.col("step").max(), pl.col("wall_time").max()).rows()
    return {"step": {r: s for r, s, _w in rows}, "wall": max(w for _r, _s, w in rows)}


class Watch:
    """``nb watch RUN --json`` following a run (``run_dir``: where it will be), each
    alert kept with what was on disk the moment its line arrived."""

    def __init__(self, run: str, run_dir: Path, env: dict[str, str], *extra: str):
        self.run_dir = run_dir
        self.proc = subprocess.Popen(
            [*NB, "watch", run, "--json", "--interval", str(INTERVAL), "--stall-floor", str(STALL_FLOOR),
             "--timeout", str(HANG_S), *extra],
            env={**env, "PYTHONPATH": str(REPO)}, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.seen: list[tuple[dict, dict | None]] = []
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            alert = json.loads(line)
            try:
                disk = on_disk(self.run_dir)
            except Exception as err:  # said by the assertions, not lost in this thread
                disk = {"error": repr(err)}
            self.seen.append((alert, disk))

    def alerts(self, rule: str | None = None) -> list[dict]:
        return [a for a, _d in self.seen if rule is None or a["rule"] == rule]

    def finish(self, signal: int | None = None) -> str:
        """Wait for the watch to end (after ``signal``, if given); its stderr."""
        try:
            if signal is not None:
                self.proc.send_signal(signal)
            self.proc.wait(timeout=HANG_S)
        finally:
            self.kill()
        self._thread.join(timeout=30)
        return self.proc.stderr.read()

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def first_straggler_step(reader: nb.RunReader, rank: int) -> int:
    """The first step after which ``rank`` is a straggler in ``time/data`` by the rule
    of ``nb timers`` and ``nb watch`` over the last 50 steps, replayed here in plain
    Python on the data as it stood after each step: each rank's lower median of its
    steps in the window (its first step, the warm-up, left out), at least 1.2 x the
    median of the ranks' and 5 ms above it. (One session, one point a step.)"""
    df = reader.timers("time/data", all_ranks=True)
    by_rank = {r: dict(zip(g["step"].to_list(), g["value"].to_list(), strict=True))
               for (r,), g in df.group_by("rank")}
    first = {r: min(steps) for r, steps in by_rank.items()}
    for s in sorted(by_rank[rank]):
        lows = {}
        for r, steps in by_rank.items():
            window = sorted(v for st, v in steps.items() if s - STRAGGLER_STEPS < st <= s and st != first[r])
            if len(window) >= 2:
                lows[r] = window[(len(window) - 1) // 2]
        m = sorted(lows.values())
        if rank not in lows or len(m) < 2:
            continue
        median = m[len(m) // 2] if len(m) % 2 else (m[len(m) // 2 - 1] + m[len(m) // 2]) / 2
        if lows[rank] >= STRAGGLER_RATIO * median and lows[rank] - median >= STRAGGLER_FLOOR_S:
            return s
    raise AssertionError(f"rank {rank} never was a straggler in the data")


def check_alerts(watch: Watch) -> dict:
    """Each expected alert exactly once, nothing else, each within two polls (see the
    module docstring); returns the lags measured (seconds), for the failure message."""
    got = sorted((a["rule"], a["rank"], a["tag"]) for a in watch.alerts())
    assert got == EXPECTED, [a["message"] for a in watch.alerts()]
    reader = nb.RunReader(watch.run_dir)
    loss = reader.scalars("train/loss")
    nan_wall = loss.filter(loss["step"] == 50)["wall_time"][0]
    lags: dict = {}
    for alert, disk in watch.seen:
        if alert["rule"] == "stall":
            assert alert["step"] == STOP_AT, alert
            assert alert["limit_s"] == STALL_FLOOR, alert  # 10 x ~0.1 s a step is under the floor
            lags[("stall", alert["rank"])] = alert["idle_s"] - alert["limit_s"]
            continue
        assert disk is not None and "error" not in disk, (alert, disk)
        if alert["rule"] == "nonfinite":
            assert (alert["step"], alert["wall_time"]) == (50, nan_wall), alert
            trigger = nan_wall
        else:
            s = first_straggler_step(reader, 2)
            assert s > 80, s
            r2 = reader.timers("time/data", rank=2)
            trigger = r2.filter(r2["step"] == s)["wall_time"][0]
        late = max(disk["step"].values()) >= STOP_AT  # the ranks had stopped: no clock left
        lags[alert["rule"]] = float("inf") if late else disk["wall"] - trigger
    print("alert lags, s:", {str(k): round(v, 3) for k, v in lags.items()})  # shown with pytest -s
    assert all(lag <= 2 * INTERVAL for lag in lags.values()), lags
    return lags
