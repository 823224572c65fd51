"""Issue 25 under the real torchrun: jobs that really hang, and ``nb hang`` names the rank.

``torchrun --nproc-per-node 4`` (gloo, CPU, loopback-only namespace: scripts/loopback.sh)
runs tests/integration/_scripts/hang_ddp.py with ``NB_HANG_S=2``. The test waits (by
polling the run folder, up to a generous deadline) for the dumps the scenario must
produce, asks ``nb hang --json``, then ends the job itself (its process group).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "tests" / "integration" / "_scripts" / "hang_ddp.py"
LOOPBACK = ["env", "NB_LOOPBACK=require", "bash", str(REPO / "scripts" / "loopback.sh")]
NB = [sys.executable, "-c", "from nbcli.app import main; main()"]
DEADLINE_S = 120

pytestmark = [pytest.mark.slow]


class Job:
    def __init__(self, tmp_path: Path, *args: str, hang_s: str = "2"):
        self.root = tmp_path / "runs"
        self.flags = tmp_path / "flags"
        self.flags.mkdir()
        self.run_id = f"hang-{uuid.uuid4().hex[:8]}"
        self.dir = self.root / "hang" / self.run_id
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("NB_", "SLURM_", "OMPI_", "PMI", "TORCHELASTIC_", "TORCH_FR", "TORCH_NCCL"))
               and k not in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")}
        env.update(OMP_NUM_THREADS="1", PYTHONPATH=str(REPO), NB_PROVENANCE="0", NB_DIR=str(self.root),
                   NB_RUN_ID=self.run_id, NB_FLUSH_INTERVAL="0.2", NB_HANG_S=hang_s, NO_COLOR="1")
        self.env = env
        cmd = [*LOOPBACK, sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "4",
               str(SCRIPT), "--flags", str(self.flags), *args]
        self.out = tmp_path / "job.out"
        with open(self.out, "wb") as out:
            self.proc = subprocess.Popen(cmd, cwd=tmp_path, env=env, stdout=out, stderr=subprocess.STDOUT,
                                         start_new_session=True)

    def output(self) -> str:
        return self.out.read_text(errors="replace")[-3000:]

    def until(self, what: str, check) -> None:
        deadline = time.monotonic() + DEADLINE_S
        while time.monotonic() < deadline:
            if check():
                return
            if self.proc.poll() is not None:
                raise AssertionError(f"the job ended before {what}:\n{self.output()}")
            time.sleep(0.2)
        self.kill()
        raise AssertionError(f"no {what} within {DEADLINE_S} s:\n{self.output()}")

    def dumps(self, rank: int) -> list[Path]:
        return sorted(self.dir.glob(f"stacks.r{rank}.s*.*.jsonl")) if self.dir.is_dir() else []

    def hang(self) -> tuple[int, dict]:
        p = subprocess.run([*NB, "hang", "--json", str(self.dir)], env=self.env, capture_output=True, text=True,
                           timeout=60)
        assert p.returncode in (0, 1), p.stderr
        return p.returncode, json.loads(p.stdout)

    def kill(self) -> None:
        """End the job: torchrun's process group, then each worker (torchrun starts
        them in sessions of their own), by the pids they wrote."""
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
        for f in self.flags.glob("pid.*"):
            try:
                os.kill(int(f.read_text()), signal.SIGKILL)
            except (ProcessLookupError, ValueError):
                pass
        self.proc.wait(30)

    def pid(self, rank: int) -> int:
        f = self.flags / f"pid.{rank}"
        return int(f.read_text())


@pytest.fixture
def job(tmp_path):
    jobs: list[Job] = []

    def make(*args: str, **kw) -> Job:
        j = Job(tmp_path, *args, **kw)
        jobs.append(j)
        return j

    yield make
    for j in jobs:
        j.kill()


def _stalled_all(j: Job) -> bool:
    return all(j.dumps(r) for r in range(4))


def test_skipped_all_reduce_names_the_rank_that_never_entered(job):
    j = job("--mode", "skip", "--rank", "2", "--at", "5")
    j.until("a dump from every rank", lambda: _stalled_all(j))
    rc, rep = j.hang()
    assert rc == 1 and rep["stalled"] is True
    assert rep["suspects"] == [2], rep["reason"]
    seqs = {r: rep["ranks"][str(r)]["last_collective"] for r in range(4)}
    # step 5's all_reduce is the 6th collective; rank 2 completed the 5th only
    assert {seqs[r]["seq"] for r in (0, 1, 3)} == {6}
    assert all(seqs[r]["op"].endswith("all_reduce") and seqs[r]["state"] != "completed" for r in (0, 1, 3))
    assert seqs[2] == {"seq": 5, "op": "gloo:all_reduce", "state": "completed"}
    assert list(rep) == ["stalled", "since_s", "ranks", "groups", "suspects", "reason"]
    assert any(g["ranks"] == [0, 1, 3] and g["where"].startswith("all_reduce") for g in rep["groups"])
    # nb watch --once --json: one hang alert, naming rank 2
    w = subprocess.run([*NB, "watch", "--once", "--json", str(j.dir)], env=j.env, capture_output=True, text=True,
                       timeout=120)
    alerts = [json.loads(line) for line in w.stdout.splitlines() if line.strip()]
    hangs = [a for a in alerts if a["rule"] == "hang"]
    assert len(hangs) == 1 and hangs[0]["suspects"] == [2] and hangs[0]["rank"] == 2, w.stdout + w.stderr
    assert "rank 2" in hangs[0]["message"]
    # nb show: the line of the stall
    show = subprocess.run([*NB, "show", str(j.dir)], env=j.env, capture_output=True, text=True, timeout=120)
    line = next(ln for ln in show.stdout.splitlines() if ln.startswith("hung since"))
    assert "at step 5; suspects rank 2" in line, show.stdout


def test_stuck_loader_names_the_rank_and_shows_where(job):
    j = job("--mode", "sleep", "--rank", "2", "--at", "4")
    j.until("a dump from every rank", lambda: _stalled_all(j))
    rc, rep = j.hang()
    assert rc == 1 and rep["suspects"] == [2], rep["reason"]
    assert any("load_batch (hang_ddp.py" in line for line in rep["ranks"]["2"]["stack"])
    assert [g for g in rep["groups"] if g["ranks"] == [2]][0]["where"].startswith("load_batch")


def test_different_collective_at_the_same_sequence_is_named(job):
    j = job("--mode", "mismatch", "--rank", "1", "--at", "3")
    j.until("a dump from every rank", lambda: _stalled_all(j))
    rc, rep = j.hang()
    assert rc == 1 and rep["suspects"] == [1], rep["reason"]
    assert rep["ranks"]["1"]["last_collective"]["op"].endswith("broadcast")
    assert "broadcast" in rep["reason"]


def test_spinning_rank_and_gil_holding_rank_still_leave_stacks(job):
    j = job("--mode", "spin", "--rank", "1", "--at", "3")
    j.until("a dump from every rank", lambda: _stalled_all(j))
    full = json.loads(j.dumps(1)[-1].read_text().splitlines()[0])
    assert full["main"][-1][2] == "spin_forever"
    j.kill()


def test_gil_held_in_c_falls_back_to_faulthandler(tmp_path):
    """One process (no torchrun): the main thread runs a regular expression that
    backtracks forever, holding the interpreter; faulthandler writes the stacks."""
    code = ("import re, time, nblog\n"
            "run = nblog.init('hang', hang_s=2)\n"
            "run.add_scalar('x', 1.0)\n"
            "def regex_forever():\n"
            "    re.match(r'(a+)+$', 'a' * 64 + 'b')\n"
            "regex_forever()\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("NB_")}
    env.update(PYTHONPATH=str(REPO), NB_PROVENANCE="0", NB_DIR=str(tmp_path / "runs"), NB_RUN_ID="gil")
    proc = subprocess.Popen([sys.executable, "-c", code], env=env, cwd=tmp_path, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        fh = tmp_path / "runs" / "hang" / "gil" / "stacks.r0.s0.faulthandler.txt"
        deadline = time.monotonic() + DEADLINE_S
        while time.monotonic() < deadline and not (fh.exists() and "regex_forever" in fh.read_text()):
            time.sleep(0.2)
        assert "regex_forever" in fh.read_text()
        assert not list(fh.parent.glob("stacks.r0.s0.*.jsonl"))  # the Python watchdog could not run
    finally:
        proc.kill()
        proc.wait(30)


def test_healthy_job_slowing_down_twofold_reports_nothing(job):
    j = job("--mode", "slow", "--at", "10", "--steps", "30", "--step-s", "0.5", hang_s="2.5")
    assert j.proc.wait(DEADLINE_S * 2) == 0, j.output()
    assert not list(j.dir.glob("stacks.*.jsonl"))
    rc, rep = j.hang()
    assert rc == 0 and rep["stalled"] is False and rep["suspects"] == []


def test_usr1_writes_a_dump_and_training_goes_on(job):
    j = job("--mode", "none", "--steps", "60", "--step-s", "0.1", hang_s="off")
    j.until("rank 1 ready", lambda: (j.flags / "ready.1").exists())  # nb.init installed the handler
    os.kill(j.pid(1), signal.SIGUSR1)
    j.until("rank 1's dump", lambda: bool(j.dumps(1)))
    assert j.proc.wait(DEADLINE_S) == 0, j.output()
    assert all((j.flags / f"done.{r}").read_text() == "60" for r in range(4))
    d = json.loads(j.dumps(1)[0].read_text().splitlines()[0])
    assert d["kind"] == "signal" and d["rank"] == 1
    assert not any(j.dumps(r) for r in (0, 2, 3))
    rc, rep = j.hang()
    assert rc == 0 and rep["stalled"] is False
