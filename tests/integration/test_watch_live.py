"""``nb watch``: alerts computed from a run's files by a process outside the job.

Each test starts real rank processes (tests/integration/_scripts/watch_rank.py, one
process per rank with the launcher variables a torchrun worker gets) and a real
``nb watch`` process beside them.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from _nbproc import base_env

pytestmark = pytest.mark.timing  # run again beside a CPU hog: scripts/test_loaded.sh

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "tests" / "integration" / "_scripts" / "watch_rank.py"
NB = [sys.executable, "-c", "from nbcli.app import main; main()"]
HANG_S = 120
KEYS = ["rule", "level", "run", "rank", "host", "tag", "step", "wall_time", "message"]


def start_ranks(root: Path, run_id: str, world: int, spec: dict, **extra: str) -> list[subprocess.Popen]:
    procs = []
    for rank in range(world):
        env = base_env(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(world), LOCAL_WORLD_SIZE=str(world),
                       NB_DIR=str(root), NB_RUN_ID=run_id, OMP_NUM_THREADS="1", **extra)
        procs.append(subprocess.Popen([sys.executable, str(SCRIPT), json.dumps(spec)], env=env,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    return procs


def wait_all(procs: list[subprocess.Popen]) -> list[int]:
    return [p.wait(timeout=HANG_S) for p in procs]


def nb(*args: str, root: Path) -> subprocess.CompletedProcess:
    env = base_env(NB_DIR=str(root))
    return subprocess.run([*NB, *args], capture_output=True, text=True, env=env, timeout=HANG_S)


def run_job(root: Path, run_id: str, world: int, spec: dict) -> None:
    codes = wait_all(start_ranks(root, run_id, world, spec))
    assert all(c in (0, 1) for c in codes), codes


CLEAN = {"steps": 60, "sleep": 0.005, "seed": 1}


def test_once_on_a_clean_run_is_silent_and_exits_0(tmp_path: Path) -> None:
    run_job(tmp_path, "clean-00000001", 3, CLEAN)
    for args in ((), ("--json",)):
        proc = nb("watch", "clean-00000001", "--once", *args, root=tmp_path)
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout == ""
        assert "Traceback" not in proc.stderr


def test_once_reports_what_holds_and_exits_1(tmp_path: Path) -> None:
    spec = {**CLEAN, "nan_at": 50, "spike_at": 40, "slow_rank": 2, "slow_sleep": 0.04,
            "alert_rank": 1, "alert_at": 5, "alert_title": "boom\x1b[2J", "fail_rank": 1}
    run_job(tmp_path, "bad-00000001", 3, spec)
    proc = nb("watch", "bad-00000001", "--once", "--json", "--straggler-steps", "50", root=tmp_path)
    assert proc.returncode == 1, proc.stderr
    alerts = [json.loads(line) for line in proc.stdout.splitlines()]
    assert all(list(a)[: len(KEYS)] == KEYS for a in alerts)
    got = sorted((a["rule"], a["rank"], a["tag"], a["step"]) for a in alerts)
    assert got == [
        ("alert", 1, "boom\x1b[2J", 5),
        ("failure", 1, None, 59),
        ("nonfinite", 0, "train/loss", 50),
        ("spike", 0, "train/grad_norm", 40),
        ("straggler", 2, "data", None),
    ], got
    human = nb("watch", "bad-00000001", "--once", root=tmp_path)
    assert human.returncode == 1
    assert "\x1b" not in human.stdout and "boom\\x1b[2J" in human.stdout
    assert "failed: rank 1" in human.stdout and "RuntimeError" in human.stdout


def test_follow_raises_each_alert_once_as_its_data_lands(tmp_path: Path) -> None:
    """A job where rank 1 stops logging for 4 s while the others go on, rank 2 is slow
    in data loading for most of the job (so a busy machine's slower straggler checks
    still see it), rank 0 logs a NaN and a spike, rank 1 raises an
    alert and fails at its end: each alert once, on stdout and through --exec."""
    interval = 0.3
    spec = {"steps": 350, "sleep": 0.012, "seed": 2, "nan_at": 50, "spike_at": 80, "slow_rank": 2,
            "slow_from": 20, "slow_to": 250, "slow_sleep": 0.03, "stop_rank": 1, "stop_at": 100, "hold": 4.0,
            "alert_rank": 1, "alert_at": 10, "fail_rank": 1}
    sink = tmp_path / "exec.jsonl"
    hook = shlex.join([sys.executable, "-c",
                       f"import sys; open({str(sink)!r}, 'a').write(sys.stdin.read())"])
    watch = subprocess.Popen([*NB, "watch", "job-00000001", "--json", "--interval", str(interval),
                              "--stall-floor", "1.5", "--straggler-steps", "20", "--exec", hook],
                             env=base_env(NB_DIR=str(tmp_path)), stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    seen: list[tuple[float, dict]] = []

    def read() -> None:
        for line in watch.stdout:
            seen.append((time.time(), json.loads(line)))

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        run_job(tmp_path, "job-00000001", 3, spec)
        assert watch.wait(timeout=HANG_S) == 1, watch.stderr.read()  # it reported alerts
    finally:
        if watch.poll() is None:
            watch.kill()
    reader.join(timeout=10)
    alerts = [a for _t, a in seen]
    got = sorted((a["rule"], a["rank"], a["tag"]) for a in alerts)
    assert got == [
        ("alert", 1, "custom"),
        ("failure", 1, None),
        ("nonfinite", 0, "train/loss"),
        ("spike", 0, "train/grad_norm"),
        ("stall", 1, None),
        ("straggler", 2, "data"),
    ], [a["message"] for a in alerts]
    stall = next(a for a in alerts if a["rule"] == "stall")
    assert stall["step"] == 99 and "rank 1" in stall["message"] and "stopped at step 99 while others are at" in \
        stall["message"], stall["message"]
    # latency (data on disk -> alert) is a figure for a benchmark, not a timed assert here
    hooked = [json.loads(line) for line in sink.read_text().splitlines()]
    assert sorted((a["rule"], a["rank"]) for a in hooked) == sorted((a["rule"], a["rank"]) for a in alerts)


def test_usage_errors_exit_2_without_a_traceback(tmp_path: Path) -> None:
    for args in (("--interval", "0"), ("--exec", ""), ("--exec", "'unclosed"), ("--spike-window", "1"),
                 ("--straggler-floor", "inf"), ("--straggler-floor", "-1"), ("--straggler-warmup", "-1"),
                 ("--straggler-ratio", "nan"), ("--spike-z", "inf")):
        proc = nb("watch", "whatever", "--once", *args, root=tmp_path)
        assert proc.returncode == 2, (args, proc.stderr)
        assert "Traceback" not in proc.stderr
    missing = nb("watch", "nope", "--once", root=tmp_path)
    assert missing.returncode == 1 and "Traceback" not in missing.stderr


def test_exec_failures_are_reported_and_the_watch_goes_on(tmp_path: Path) -> None:
    run_job(tmp_path, "hook-00000001", 1, {**CLEAN, "nan_at": 10, "spike_at": 30})
    proc = nb("watch", "hook-00000001", "--once", "--exec", os.path.join(str(tmp_path), "no-such-tool"),
              root=tmp_path)
    assert proc.returncode == 1
    assert proc.stdout.count("\n") == 2 and proc.stderr.count("no-such-tool") == 2, proc.stderr


def test_gpu_idle_and_throttled_from_the_system_metrics(tmp_path: Path) -> None:
    """Under the fake NVML, GPU 0 runs at 5 % and GPU 1 at 15 % with its thermal and
    power-cap throttle flags set: with --gpu-idle 10, GPU 0 is idle and GPU 1 is
    throttled (once per flag); a clean, finished run read afterwards raises nothing."""
    fakes = REPO / "tests" / "fakes"
    env = base_env(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", LOCAL_WORLD_SIZE="1", NB_DIR=str(tmp_path),
                   NB_RUN_ID="gpu-00000001", NB_FAKE_NVML_GPUS="2",
                   PYTHONPATH=os.pathsep.join([str(fakes), str(REPO)]))
    rank = subprocess.Popen([sys.executable, str(SCRIPT), json.dumps({"steps": 150, "sleep": 0.01, "gpu": True})],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    watch = subprocess.run([*NB, "watch", "gpu-00000001", "--json", "--interval", "0.2", "--gpu-idle", "10",
                            "--gpu-samples", "5", "--timeout", "60"], env=base_env(NB_DIR=str(tmp_path)),
                           capture_output=True, text=True, timeout=HANG_S)
    assert rank.wait(timeout=HANG_S) == 0, rank.stderr.read()
    assert watch.returncode == 1, watch.stderr  # it reported alerts
    got = sorted((a["rule"], a["tag"]) for a in map(json.loads, watch.stdout.splitlines()))
    assert got == [("gpu_idle", "system/gpu0/utilization_percent"),
                   ("gpu_throttled", "system/gpu1/throttle_power_cap"),
                   ("gpu_throttled", "system/gpu1/throttle_thermal")], got
    after = nb("watch", "gpu-00000001", "--once", "--gpu-idle", "10", "--gpu-samples", "5", root=tmp_path)
    assert after.returncode == 0 and after.stdout == "", after.stdout


def test_exec_timeouts_are_reported_and_its_output_kept_off_stdout(tmp_path: Path) -> None:
    run_job(tmp_path, "hook-00000002", 1, {**CLEAN, "nan_at": 10})
    slow = shlex.join([sys.executable, "-c", "import time; print('hello from the hook', flush=True); time.sleep(30)"])
    proc = nb("watch", "hook-00000002", "--once", "--json", "--exec", slow, "--exec-timeout", "2", root=tmp_path)
    assert proc.returncode == 1
    (alert,) = [json.loads(line) for line in proc.stdout.splitlines()]
    assert alert["rule"] == "nonfinite"
    assert "still running after 2 s; killed" in proc.stderr
    chatty = shlex.join([sys.executable, "-c", "import sys; sys.stdin.read(); print('hello from the hook')"])
    proc = nb("watch", "hook-00000002", "--once", "--json", "--exec", chatty, root=tmp_path)
    assert proc.returncode == 1 and "hello from the hook" in proc.stderr and "hello" not in proc.stdout


def test_a_rank_stopped_with_sigstop_is_one_stall(tmp_path: Path) -> None:
    """SIGSTOP freezes rank 1 (its writer thread too) while rank 0 goes on: one stall
    alert naming rank 1 against rank 0's step, none for rank 0; SIGCONT lets it finish."""
    import signal

    watch = subprocess.Popen([*NB, "watch", "stop-00000001", "--json", "--interval", "0.3", "--stall-floor", "1.5",
                              "--straggler-ratio", "100"],  # rank 1 is slower on purpose: not the subject
                             env=base_env(NB_DIR=str(tmp_path)), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)
    procs = start_ranks(tmp_path, "stop-00000001", 2,  # rank 1 a little slower: rank 0 gets ahead of it
                        {"steps": 300, "sleep": 0.012, "seed": 3, "slow_rank": 1, "slow_sleep": 0.02})
    from nblog.reader._views.tail import Follower

    follow = [Follower(tmp_path / "watch" / "stop-00000001", rank=r) for r in (0, 1)]
    top = [-1, -1]
    try:
        deadline = time.monotonic() + 30
        # both ranks logging, rank 0 at a step past rank 1's: "while others are at" holds
        while not (top[1] >= 20 and top[0] > top[1]) and time.monotonic() < deadline:
            time.sleep(0.05)
            for r in (0, 1):
                top[r] = max([top[r]] + [ev.step for ev in follow[r].poll()])
        procs[1].send_signal(signal.SIGSTOP)
        guard = threading.Timer(30, procs[1].send_signal, (signal.SIGCONT,))  # no alert: no hang either
        guard.start()
        stall = None
        for line in watch.stdout:
            alert = json.loads(line)
            assert alert["rule"] == "stall", alert
            stall = alert
            break
        guard.cancel()
        procs[1].send_signal(signal.SIGCONT)
        assert wait_all(procs) == [0, 0]
        rest, err = watch.communicate(timeout=HANG_S)
    finally:
        for p in [*procs, watch]:
            if p.poll() is None:
                p.send_signal(signal.SIGCONT)
                p.kill()
    assert watch.returncode == 1, err  # it reported the stall
    assert stall is not None and stall["rank"] == 1 and "while others are at" in stall["message"], stall
    assert [json.loads(line) for line in rest.splitlines()] == []


