"""A non-zero rank waiting for rank 0 at scale (issue 18): its polls back off with
jitter up to a pause that grows with the job, an earlier launch's run.json is read
again only when its stat changed, and init finds the rank's session by name instead of
listing the run folder again. Clock, sleep and randomness are injected: no test waits."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import nblog as nb
from nblog.format._runfile import read_run_json
from nblog.write import _init as nb_init

pytestmark = pytest.mark.timing  # run again beside a CPU hog: scripts/test_loaded.sh

LAUNCH0 = {"TORCHELASTIC_RUN_ID": "job-7", "TORCHELASTIC_RESTART_COUNT": "0"}
LAUNCH1 = {"TORCHELASTIC_RUN_ID": "job-7", "TORCHELASTIC_RESTART_COUNT": "1"}


class FakeTime:
    """A clock that moves only when the code under test sleeps."""

    def __init__(self, on_sleep=None):
        self.now = 0.0
        self.sleeps: list[float] = []
        self.on_sleep = on_sleep

    def clock(self) -> float:
        return self.now

    def sleep(self, s: float) -> None:
        self.sleeps.append(s)
        self.now += s
        if self.on_sleep is not None:
            self.on_sleep(len(self.sleeps))


def write_run_json(run_dir: Path, launches: list[dict]) -> None:
    """run.json as rank 0 writes it: a new file renamed over the old one."""
    run_dir.mkdir(parents=True, exist_ok=True)
    meta = {"id": run_dir.name, "project": run_dir.parent.name, "status": "running",
            "sessions": [{"session": i, "start": 1.7e9, "launch": la} for i, la in enumerate(launches)]}
    tmp = run_dir / "run.json.tmp"
    tmp.write_text(json.dumps(meta))
    os.replace(tmp, run_dir / "run.json")


@pytest.mark.parametrize("world, cap", [(8, 0.5), (1024, 4.0), (8192, 10.0)])
def test_polls_back_off_with_jitter_up_to_a_pause_that_grows_with_the_job(tmp_path, world, cap):
    never = str(tmp_path / "runs" / "p" / "run-00000001")  # rank 0 never comes
    slowest, fastest = FakeTime(), FakeTime()
    for t, rand in ((slowest, 1.0), (fastest, 0.0)):
        got = nb_init._wait_for(never, 60.0, LAUNCH0, world_size=world, sleep=t.sleep, clock=t.clock,
                                rand=lambda rand=rand: rand)
        assert got is None
        assert sum(t.sleeps) == pytest.approx(60.0)  # it waited the whole NB_WAIT_S, no longer
    assert slowest.sleeps[0] == pytest.approx(nb_init.WAIT_FIRST_S)  # the first look comes soon
    assert all(b >= a for a, b in zip(slowest.sleeps, slowest.sleeps[1:-1], strict=False))
    assert max(slowest.sleeps) == pytest.approx(cap)
    # jitter: each pause is drawn between half and all of the current one
    assert fastest.sleeps[0] == pytest.approx(nb_init.WAIT_FIRST_S / 2)
    assert max(fastest.sleeps) == pytest.approx(cap / 2)
    # polls in a minute: bounded by the cap, whatever the job (a fixed 0.5 s made 120)
    assert len(slowest.sleeps) <= 60 / cap + 12


def test_an_earlier_launchs_run_json_is_read_again_only_when_it_changes(tmp_path):
    run_dir = tmp_path / "runs" / "p" / "run-00000001"
    write_run_json(run_dir, [LAUNCH0])  # a requeued job: run.json of the earlier launch is there
    reads: list[str] = []

    def read(d: str):
        reads.append(d)
        return read_run_json(d)

    def rank0_arrives(polls: int) -> None:
        if polls == 40:
            write_run_json(run_dir, [LAUNCH0, LAUNCH1])

    t = FakeTime(rank0_arrives)
    meta = nb_init._wait_for(str(run_dir), 120.0, LAUNCH1, world_size=64, sleep=t.sleep, clock=t.clock,
                             rand=lambda: 1.0, read=read)
    assert meta is not None and meta["sessions"][-1]["launch"] == LAUNCH1
    assert len(t.sleeps) == 40 and t.now < nb_init.WAIT_REREAD_S
    assert len(reads) == 2  # once at the first look, once after rank 0 replaced it: not 41 times


def test_run_json_is_read_again_after_a_while_even_if_its_stat_looks_the_same(tmp_path):
    run_dir = tmp_path / "runs" / "p" / "run-00000001"
    write_run_json(run_dir, [LAUNCH0])
    reads: list[str] = []
    t = FakeTime()
    got = nb_init._wait_for(str(run_dir), 100.0, LAUNCH1, world_size=64, sleep=t.sleep, clock=t.clock,
                            rand=lambda: 1.0, read=lambda d: reads.append(d) or read_run_json(d))
    assert got is None
    assert len(reads) == 1 + int(100 // nb_init.WAIT_REREAD_S)  # an attribute cache cannot hide a change forever


_COUNT_CALLS = r"""
import json, os, sys
root, env = sys.argv[1], json.loads(sys.argv[2])
counts = {}

def hook(event, args):
    if event in ("os.listdir", "os.scandir", "open") and args and isinstance(args[0], str):
        path = os.path.abspath(args[0])
        if path == root or path.startswith(root + os.sep):
            key = event + " " + os.path.relpath(path, root)
            counts[key] = counts.get(key, 0) + 1

import nblog as nb
sys.addaudithook(hook)
run = nb.init("p", _environ=env, system=False, provenance=False)
with run.timer("t", step=0, all_ranks=True):
    pass
run.finish()
print(json.dumps(counts))
"""


def test_a_non_zero_rank_lists_each_folder_once_and_reads_run_json_once(tmp_path):
    root = tmp_path / "runs"
    env0 = {**LAUNCH0, "RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "64", "NB_DIR": str(root)}
    run0 = nb.init("p", _environ=env0, system=False, provenance=False)
    rid = os.path.basename(run0.dir)
    for k in range(2, 64):  # the other ranks' logs, already there
        (root / "p" / rid / f"events.r{k}.s0.log").write_bytes(b"")
    env1 = {**env0, "RANK": "1", "LOCAL_RANK": "1"}
    out = subprocess.run([sys.executable, "-c", _COUNT_CALLS, str(root), json.dumps(env1)], capture_output=True,
                         text=True, timeout=120, check=True)
    run0.finish()
    counts = json.loads(out.stdout.strip().splitlines()[-1])
    listed = {k: v for k, v in counts.items() if k.startswith(("os.listdir", "os.scandir"))}
    assert listed == {"os.listdir .": 1, "os.listdir p": 1, f"os.listdir p/{rid}": 1}, counts
    assert counts[f"open p/{rid}/run.json"] == 1, counts
    assert os.path.exists(root / "p" / rid / "events.r1.s0.log")
