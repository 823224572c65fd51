"""``nb hang`` on dumps written by the real writer code (``Watchdog`` with an injected
clock and Flight Recorder record): exit status, JSON keys, each suspect rule, bad input."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from nblog.write import _hang as H

REPO = Path(__file__).resolve().parents[2]
NB = [sys.executable, "-c", "from nbcli.app import main; main()"]


def _record(seq: int, op: str = "gloo:all_reduce"):
    def make():
        entries = [{"pg_id": 0, "pg": "default_pg", "seq": s, "op": "gloo:all_reduce" if s < seq else op,
                    "state": "completed" if s < seq else "scheduled", "raw_state": "scheduled", "p2p": False,
                    "sizes": [[4]]} for s in range(1, seq + 1)]
        return {"version": "2.10", "pg_status": {}, "pg_config": {}, "entries": entries}, None
    return make


def _run(tmp_path: Path, world: int, records: dict, *, moved: set | None = None, kind: str = "stall") -> Path:
    run_dir = tmp_path / "p" / "r1"
    run_dir.mkdir(parents=True)
    (run_dir / "run.json").write_text(json.dumps({"world_size": world, "sessions": [{"session": 0,
                                                                                     "world_size": world}]}))
    for rank, rec in records.items():
        now, step = [10.0], [7]
        dog = H.Watchdog(str(run_dir), rank, 0, f"h{rank}", lambda step=step: step[0], hang_s=5, signum=None,
                         faulthandler=False, clock=lambda now=now: now[0], wall=lambda now=now: 1e9 + now[0],
                         record=rec or (lambda: (None, "no record")))
        dog.poll()
        if kind == "signal":
            dog.request()
        else:
            now[0] += 5
        dog.poll()
        if moved and rank in moved:
            step[0] = 8
            dog.poll()
    return run_dir


def _hang(run_dir: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO), "NO_COLOR": "1"}
    return subprocess.run([*NB, "hang", *args, str(run_dir)], capture_output=True, text=True, env=env, timeout=120)


def test_lowest_sequence_is_the_suspect_and_keys_are_stable(tmp_path):
    d = _run(tmp_path, 4, {0: _record(6), 1: _record(6), 2: _record(5), 3: _record(6)})
    p = _hang(d, "--json")
    assert p.returncode == 1, p.stderr
    rep = json.loads(p.stdout)
    assert list(rep) == ["stalled", "since_s", "ranks", "groups", "suspects", "reason"]
    assert rep["stalled"] is True and rep["suspects"] == [2]
    assert rep["ranks"]["0"]["last_collective"] == {"seq": 6, "op": "gloo:all_reduce", "state": "scheduled"}
    assert {"host", "step", "last_collective", "stack"} <= set(rep["ranks"]["2"])
    assert rep["ranks"]["2"]["host"] == "h2" and rep["ranks"]["2"]["step"] == 7
    assert "never entered" in rep["reason"]
    text = _hang(d)
    assert text.returncode == 1 and "suspects\t2" in text.stdout


def test_a_different_op_at_the_same_sequence_is_named(tmp_path):
    d = _run(tmp_path, 3, {0: _record(4), 1: _record(4, "gloo:broadcast"), 2: _record(4)})
    rep = json.loads(_hang(d, "--json").stdout)
    assert rep["suspects"] == [1] and "gloo:broadcast" in rep["reason"]


def test_a_rank_without_a_dump_is_the_suspect(tmp_path):
    d = _run(tmp_path, 4, {0: None, 1: None, 3: None})
    rep = json.loads(_hang(d, "--json").stdout)
    assert rep["suspects"] == [2] and "no dump" in rep["reason"]


def test_moved_and_signal_dumps_are_not_stalled(tmp_path):
    d = _run(tmp_path, 2, {0: _record(3), 1: _record(3)}, moved={0, 1})
    p = _hang(d, "--json")
    assert p.returncode == 0 and json.loads(p.stdout)["stalled"] is False
    d2 = _run(tmp_path / "b", 2, {0: None, 1: None}, kind="signal")
    p2 = _hang(d2, "--json")
    assert p2.returncode == 0 and json.loads(p2.stdout)["stalled"] is False


def test_no_dumps_exit_0(tmp_path):
    d = _run(tmp_path, 2, {})
    p = _hang(d, "--json")
    assert p.returncode == 0 and json.loads(p.stdout)["reason"] == "no hang dumps in this run"


@pytest.mark.parametrize("junk", [b"", b"{not json", b"[1, 2]\n"])
def test_a_damaged_dump_is_skipped_not_a_traceback(tmp_path, junk):
    d = _run(tmp_path, 2, {0: _record(3), 1: _record(3)})
    (d / "stacks.r1.s0.9.jsonl").write_bytes(junk)
    p = _hang(d, "--json")
    assert "Traceback" not in p.stderr and p.returncode in (0, 1)
    assert "damaged dumps skipped: ranks 1" in json.loads(p.stdout)["reason"]


def test_missing_run_is_a_clear_error(tmp_path):
    p = _hang(tmp_path / "nope")
    assert p.returncode not in (0,) and "Traceback" not in p.stderr and "no run matches" in p.stderr