def test_a_rank_heard_only_by_its_heartbeats_stalls_when_they_stop(tmp_path: Path) -> None:
    """Rank 1 logs no step, only an alert and then the writer's heartbeats (every 0.3 s
    of silence): quiet but alive, no stall; frozen with SIGSTOP, it went silent while
    rank 0 goes on: one stall alert."""
    import signal

    watch = subprocess.Popen([*NB, "watch", "beat-00000001", "--json", "--interval", "0.3", "--stall-floor", "1.5"],
                             env=base_env(NB_DIR=str(tmp_path)), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)
    seen: list[tuple[float, dict]] = []
    reader = threading.Thread(target=lambda: seen.extend((time.time(), json.loads(x)) for x in watch.stdout),
                              daemon=True)
    reader.start()
    procs = start_ranks(tmp_path, "beat-00000001", 2,
                        {"steps": 700, "sleep": 0.012, "seed": 4, "quiet_rank": 1, "quiet_s": 7.0},
                        NB_HEARTBEAT_S="0.3")
    try:
        deadline = time.monotonic() + HANG_S
        while not any(a["rule"] == "alert" for _t, a in seen) and time.monotonic() < deadline:
            time.sleep(0.05)  # rank 1 is up (its alert was read)
        time.sleep(2.5)  # the quiet stretch under test: longer than --stall-floor, heartbeats only
        stopped = time.time()
        procs[1].send_signal(signal.SIGSTOP)
        while not any(a["rule"] == "stall" for _t, a in seen) and time.monotonic() < deadline \
                and procs[0].poll() is None:
            time.sleep(0.05)
        procs[1].send_signal(signal.SIGCONT)
        assert wait_all(procs) == [0, 0]
        assert watch.wait(timeout=HANG_S) == 1, watch.stderr.read()  # it reported alerts
    finally:
        for p in [*procs, watch]:
            if p.poll() is None:
                p.send_signal(signal.SIGCONT)
                p.kill()
    reader.join(timeout=10)
    stalls = [(t, a) for t, a in seen if a["rule"] == "stall"]
    assert len(stalls) == 1, [a["message"] for _t, a in seen]
    when, stall = stalls[0]
    assert stall["rank"] == 1 and "went silent" in stall["message"] and when > stopped, stall
